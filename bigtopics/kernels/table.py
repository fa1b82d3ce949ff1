"""Kernels of the topic-word table (bigtopics/topic_word.py): per-word open-addressing hash rows.

Row w of the table is a segment [row_start[w], row_start[w] + row_capacity[w]) of a shared pool:
pool_topics[s] is a topic (EMPTY for a free slot) and pool_values[s] its stored value M[k, w].
Capacities are powers of two, at least the table's minimum capacity (itself a power of two >= 2),
at most MAX_LOAD full; an empty row has capacity 0. Slots are found by linear probing from a
Fibonacci hash of the topic. The stored values are M = N / pi (lazy scale factor pi, see
algorithms.md section 1); the kernels never look at pi except where they are told to scale.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import pieces
from .ranges import even_ranges

EMPTY = -1
MAX_LOAD = 0.7
_FIBONACCI = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True)
def capacity_for(size, min_capacity):
    """Smallest power-of-two capacity >= min_capacity holding `size` entries at load <= MAX_LOAD.

    0 for an empty row (it takes no pool space).
    """
    if size == 0:
        return 0
    capacity = min_capacity
    while size > MAX_LOAD * capacity:
        capacity *= 2
    return capacity


@njit(cache=True)
def capacities_for(sizes, min_capacity):
    """capacity_for over an array of row sizes (int64)."""
    out = np.empty(sizes.shape[0], np.int64)
    for w in range(sizes.shape[0]):
        out[w] = capacity_for(sizes[w], min_capacity)
    return out


@njit(cache=True, inline="always")
def home_slot(topic, capacity):
    """Where a topic's probe starts in a segment of `capacity` slots (a power of two): the top
    bits of a Fibonacci hash. The frozen view's lookups (kernels/frozen.py) use it too."""
    return np.int64(((np.uint64(topic) * _FIBONACCI) >> np.uint64(32)) & np.uint64(capacity - 1))


@njit(cache=True)
def _find_slot(pool_topics, start, capacity, topic):
    """The slot of `topic` in the segment, or else the free slot where it belongs.

    Terminates because a segment is never full (load <= MAX_LOAD < 1).
    """
    offset = home_slot(topic, capacity)
    while True:
        slot = start + offset
        held = pool_topics[slot]
        if held == topic or held == EMPTY:
            return slot
        offset = (offset + 1) & (capacity - 1)


@njit(cache=True, inline="always")
def layout_start(pool_topics, start, capacity):
    """The offset where a segment's layout order begins: just after its first free slot; the
    order then runs cyclically over the segment. Inserting a row's entries in layout order into
    an empty segment of the same capacity puts every entry back in its slot (each probe run fills
    from its start), which is how a checkpoint restores a table slot for slot (gather_rows)."""
    first_free = 0
    while pool_topics[start + first_free] != EMPTY:
        first_free += 1
    return (first_free + 1) & (capacity - 1)


@njit(cache=True)
def _rehash(src_topics, src_values, src_start, src_capacity, dst_topics, dst_values, dst_start, dst_capacity):
    """Clear the destination segment and insert every entry of the source segment into it.

    The two segments must not overlap (callers copy to scratch first when they might).
    """
    for slot in range(dst_start, dst_start + dst_capacity):
        dst_topics[slot] = EMPTY
    for slot in range(src_start, src_start + src_capacity):
        topic = src_topics[slot]
        if topic != EMPTY:
            target = _find_slot(dst_topics, dst_start, dst_capacity, topic)
            dst_topics[target] = topic
            dst_values[target] = src_values[slot]


@njit(cache=True, nogil=True)
def add_scaled(words, topics, values, first, coef, row_start, row_capacity, row_size,
               pool_topics, pool_values, pool_used, topic_sums, min_capacity):
    """For i = first, first + 1, ...:  M[topics[i], words[i]] += coef * values[i], and
    topic_sums[topics[i]] += the same amount, in array order (zero values are skipped).

    A missing entry is inserted; a row that would exceed MAX_LOAD moves to a new segment of the
    next capacity at pool position pool_used (its old segment becomes garbage). When the pool
    has no room for that, stops before entry i so the caller can make room and call again.
    Returns (next i, new pool_used, entries inserted, room needed: 0 when all were done).
    """
    n_inserted = 0
    for i in range(first, words.shape[0]):
        if values[i] == 0.0:
            continue
        word = words[i]
        topic = topics[i]
        amount = coef * values[i]
        capacity = row_capacity[word]
        if capacity > 0:
            slot = _find_slot(pool_topics, row_start[word], capacity, topic)
            if pool_topics[slot] == topic:
                pool_values[slot] += amount
                topic_sums[topic] += amount
                continue
        size = row_size[word] + 1
        if size > MAX_LOAD * capacity:
            new_capacity = capacity_for(size, min_capacity)
            if pool_used + new_capacity > pool_topics.shape[0]:
                return i, pool_used, n_inserted, new_capacity
            _rehash(pool_topics, pool_values, row_start[word], capacity,
                    pool_topics, pool_values, pool_used, new_capacity)
            row_start[word] = pool_used
            row_capacity[word] = new_capacity
            pool_used += new_capacity
            slot = _find_slot(pool_topics, pool_used - new_capacity, new_capacity, topic)
        pool_topics[slot] = topic
        pool_values[slot] = amount
        row_size[word] = size
        topic_sums[topic] += amount
        n_inserted += 1
    return words.shape[0], pool_used, n_inserted, 0


