"""Merging per-document sparse statistics into one minibatch statistic, in a fixed order."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def merge_pairs(pair_words, pair_topics, pair_values, segment_starts, segment_sizes,
                n_words, n_topics):
    """Sum values of equal (word, topic) pairs over segments (one segment per document).

    Segment s holds pairs [segment_starts[s], segment_starts[s] + segment_sizes[s]). Returns
    (words, topics, values): every distinct pair once, grouped by word in ascending order and,
    within a word, topics in the order first met. Sums run in segment order, so the result is
    the same however the segments were produced.
    """
    per_word = np.zeros(n_words + 1, np.int64)
    for s in range(segment_starts.shape[0]):
        for p in range(segment_starts[s], segment_starts[s] + segment_sizes[s]):
            per_word[pair_words[p] + 1] += 1
    for w in range(n_words):
        per_word[w + 1] += per_word[w]
    # counting sort by word, stable in segment order
    fill = per_word[:-1].copy()
    sorted_topics = np.empty(per_word[n_words], np.int64)
    sorted_values = np.empty(per_word[n_words], pair_values.dtype)
    for s in range(segment_starts.shape[0]):
        for p in range(segment_starts[s], segment_starts[s] + segment_sizes[s]):
            w = pair_words[p]
            sorted_topics[fill[w]] = pair_topics[p]
            sorted_values[fill[w]] = pair_values[p]
            fill[w] += 1
    # sum duplicates within each word through a dense per-topic accumulator
    slot = np.full(n_topics, -1, np.int64)
    out_words = np.empty(per_word[n_words], np.int64)
    out_topics = np.empty(per_word[n_words], np.int64)
    out_values = np.zeros(per_word[n_words], pair_values.dtype)
    n_out = 0
    for w in range(n_words):
        first = n_out
        for p in range(per_word[w], per_word[w + 1]):
            k = sorted_topics[p]
            if slot[k] < 0:
                slot[k] = n_out
                out_words[n_out] = w
                out_topics[n_out] = k
                n_out += 1
            out_values[slot[k]] += sorted_values[p]
        for q in range(first, n_out):
            slot[out_topics[q]] = -1
    return out_words[:n_out], out_topics[:n_out], out_values[:n_out]
