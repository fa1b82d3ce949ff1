"""Tokenizing and counting kernels for ingest.

Text arrives as an array of Unicode code points (uint8 for ASCII text, uint32 otherwise). Words
are interned in an open-addressing hash table keyed by their code points, so no Python string is
made per token:

    slots        int32[capacity]   word id or -1; capacity a power of two, at most half full
    word_hash    uint64[n_cap]     hash of word i
    pool         uint32[p_cap]     the code points of all words, concatenated
    pool_offsets int64[n_cap + 1]  word i is pool[pool_offsets[i]:pool_offsets[i + 1]]

The interning kernels stop early (returning how far they got) when a table is full; the caller
grows the tables and calls again, so capacity never needs to be guessed in advance.
"""

from __future__ import annotations

import numpy as np
from numba import njit

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)


@njit(inline="always")
def hash_span(chars, start, stop):
    """The hash of the word chars[start:stop]: FNV-1a over the code points, then a splitmix64
    finalizer so that both the low bits (slots) and the high bits (ingest's partitions) are mixed."""
    h = FNV_OFFSET
    for p in range(start, stop):
        h = (h ^ np.uint64(chars[p])) * FNV_PRIME
    h ^= h >> np.uint64(31)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(29)
    return h


@njit(inline="always")  # inlined: a call per token would pay reference counting on five arrays
def _lookup_or_insert(chars, start, stop, slots, word_hash, pool, pool_offsets, n_words):
    """(word id, n_words) of chars[start:stop], inserting it if new; id -1 if a table is full."""
    h = hash_span(chars, start, stop)
    mask = slots.shape[0] - 1
    i = np.int64(h & np.uint64(mask))
    length = stop - start
    while slots[i] != -1:
        w = slots[i]
        if word_hash[w] == h and pool_offsets[w + 1] - pool_offsets[w] == length:
            base = pool_offsets[w]
            same = True
            for p in range(length):
                if pool[base + p] != chars[start + p]:
                    same = False
                    break
            if same:
                return w, n_words
        i = (i + 1) & mask
    pool_end = pool_offsets[n_words]
    if 2 * (n_words + 1) > slots.shape[0] or n_words + 1 >= word_hash.shape[0] or pool_end + length > pool.shape[0]:
        return -1, n_words
    for p in range(length):
        pool[pool_end + p] = chars[start + p]
    pool_offsets[n_words + 1] = pool_end + length
    word_hash[n_words] = h
    slots[i] = n_words
    return n_words, n_words + 1


@njit(cache=True)
def intern_letter_runs(chars, pos, is_word_char, min_len, slots, word_hash, pool, pool_offsets, n_words, out_ids,
                       n_out):
    """Word ids of the runs of word characters of length >= min_len in chars[pos:].

    Writes ids to out_ids[n_out:]; returns (pos, n_out, n_words) where pos == len(chars) when
    done, or the start of the run that did not fit (grow the tables or out_ids and call again).
    """
    n = chars.shape[0]
    while pos < n:
        if not is_word_char[chars[pos]]:
            pos += 1
            continue
        stop = pos + 1
        while stop < n and is_word_char[chars[stop]]:
            stop += 1
        if stop - pos >= min_len:
            if n_out == out_ids.shape[0]:
                return pos, n_out, n_words
            w, n_words = _lookup_or_insert(chars, pos, stop, slots, word_hash, pool, pool_offsets, n_words)
            if w < 0:
                return pos, n_out, n_words
            out_ids[n_out] = w
            n_out += 1
        pos = stop
    return pos, n_out, n_words


@njit(cache=True)
def intern_spans(chars, starts, stops, k, slots, word_hash, pool, pool_offsets, n_words, out_ids):
    """Word ids of the spans chars[starts[j]:stops[j]] for j >= k, written to out_ids[j].

    Returns (k, n_words) with k == len(starts) when done, else the span that did not fit.
    """
    while k < starts.shape[0]:
        w, n_words = _lookup_or_insert(chars, starts[k], stops[k], slots, word_hash, pool, pool_offsets, n_words)
        if w < 0:
            return k, n_words
        out_ids[k] = w
        k += 1
    return k, n_words


@njit(cache=True)
def count_rows(ids, row_bounds, counts, first_kept, scratch, term_counts, doc_freqs):
    """Bag-of-words rows from token ids.

    Row r holds the tokens ids[row_bounds[r]:row_bounds[r + 1]], each occurring counts[t] times
    (1 for running text). Ids below first_kept (stop words) are dropped. Returns CSR arrays
    (indptr, indices, data) with each row's words in order of first appearance, and adds
    sum of counts to term_counts[w] and the number of rows containing w to doc_freqs[w].
    `scratch` must be zeros of length > max(ids); it is left zeroed.
    """
    n_rows = row_bounds.shape[0] - 1
    indptr = np.zeros(n_rows + 1, np.int64)
    indices = np.empty(ids.shape[0], np.int32)
    data = np.empty(ids.shape[0], np.uint32)
    nnz = 0
    for r in range(n_rows):
        row_start = nnz
        for t in range(row_bounds[r], row_bounds[r + 1]):
            w = ids[t]
            if w < first_kept:
                continue
            if scratch[w] == 0:
                indices[nnz] = w
                nnz += 1
            scratch[w] += counts[t]
        for p in range(row_start, nnz):
            w = indices[p]
            data[p] = scratch[w]
            term_counts[w] += scratch[w]
            doc_freqs[w] += 1
            scratch[w] = 0
        indptr[r + 1] = nnz
    return indptr, indices[:nnz].copy(), data[:nnz].copy()


@njit(cache=True)
def remap_rows(indptr, indices, data, new_id):
    """Rows with every word w replaced by new_id[w], words with new_id < 0 dropped, and each
    row's entries sorted by new id. Returns (indptr, indices, data); rows may become empty."""
    n_rows = indptr.shape[0] - 1
    out_indptr = np.zeros(n_rows + 1, np.int64)
    out_indices = np.empty(indices.shape[0], np.int64)
    out_data = np.empty(indices.shape[0], data.dtype)
    nnz = 0
    for r in range(n_rows):
        row_start = nnz
        for p in range(indptr[r], indptr[r + 1]):
            w = new_id[indices[p]]
            if w >= 0:
                out_indices[nnz] = w
                out_data[nnz] = data[p]
                nnz += 1
        order = np.argsort(out_indices[row_start:nnz])
        out_indices[row_start:nnz] = out_indices[row_start:nnz][order]
        out_data[row_start:nnz] = out_data[row_start:nnz][order]
        out_indptr[r + 1] = nnz
    return out_indptr, out_indices[:nnz], out_data[:nnz]


@njit(cache=True)
def build_slots(word_hash, n_words, capacity):
    """A slot table of `capacity` (a power of two) holding words 0..n_words-1, by linear probing."""
    slots = np.full(capacity, -1, np.int32)
    mask = capacity - 1
    for w in range(n_words):
        i = np.int64(word_hash[w] & np.uint64(mask))
        while slots[i] != -1:
            i = (i + 1) & mask
        slots[i] = w
    return slots
