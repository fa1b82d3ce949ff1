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
    the same however the segments were produced, and however many threads merge them.

    A stable counting sort by word, then one pass per word: threads take static ranges of
    segments to count and place their pairs (a word's pairs from earlier segments first), then
    static ranges of words to sum duplicates (tests/naive.py merge_pairs is the serial definition).
    """
    n_parts = numba.get_num_threads()
    n_segments = segment_starts.shape[0]
    segment_work = np.zeros(n_segments + 1, np.int64)
    for s in range(n_segments):
        segment_work[s + 1] = segment_work[s] + segment_sizes[s]
    segment_bounds = even_ranges(segment_work, n_parts)
    # fill[part, w]: where the part's next pair of word w goes
    fill = np.zeros((n_parts, n_words), np.int64)
    for part in prange(n_parts):
        for s in range(segment_bounds[part], segment_bounds[part + 1]):
            for p in range(segment_starts[s], segment_starts[s] + segment_sizes[s]):
                fill[part, pair_words[p]] += 1
    per_word = np.zeros(n_words + 1, np.int64)
    for w in range(n_words):
        position = per_word[w]
        for part in range(n_parts):
            count = fill[part, w]
            fill[part, w] = position
            position += count
        per_word[w + 1] = position
    n_pairs = per_word[n_words]
    sorted_topics = np.empty(n_pairs, np.int64)
    sorted_values = np.empty(n_pairs, pair_values.dtype)
    for part in prange(n_parts):
        for s in range(segment_bounds[part], segment_bounds[part + 1]):
            for p in range(segment_starts[s], segment_starts[s] + segment_sizes[s]):
                w = pair_words[p]
                sorted_topics[fill[part, w]] = pair_topics[p]
                sorted_values[fill[part, w]] = pair_values[p]
                fill[part, w] += 1
    # sum duplicates within each word in place (a word's distinct pairs move to the front of its
    # range) through a dense per-topic accumulator
    distinct = np.zeros(n_words + 1, np.int64)
    word_bounds = even_ranges(per_word, n_parts)
    for part in prange(n_parts):
        slot = np.full(n_topics, -1, np.int64)
        for w in range(word_bounds[part], word_bounds[part + 1]):
            first = per_word[w]
            n = 0
            for p in range(per_word[w], per_word[w + 1]):
                k = sorted_topics[p]
                value = sorted_values[p]
                if slot[k] < 0:
                    slot[k] = first + n
                    sorted_topics[first + n] = k
                    sorted_values[first + n] = value
                    n += 1
                else:
                    sorted_values[slot[k]] += value
            for q in range(first, first + n):
                slot[sorted_topics[q]] = -1
            distinct[w + 1] = n
    for w in range(n_words):
        distinct[w + 1] += distinct[w]
    out_words = np.empty(distinct[n_words], np.int64)
    out_topics = np.empty(distinct[n_words], np.int64)
    out_values = np.empty(distinct[n_words], pair_values.dtype)
    for part in prange(n_parts):
        for w in range(word_bounds[part], word_bounds[part + 1]):
            for j in range(distinct[w + 1] - distinct[w]):
                out_words[distinct[w] + j] = w
                out_topics[distinct[w] + j] = sorted_topics[per_word[w] + j]
                out_values[distinct[w] + j] = sorted_values[per_word[w] + j]
    return out_words, out_topics, out_values
