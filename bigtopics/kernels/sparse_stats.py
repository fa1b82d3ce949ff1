"""Merging per-document sparse statistics into one minibatch statistic, in a fixed order."""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .ranges import even_ranges


@njit(parallel=True)
def merge_pairs(pair_words, pair_topics, pair_values, segment_starts, segment_sizes,
                n_words, n_topics):
    """Sum values of equal (word, topic) pairs over segments (one segment per document).

    Segment s holds pairs [segment_starts[s], segment_starts[s] + segment_sizes[s]). Returns
    (words, topics, values): every distinct pair once, grouped by word in ascending order and,
    within a word, topics in the order first met. Sums run in segment order, so the result is
    the same however the segments were produced, and on any number of threads.

    The work is split twice, each time into static ranges of about equal size: the segments,
    to count and then place each pair among its word's (a counting sort by word, stable in
    segment order because the ranges are placed in order), and the words, to sum each word's
    pairs through a dense per-topic accumulator. Only running sums are serial: of the segments'
    sizes, of the counts over (word, range) and of each word's distinct pairs.
    """
    n_segments = segment_starts.shape[0]
    n_parts = max(1, min(numba.get_num_threads(), n_segments))
    segment_work = np.zeros(n_segments + 1, np.int64)
    for s in range(n_segments):
        segment_work[s + 1] = segment_work[s] + segment_sizes[s]
    segment_bounds = even_ranges(segment_work, n_parts)

    # counting sort by word: part p's pairs of word w go to [place[p, w], ...), parts in order
    place = np.zeros((n_parts, n_words), np.int64)
    for part in prange(n_parts):
        for s in range(segment_bounds[part], segment_bounds[part + 1]):
            for i in range(segment_starts[s], segment_starts[s] + segment_sizes[s]):
                place[part, pair_words[i]] += 1
    per_word = np.zeros(n_words + 1, np.int64)
    for w in range(n_words):
        total = per_word[w]
        for part in range(n_parts):
            count = place[part, w]
            place[part, w] = total
            total += count
        per_word[w + 1] = total
    sorted_topics = np.empty(per_word[n_words], np.int64)
    sorted_values = np.empty(per_word[n_words], pair_values.dtype)
    for part in prange(n_parts):
        for s in range(segment_bounds[part], segment_bounds[part + 1]):
            for i in range(segment_starts[s], segment_starts[s] + segment_sizes[s]):
                w = pair_words[i]
                sorted_topics[place[part, w]] = pair_topics[i]
                sorted_values[place[part, w]] = pair_values[i]
                place[part, w] += 1

    # sum each word's duplicates, compacted to the front of the word's own range
    distinct = np.zeros(n_words + 1, np.int64)
    word_bounds = even_ranges(per_word, n_parts)
    for part in prange(n_parts):
        slot = np.full(n_topics, -1, np.int64)
        for w in range(word_bounds[part], word_bounds[part + 1]):
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
    for w in range(n_words):
        distinct[w + 1] += distinct[w]
    out_words = np.empty(distinct[n_words], np.int64)
    out_topics = np.empty(distinct[n_words], np.int64)
    out_values = np.empty(distinct[n_words], pair_values.dtype)
    for part in prange(n_parts):
        for w in range(word_bounds[part], word_bounds[part + 1]):
            for q in range(distinct[w + 1] - distinct[w]):
                out_words[distinct[w] + q] = w
                out_topics[distinct[w] + q] = sorted_topics[per_word[w] + q]
                out_values[distinct[w] + q] = sorted_values[per_word[w] + q]
    return out_words, out_topics, out_values