@njit(cache=True, nogil=True)
def rescale_and_drop(pi, drop_below, row_start, row_capacity, row_size, pool_topics, pool_values, topic_sums):
    """First half of a reset: M <- pi * M; entries whose new value is < drop_below are removed
    (a row that lost entries is rehashed in place, keeping its capacity).

    topic_sums is recomputed from the surviving entries (compensated summation, words in
    ascending order, so the result does not depend on where rows sit in the pool).
    Returns (mass dropped, entries kept).
    """
    compensation = np.zeros(topic_sums.shape[0])
    topic_sums[:] = 0.0
    scratch_topics = np.empty(row_capacity.max(), pool_topics.dtype)
    scratch_values = np.empty(row_capacity.max(), pool_values.dtype)
    dropped = 0.0
    kept = 0
    for word in range(row_start.shape[0]):
        start, capacity = row_start[word], row_capacity[word]
        size = row_size[word]
        for slot in range(start, start + capacity):
            topic = pool_topics[slot]
            if topic == EMPTY:
                continue
            value = pi * pool_values[slot]
            if value < drop_below:
                dropped += value
                pool_topics[slot] = EMPTY
                row_size[word] -= 1
                continue
            pool_values[slot] = value
            kept += 1
            # Neumaier's compensated sum
            total = topic_sums[topic] + value
            if abs(topic_sums[topic]) >= abs(value):
                compensation[topic] += (topic_sums[topic] - total) + value
            else:
                compensation[topic] += (value - total) + topic_sums[topic]
            topic_sums[topic] = total
        if row_size[word] < size:  # emptied slots break probe chains: rebuild the row
            scratch_topics[:capacity] = pool_topics[start:start + capacity]
            scratch_values[:capacity] = pool_values[start:start + capacity]
            _rehash(scratch_topics, scratch_values, 0, capacity, pool_topics, pool_values, start, capacity)
    for topic in range(topic_sums.shape[0]):
        topic_sums[topic] += compensation[topic]
    return dropped, kept


@njit(cache=True, nogil=True)
def compact_pool(rows_in_pool_order, row_start, row_capacity, row_size, pool_topics, pool_values, min_capacity):
    """Slide every row, in pool order, down to the lowest free position at the smallest capacity
    for its size, reclaiming garbage segments. Returns the pool space now used.

    In place: a row's new segment starts at or before its old one and ends no later, so it
    overwrites only garbage, earlier rows' old space, or itself. A row keeping its capacity is
    copied slot for slot (probe offsets are relative to the segment start); one that shrinks is
    copied to scratch and rehashed.
    """
    largest = 0
    for word in rows_in_pool_order:
        largest = max(largest, row_capacity[word])
    scratch_topics = np.empty(largest, pool_topics.dtype)
    scratch_values = np.empty(largest, pool_values.dtype)
    used = 0
    for word in rows_in_pool_order:
        start, capacity = row_start[word], row_capacity[word]
        new_capacity = capacity_for(row_size[word], min_capacity)
        if new_capacity == capacity:
            for offset in range(capacity):  # ascending: safe for an overlapping move down
                pool_topics[used + offset] = pool_topics[start + offset]
                pool_values[used + offset] = pool_values[start + offset]
        else:
            scratch_topics[:capacity] = pool_topics[start:start + capacity]
            scratch_values[:capacity] = pool_values[start:start + capacity]
            _rehash(scratch_topics, scratch_values, 0, capacity, pool_topics, pool_values, used, new_capacity)
        row_start[word] = used
        row_capacity[word] = new_capacity
        used += new_capacity
    return used


