"""Merging per-document sparse statistics into one minibatch statistic, in a fixed order."""

from __future__ import annotations

import numpy as np
from numba import njit

from . import pieces
from .ranges import even_ranges


def merge_pairs(pair_words, pair_topics, pair_values, segment_starts, segment_sizes,
                n_words, n_topics):
    """Sum values of equal (word, topic) pairs over segments (one segment per document).

    Segment s holds pairs [segment_starts[s], segment_starts[s] + segment_sizes[s]). Returns
    (words, topics, values): every distinct pair once, grouped by word in ascending order and,
    within a word, topics in the order first met. Sums run in segment order, so the result is
    the same however the segments were produced, and on any number of threads.

    The work is cut twice into pieces of about equal size, which the threads take as they come
    free (kernels/pieces.py): the segments, to count and then place each pair among its word's
    (a counting sort by word, stable in segment order because the pieces are placed in order),
    and the words, to sum each word's pairs through a dense per-topic accumulator. Only running
    sums are serial: of the segments' sizes, of the counts over (word, piece) and of each word's
    distinct pairs. The counts take a piece x word array: pieces are few (kernels/pieces.py
    piece_count), words at most a minibatch's.
    """
    n_segments = segment_starts.shape[0]
    n_parts = max(1, min(pieces.piece_count(pieces.threads()), n_segments))
    segment_work = np.zeros(n_segments + 1, np.int64)
    np.cumsum(segment_sizes, dtype=np.int64, out=segment_work[1:])
    segment_bounds = even_ranges(segment_work, n_parts)

    # counting sort by word: part p's pairs of word w go to [place[p, w], ...), parts in order
    place = np.zeros((n_parts, n_words), np.int64)
    pieces.run(_count_words, n_parts, segment_bounds, segment_starts, segment_sizes, pair_words, place)
    per_word = _place_by_word(place)
    sorted_topics = np.empty(per_word[n_words], np.int64)
    sorted_values = np.empty(per_word[n_words], pair_values.dtype)
    pieces.run(_place_pairs, n_parts, segment_bounds, segment_starts, segment_sizes, pair_words, pair_topics,
               pair_values, place, sorted_topics, sorted_values)

    # sum each word's duplicates, compacted to the front of the word's own range
    distinct = np.zeros(n_words + 1, np.int64)
    word_bounds = even_ranges(per_word, n_parts)
    pieces.run_ranges(_sum_duplicates, word_bounds, n_topics, per_word, sorted_topics, sorted_values, distinct)
    np.cumsum(distinct, out=distinct)
    out_words = np.empty(distinct[n_words], np.int64)
    out_topics = np.empty(distinct[n_words], np.int64)
    out_values = np.empty(distinct[n_words], pair_values.dtype)
    pieces.run_ranges(_write_distinct, word_bounds, per_word, distinct, sorted_topics, sorted_values, out_words,
                      out_topics, out_values)
    return out_words, out_topics, out_values


@njit(cache=True, nogil=True)
def _count_words(part, segment_bounds, segment_starts, segment_sizes, pair_words, place):
    """place[part, w] = the pairs of word w in the part's segments."""
    for s in range(segment_bounds[part], segment_bounds[part + 1]):
        for i in range(segment_starts[s], segment_starts[s] + segment_sizes[s]):
            place[part, pair_words[i]] += 1


@njit(cache=True)
def _place_by_word(place):
    """Turn the counts place[part, w] into where part's pairs of w start (words ascending, parts in
    order within a word); returns the words' running sums (n_words + 1)."""
    n_parts, n_words = place.shape
    per_word = np.zeros(n_words + 1, np.int64)
    for w in range(n_words):
        total = per_word[w]
        for part in range(n_parts):
            count = place[part, w]
            place[part, w] = total
            total += count
        per_word[w + 1] = total
    return per_word


@njit(cache=True, nogil=True)
def _place_pairs(part, segment_bounds, segment_starts, segment_sizes, pair_words, pair_topics, pair_values, place,
                 sorted_topics, sorted_values):
    """The part's pairs to their places among their words' (in segment order)."""
    for s in range(segment_bounds[part], segment_bounds[part + 1]):
        for i in range(segment_starts[s], segment_starts[s] + segment_sizes[s]):
            w = pair_words[i]
            sorted_topics[place[part, w]] = pair_topics[i]
            sorted_values[place[part, w]] = pair_values[i]
            place[part, w] += 1


@njit(cache=True, nogil=True)
def _sum_duplicates(first_word, last_word, n_topics, per_word, sorted_topics, sorted_values, distinct):
    """Words first_word..last_word - 1: each word's distinct topics summed and compacted to the front
    of its range, in the order first met; distinct[w + 1] = how many."""
    slot = np.full(n_topics, -1, np.int64)
    for w in range(first_word, last_word):
        first = per_word[w]
        n_out = first
        for p in range(per_word[w], per_word[w + 1]):
            k = sorted_topics[p]
            value = sorted_values[p]
            if slot[k] < 0:
                slot[k] = n_out
                sorted_topics[n_out] = k
                sorted_values[n_out] = value
                n_out += 1
            else:
                sorted_values[slot[k]] += value
        for q in range(first, n_out):
            slot[sorted_topics[q]] = -1
        distinct[w + 1] = n_out - first


@njit(cache=True, nogil=True)
def _write_distinct(first_word, last_word, per_word, distinct, sorted_topics, sorted_values, out_words, out_topics,
                    out_values):
    """Words first_word..last_word - 1's distinct pairs to their place distinct[w] of the output."""
    for w in range(first_word, last_word):
        for q in range(distinct[w + 1] - distinct[w]):
            out_words[distinct[w] + q] = w
            out_topics[distinct[w] + q] = sorted_topics[per_word[w] + q]
            out_values[distinct[w] + q] = sorted_values[per_word[w] + q]
