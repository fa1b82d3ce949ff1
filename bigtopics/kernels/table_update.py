"""The global step's additions to the topic-word table, in parallel over word rows.

    M[topics[i], words[i]] += coef * values[i]   and   Msum[topics[i]] += the same,

for every pair i with a non-zero value (algorithms.md section 1). The result is bit for bit the
one of adding the pairs one by one in array order (tests/naive.py `add_pairs_in_order`), on any
number of threads:

- the pairs arrive grouped by word (one run of pairs per row; `word_runs`), and a row is touched
  by its own run only, so the runs are independent except for the pool space a growing row
  takes, and the topic totals;
- `plan_rows` (parallel) finds each row's size and capacity after its run, and where in it each
  pair's topic already is; the caller then gives
  every row that grows a fresh segment at the end of the pool, in run order (a running sum:
  serial but O(rows));
- `add_runs` (parallel) applies each run: in place when the row keeps its capacity, else through
  scratch, growing as the one-by-one addition would (each time the load passes MAX_LOAD, to the
  capacity of the size then, re-inserting in slot order), so every entry ends in the same slot;
- `add_topic_sums` (serial) adds the amounts to Msum in array order: floating-point sums depend
  on their order, and this pass is a sequential read of the pairs into a K-vector.

The two parallel kernels are cached, unlike the samplers' drivers: every process that holds a
table (a `train`, each worker of a cluster) takes a global step, and compiling them costs seconds.

Where the grown rows sit in the pool differs from one-by-one addition (no intermediate segments
are left behind as garbage), which nothing reads: rows are read by their segment, the pool's
order matters only to compaction, which keeps it.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .ranges import even_ranges
from .table import MAX_LOAD, _find_slot, _rehash, capacity_for


@njit(cache=True)
def scan_pairs(words, topics, values, n_words, n_topics):
    """One pass over the pairs: (the first pair with a word or topic id out of range or a value
    that is negative or not finite, else -1; whether the words ascend, so that each row's pairs
    form one run)."""
    ascending = True
    for i in range(words.shape[0]):
        if not (0 <= words[i] < n_words and 0 <= topics[i] < n_topics and 0.0 <= values[i] < np.inf):
            return i, ascending
        if i > 0 and words[i] < words[i - 1]:
            ascending = False
    return -1, ascending


@njit(cache=True)
def word_runs(words):
    """Start of every run of equal words, and the end: (n_runs + 1,) int64; words grouped."""
    n = words.shape[0]
    starts = np.empty(n + 1, np.int64)
    n_runs = 0
    for i in range(n):
        if i == 0 or words[i] != words[i - 1]:
            starts[n_runs] = i
            n_runs += 1
    starts[n_runs] = n
    return starts[:n_runs + 1].copy()


@njit(parallel=True, cache=True)
def plan_rows(words, topics, values, runs, row_start, row_capacity, row_size, pool_topics, min_capacity, n_parts):
    """Each run's row after the run: (size, capacity), int64 (n_runs,) each; and each pair's
    slot in the row as it is, -1 where its topic is not there (or its value is zero).

    A pair adds an entry if its value is non-zero and its topic is not in the row; the row
    grows once its size passes MAX_LOAD of its capacity, to capacity_for(size), so its final
    capacity is its old one if it never passes, else capacity_for(final size). The runs are split
    into n_parts ranges of about equal pairs (numba's thread count: given, not read here, so
    that the kernel can be cached).
    """
    n_runs = runs.shape[0] - 1
    new_size = np.empty(n_runs, np.int64)
    new_capacity = np.empty(n_runs, np.int64)
    slots = np.full(words.shape[0], -1, np.int64)
    bounds = even_ranges(runs, n_parts)
    for part in prange(bounds.shape[0] - 1):
        for r in range(bounds[part], bounds[part + 1]):
            word = words[runs[r]]
            start, capacity = row_start[word], row_capacity[word]
            size = row_size[word]
            for i in range(runs[r], runs[r + 1]):
                if values[i] == 0.0:
                    continue
                if capacity > 0:
                    slot = _find_slot(pool_topics, start, capacity, topics[i])
                    if pool_topics[slot] == topics[i]:
                        slots[i] = slot
                        continue
                size += 1
            new_size[r] = size
            new_capacity[r] = capacity if size <= MAX_LOAD * capacity else capacity_for(size, min_capacity)
    return new_size, new_capacity, slots


@njit(parallel=True, cache=True)
def add_runs(words, topics, values, runs, slots, coef, new_size, new_capacity, new_start, row_start, row_capacity,
             row_size, pool_topics, pool_values, min_capacity, largest_capacity, n_parts):
    """Add each run's amounts to its row (slots: plan_rows'); a row whose capacity changes is
    built in scratch and written to its new segment at new_start[r] (the caller's plan; unused
    for the others). Runs split as in plan_rows."""
    bounds = even_ranges(runs, n_parts)
    for part in prange(bounds.shape[0] - 1):
        scratch_topics = np.empty(2 * largest_capacity, pool_topics.dtype)
        scratch_values = np.empty(2 * largest_capacity, pool_values.dtype)
        for r in range(bounds[part], bounds[part + 1]):
            word = words[runs[r]]
            if new_capacity[r] == row_capacity[word]:
                _add_in_place(topics, values, slots, runs[r], runs[r + 1], coef, row_start[word],
                              row_capacity[word], pool_topics, pool_values)
            else:
                _add_growing(topics, values, runs[r], runs[r + 1], coef, row_start[word], row_capacity[word],
                             row_size[word], pool_topics, pool_values, new_start[r], min_capacity,
                             scratch_topics, scratch_values, largest_capacity)
                row_start[word] = new_start[r]
                row_capacity[word] = new_capacity[r]
            row_size[word] = new_size[r]


@njit(cache=True)
def _add_in_place(topics, values, slots, lo, hi, coef, start, capacity, pool_topics, pool_values):
    """A run whose row keeps its capacity: entries there stay in their slots (slots[i]); new
    topics go where a probe for them ends."""
    for i in range(lo, hi):
        if values[i] == 0.0:
            continue
        if slots[i] >= 0:
            pool_values[slots[i]] += coef * values[i]
        else:
            slot = _find_slot(pool_topics, start, capacity, topics[i])
            pool_topics[slot] = topics[i]
            pool_values[slot] = coef * values[i]


@njit(cache=True)
def _add_growing(topics, values, lo, hi, coef, start, capacity, size, pool_topics, pool_values, destination,
                 min_capacity, scratch_topics, scratch_values, half):
    """The row's entries and the run's amounts, added one by one in two scratch halves
    [0, half) and [half, 2 half) that take turns as the row grows; the final segment is then
    copied to `destination` in the pool."""
    current = 0  # where in scratch the row is now
    if capacity > 0:
        scratch_topics[:capacity] = pool_topics[start:start + capacity]
        scratch_values[:capacity] = pool_values[start:start + capacity]
    for i in range(lo, hi):
        if values[i] == 0.0:
            continue
        if capacity > 0:
            slot = _find_slot(scratch_topics, current, capacity, topics[i])
            if scratch_topics[slot] == topics[i]:
                scratch_values[slot] += coef * values[i]
                continue
        size += 1
        if size > MAX_LOAD * capacity:
            grown = capacity_for(size, min_capacity)
            other = half - current
            _rehash(scratch_topics, scratch_values, current, capacity, scratch_topics, scratch_values, other, grown)
            current, capacity = other, grown
        slot = _find_slot(scratch_topics, current, capacity, topics[i])
        scratch_topics[slot] = topics[i]
        scratch_values[slot] = coef * values[i]
    pool_topics[destination:destination + capacity] = scratch_topics[current:current + capacity]
    pool_values[destination:destination + capacity] = scratch_values[current:current + capacity]


@njit(cache=True)
def add_topic_sums(topics, values, coef, topic_sums):
    """topic_sums[topics[i]] += coef * values[i] in array order (zero values skipped)."""
    for i in range(topics.shape[0]):
        if values[i] != 0.0:
            topic_sums[topics[i]] += coef * values[i]


def row_growth_starts(new_capacity: np.ndarray, old_capacity: np.ndarray, pool_used: int) -> tuple[np.ndarray, int]:
    """New segments for the runs whose capacity changes, back to back from pool_used in run
    order: (start per run, 0 where unchanged; the pool used after them)."""
    grows = new_capacity != old_capacity
    sizes = np.where(grows, new_capacity, 0)
    ends = pool_used + np.cumsum(sizes)
    return np.where(grows, ends - sizes, 0), int(ends[-1]) if len(ends) else pool_used