@njit(cache=True)
def fill_rows(indptr, topics, values, row_start, row_capacity, pool_topics, pool_values):
    """Insert a word-major CSR (row w: topics[indptr[w]:indptr[w+1]] with values) into rows whose
    segments (row_start, row_capacity) are already laid out; clears each segment first."""
    for word in range(indptr.shape[0] - 1):
        start, capacity = row_start[word], row_capacity[word]
        for slot in range(start, start + capacity):
            pool_topics[slot] = EMPTY
        for p in range(indptr[word], indptr[word + 1]):
            slot = _find_slot(pool_topics, start, capacity, topics[p])
            pool_topics[slot] = topics[p]
            pool_values[slot] = values[p]


@njit(cache=True)
def _sort_by_topic(topics, values, lo, hi):
    """Sort entries lo..hi-1 by topic (topics within a row are distinct)."""
    if hi - lo <= 32:
        for i in range(lo + 1, hi):
            topic, value = topics[i], values[i]
            j = i - 1
            while j >= lo and topics[j] > topic:
                topics[j + 1] = topics[j]
                values[j + 1] = values[j]
                j -= 1
            topics[j + 1] = topic
            values[j + 1] = value
    else:
        order = np.argsort(topics[lo:hi]) + lo
        topics[lo:hi] = topics[order]
        values[lo:hi] = values[order]


@njit(cache=True)
def _gather_layout(words, row_capacity, row_size):
    """gather_rows' indptr, and its work as running sums of the rows' capacities."""
    indptr = np.zeros(words.shape[0] + 1, np.int64)
    slots = np.zeros(words.shape[0] + 1, np.int64)
    for j in range(words.shape[0]):
        indptr[j + 1] = indptr[j] + row_size[words[j]]
        slots[j + 1] = slots[j] + row_capacity[words[j]]
    return indptr, slots


@njit(cache=True, nogil=True)
def _gather_range(first_row, last_row, words, scale, sort, indptr, row_start, row_capacity, pool_topics, pool_values,
                  out_topics, out_values):
    """Rows first_row..last_row - 1 of gather_rows."""
    for j in range(first_row, last_row):
        word = words[j]
        p = indptr[j]
        start, capacity = row_start[word], row_capacity[word]
        if capacity == 0:
            continue
        first = layout_start(pool_topics, start, capacity)
        for i in range(capacity):
            slot = start + ((first + i) & (capacity - 1))
            if pool_topics[slot] != EMPTY:
                out_topics[p] = pool_topics[slot]
                out_values[p] = scale * pool_values[slot]
                p += 1
        if sort:
            _sort_by_topic(out_topics, out_values, indptr[j], indptr[j + 1])


def gather_rows(words, scale, sort, row_start, row_capacity, row_size, pool_topics, pool_values):
    """The given rows as CSR (indptr, topics, scale * M): topics ascending within a row if
    `sort`, else in layout order (layout_start), which fill_rows turns back into the same slots.

    Costs O(sum of those rows' capacities), independent of the number of topics; pieces of rows
    of about equal capacity for the threads (kernels/pieces.py).
    """
    indptr, slots = _gather_layout(words, row_capacity, row_size)
    out_topics = np.empty(indptr[-1], np.int32)
    out_values = np.empty(indptr[-1], np.float64)
    bounds = even_ranges(slots, pieces.piece_count(pieces.threads()))
    pieces.run_ranges(_gather_range, bounds, words, scale, sort, indptr, row_start, row_capacity, pool_topics,
                      pool_values, out_topics, out_values)
    return indptr, out_topics, out_values


@njit(cache=True)
def take_out(words, topics, amounts, row_start, row_capacity, pool_topics, pool_values, topic_sums,
             out_slots, out_values):
    """For distinct (word, topic) pairs: M[k, w] <- max(M[k, w] - amount, 0), and topic_sums[k]
    less what was removed; pairs at an entry the table lacks are skipped (out_slots -1). Records
    each pair's slot and its value before in out_slots / out_values (frozen.TableRows.without
    runs it on a copy of the rows a minibatch needs).

    Serial: with the pairs merged, each slot changes once and the pass is short (38-62 ms per
    10 minibatches of 1024 sections at K = 100); a parallel version saved 2 ms a minibatch and
    cost 4 MiB of compiled code in every process (benchmarks/RESULTS.md).
    """
    for p in range(words.shape[0]):
        out_slots[p] = -1
        capacity = row_capacity[words[p]]
        if capacity == 0:
            continue
        slot = _find_slot(pool_topics, row_start[words[p]], capacity, topics[p])
        if pool_topics[slot] != topics[p]:
            continue
        out_slots[p] = slot
        out_values[p] = pool_values[slot]
        pool_values[slot] = max(out_values[p] - amounts[p], 0.0)
        topic_sums[topics[p]] -= out_values[p] - pool_values[slot]
