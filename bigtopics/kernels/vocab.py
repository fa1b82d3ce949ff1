"""Kernels of ingest's vocabulary on disk (bigtopics/ingest/runs.py).

A set of words is held as code points and offsets, as the tokenizer's pool (kernels/tokens.py):

    chars    uint32[total length]  the code points of all words, concatenated
    offsets  int64[n + 1]          word i is chars[offsets[i]:offsets[i + 1]]
    hashes   uint64[n]             hash_span of each word

Words are compared by their code points, so hashes only ever speed things up: two words with the
same hash are still told apart.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .tokens import hash_span


@njit(inline="always")
def _same_word(a_chars, a_start, a_stop, b_chars, b_start, b_stop):
    if a_stop - a_start != b_stop - b_start:
        return False
    for p in range(a_stop - a_start):
        if a_chars[a_start + p] != b_chars[b_start + p]:
            return False
    return True


@njit(cache=True)
def hash_words(chars, offsets):
    """hashes[i] = hash_span of word i."""
    n = offsets.shape[0] - 1
    out = np.empty(n, np.uint64)
    for i in range(n):
        out[i] = hash_span(chars, offsets[i], offsets[i + 1])
    return out


@njit(cache=True)
def gather_words(chars, offsets, order):
    """(chars, offsets) of the words order[0], order[1], ... of (chars, offsets)."""
    out_offsets = np.zeros(order.shape[0] + 1, np.int64)
    for j in range(order.shape[0]):
        out_offsets[j + 1] = out_offsets[j] + offsets[order[j] + 1] - offsets[order[j]]
    out = np.empty(out_offsets[-1], np.uint32)
    for j in range(order.shape[0]):
        a = offsets[order[j]]
        out[out_offsets[j]:out_offsets[j + 1]] = chars[a:a + out_offsets[j + 1] - out_offsets[j]]
    return out, out_offsets


@njit(cache=True)
def group_same_words(sorted_hashes, order, chars, offsets):
    """(starts, ok): the runs of equal hashes in sorted_hashes (hashes of words order[0], order[1],
    ...), as start positions followed by len(order); ok is False if some run holds two different
    words (a hash collision: the caller then groups by the words themselves)."""
    n = order.shape[0]
    starts = np.empty(n + 1, np.int64)
    n_groups = 0
    for j in range(n):
        if j == 0 or sorted_hashes[j] != sorted_hashes[j - 1]:
            starts[n_groups] = j
            n_groups += 1
            first = order[j]
        else:
            w = order[j]
            if not _same_word(chars, offsets[first], offsets[first + 1], chars, offsets[w], offsets[w + 1]):
                return starts[:0], False
    starts[n_groups] = n
    return starts[:n_groups + 1], True


@njit(cache=True)
def match_words(hashes, chars, offsets, known_hashes, known_order, known_chars, known_offsets):
    """ids[i] = the known word equal to word i, or -1. known_hashes is sorted and holds the hashes
    of the known words known_order[0], known_order[1], ..."""
    n = hashes.shape[0]
    ids = np.full(n, -1, np.int64)
    for i in range(n):
        j = np.searchsorted(known_hashes, hashes[i])
        while j < known_hashes.shape[0] and known_hashes[j] == hashes[i]:
            k = known_order[j]
            if _same_word(chars, offsets[i], offsets[i + 1], known_chars, known_offsets[k], known_offsets[k + 1]):
                ids[i] = k
                break
            j += 1
    return ids
