"""The topic-word table's global step (kernels/table.py, add_scaled) on several threads, with
exactly the serial kernel's result.

add_scaled runs over the entries i = 0, 1, ... in array order:

    M[topics[i], words[i]] += coef * values[i];   topic_sums[topics[i]] += coef * values[i]

inserting missing entries and moving a row that outgrows MAX_LOAD to a new segment at pool_used.
When each word's entries are contiguous and the words ascend (as merged minibatch statistics
are: kernels/sparse_stats.py), the rows touched by different parts of the array are different,
and only two things tie the parts together: where in the pool each relocated segment lands
(pool_used when the serial loop reaches it) and the order of the additions to topic_sums. So:

  1. the entries are cut into contiguous parts at word boundaries, a few per thread, which the
     threads take as they come free (kernels/pieces.py); each part bounds the pool slots its
     relocations need (a word's nonzero entries, all taken as new, grow its row through the
     same capacity_for steps: an upper bound because the relocations of k inserts are a prefix
     of those of k + 1). If the bounds do not fit the pool's free
     room, the parts count the entries their rows really lack (read-only lookups) for the exact
     need; if that does not fit either, nothing was written and the caller runs add_scaled,
     which stops where the pool is full exactly as before;
  2. each part applies its entries in order, as add_scaled does, but puts each relocated
     segment at the next free position of its own region: part 0 at pool_used in the pool, as
     add_scaled does, the others in scratch;
  3. part p's relocations are the serial loop's relocations between those of parts p - 1 and
     p + 1, so its scratch region, copied to pool_used + (the slots parts 0..p-1 used), lands
     where the serial loop writes it (the copying is cut into as many even pieces); rows are
     re-pointed there. Values are copied for occupied slots only: a free slot's value is
     whatever the pool held there before, as in the serial loop;
  4. topic_sums[topics[i]] += coef * values[i] over i in array order, in one piece (piece 0
     of the copying, while the others copy): the same additions in the same order as add_scaled.

Every array (rows, the pool up to pool_used, topic_sums) is then bit for bit add_scaled's, on
any number of threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import pieces
from .table import EMPTY, MAX_LOAD, _find_slot, _rehash, capacity_for

# add_parallel's outcomes
APPLIED, NOT_GROUPED, NO_ROOM = 0, 1, 2
# The work of an entry, and what a word's first entry costs on top, for balancing the parts: the
# word's row is a cache miss of its own, and a rare word's entry is often an insert that moves
# its row (measured on Zipf-distributed minibatches at K = 1000 and 2000: bench_table.py).
ENTRY_WORK, WORD_WORK = 2, 3


@njit(cache=True)
def _word_parts(words, n_parts):
    """Bounds (n_parts + 1) of contiguous entry ranges of about equal work (an entry ENTRY_WORK,
    the first of a word WORD_WORK more), cut between words; bounds[0] = -1 unless the words
    ascend."""
    n = words.shape[0]
    bounds = np.empty(n_parts + 1, np.int64)
    bounds[0] = 0
    n_words = min(n, 1)
    descending = 0
    for i in range(1, n):  # no branches, so that it vectorizes
        n_words += words[i] != words[i - 1]
        descending += words[i] < words[i - 1]
    if descending:
        bounds[0] = -1
        return bounds
    total = ENTRY_WORK * n + WORD_WORK * n_words
    part = 1
    done = 0
    for i in range(n):
        if i == 0 or words[i] != words[i - 1]:
            while part < n_parts and done * n_parts >= total * part:
                bounds[part] = i
                part += 1
            if part == n_parts:
                break
            done += WORD_WORK
        done += ENTRY_WORK
    while part <= n_parts:
        bounds[part] = n
        part += 1
    return bounds


@njit(cache=True)
def growth_slots(size, capacity, n_new, min_capacity):
    """Pool slots a row of `size` entries in a segment of `capacity` takes for the segments it
    moves to while `n_new` entries are inserted one by one (add_scaled's rule: an insert that
    makes size > MAX_LOAD * capacity moves the row to capacity_for(size))."""
    slots = 0
    final = size + n_new
    while size < final:
        fits = np.int64(MAX_LOAD * capacity)  # the largest size the segment holds
        if final <= fits:
            break
        size = max(size, fits) + 1  # the insert that outgrows it
        capacity = capacity_for(size, min_capacity)
        slots += capacity
    return slots


@njit(cache=True)
def _part_need(words, topics, values, lo, hi, exact, row_start, row_capacity, row_size, pool_topics,
               seen, min_capacity):
    """The pool slots the relocations of entries lo..hi-1 (whole words) take: an upper bound
    unless `exact`, when the entries their rows lack are looked up (`seen`, all False, is a
    per-topic scratch for a topic repeated within a word)."""
    slots = 0
    i = lo
    while i < hi:
        word = words[i]
        end = i
        n_new = 0
        while end < hi and words[end] == word:
            if values[end] != 0.0:
                if not exact:
                    n_new += 1
                elif not seen[topics[end]]:
                    seen[topics[end]] = True
                    capacity = row_capacity[word]
                    if capacity == 0:
                        n_new += 1
                    elif pool_topics[_find_slot(pool_topics, row_start[word], capacity, topics[end])] != topics[end]:
                        n_new += 1
            end += 1
        if exact:
            for j in range(i, end):
                seen[topics[j]] = False
        slots += growth_slots(row_size[word], row_capacity[word], n_new, min_capacity)
        i = end
    return slots


@njit(cache=True)
def _apply_part(words, topics, values, lo, hi, coef, row_start, row_capacity, row_size, pool_topics, pool_values,
                scratch_topics, scratch_values, scratch_start, moved, min_capacity):
    """add_scaled on entries lo..hi-1 (whole words), relocating rows into scratch_topics /
    scratch_values from scratch_start on (for part 0 these are the pool and pool_used); a row
    moved there has its position in them as row_start for now and its word in moved[lo:].
    Returns (slots used there, entries inserted, rows moved)."""
    used = scratch_start
    n_inserted = 0
    n_moved = 0
    i = lo
    while i < hi:
        word = words[i]
        start = row_start[word]
        capacity = np.int64(row_capacity[word])
        size = np.int64(row_size[word])
        in_scratch = False
        while i < hi and words[i] == word:
            if values[i] == 0.0:
                i += 1
                continue
            topic = topics[i]
            amount = coef * values[i]
            i += 1
            if capacity > 0:
                if in_scratch:
                    slot = _find_slot(scratch_topics, start, capacity, topic)
                    if scratch_topics[slot] == topic:
                        scratch_values[slot] += amount
                        continue
                else:
                    slot = _find_slot(pool_topics, start, capacity, topic)
                    if pool_topics[slot] == topic:
                        pool_values[slot] += amount
                        continue
            size += 1
            if size > MAX_LOAD * capacity:
                new_capacity = capacity_for(size, min_capacity)
                if in_scratch:
                    _rehash(scratch_topics, scratch_values, start, capacity,
                            scratch_topics, scratch_values, used, new_capacity)
                else:
                    _rehash(pool_topics, pool_values, start, capacity,
                            scratch_topics, scratch_values, used, new_capacity)
                    in_scratch = True
                    moved[lo + n_moved] = word
                    n_moved += 1
                start = used
                capacity = new_capacity
                used += new_capacity
                slot = _find_slot(scratch_topics, start, capacity, topic)
            if in_scratch:
                scratch_topics[slot] = topic
                scratch_values[slot] = amount
            else:
                pool_topics[slot] = topic
                pool_values[slot] = amount
            n_inserted += 1
        row_start[word] = start
        row_capacity[word] = capacity
        row_size[word] = size
    return used - scratch_start, n_inserted, n_moved


def add_parallel(words, topics, values, coef, row_start, row_capacity, row_size, pool_topics, pool_values,
                 pool_used, topic_sums, min_capacity):
    """add_scaled(words, topics, values, 0, coef, ...) in pieces for the threads (kernels/pieces.py),
    for entries grouped by word in ascending word order (the module docstring has the method).

    Returns (outcome, new pool_used, entries inserted): APPLIED, or NOT_GROUPED (the words do not
    ascend) or NO_ROOM (the pool cannot hold the relocations), in which two cases nothing was
    changed and the caller runs add_scaled.
    """
    n = words.shape[0]
    n_parts = max(1, min(pieces.piece_count(pieces.threads()), n))
    bounds = _word_parts(words, n_parts)
    if bounds[0] < 0:
        return NOT_GROUPED, pool_used, 0

    seen = np.empty((n_parts, topic_sums.shape[0]), np.bool_)
    for exact in (False, True):
        need = np.array(pieces.run(_need_of_part, n_parts, exact, words, topics, values, bounds, row_start,
                                   row_capacity, row_size, pool_topics, seen, min_capacity), np.int64)
        if pool_used + int(need.sum()) <= pool_topics.shape[0]:
            break
        if exact:
            return NO_ROOM, pool_used, 0

    # part 0's segments go straight to the pool at pool_used, where add_scaled puts them; the
    # other parts' to scratch regions, as many slots as they might need
    scratch_start = np.zeros(n_parts + 1, np.int64)
    np.cumsum(need[1:], out=scratch_start[2:])
    scratch_topics = np.empty(scratch_start[n_parts], pool_topics.dtype)
    scratch_values = np.empty(scratch_start[n_parts], pool_values.dtype)
    moved = np.empty(n, np.int64)
    applied = pieces.run(_apply_piece, n_parts, words, topics, values, bounds, coef, row_start, row_capacity,
                         row_size, pool_topics, pool_values, scratch_topics, scratch_values, scratch_start, pool_used,
                         moved, min_capacity)
    used, inserted, n_moved = (np.array(column, np.int64) for column in zip(*applied))

    # the used slots of the scratch regions, part p's at [copied[p], copied[p + 1]) of one run,
    # are copied in n_parts even pieces of that run
    destination = pool_used + np.concatenate([[0], np.cumsum(used[:-1])])
    copied = np.zeros(n_parts + 1, np.int64)
    np.cumsum(used[1:], out=copied[2:])
    pieces.run(_copy_piece, n_parts, copied, scratch_topics, scratch_values, scratch_start, pool_topics, pool_values,
               destination, topics, values, coef, topic_sums, bounds, n_moved, moved, row_start)
    return APPLIED, pool_used + int(used.sum()), int(inserted.sum())


@njit(cache=True, nogil=True)
def _need_of_part(part, exact, words, topics, values, bounds, row_start, row_capacity, row_size, pool_topics, seen,
                  min_capacity):
    """Part `part`'s bound on the pool slots its relocations need (_part_need; `seen` its scratch
    row, cleared here when `exact`)."""
    if exact:
        seen[part, :] = False
    return _part_need(words, topics, values, bounds[part], bounds[part + 1], exact, row_start, row_capacity, row_size,
                      pool_topics, seen[part], min_capacity)


@njit(cache=True, nogil=True)
def _apply_piece(part, words, topics, values, bounds, coef, row_start, row_capacity, row_size, pool_topics,
                 pool_values, scratch_topics, scratch_values, scratch_start, pool_used, moved, min_capacity):
    """Part `part`'s entries applied (_apply_part): part 0's relocations into the pool at
    pool_used, the others' into their scratch regions. Returns (slots used, inserted, rows moved)."""
    if part == 0:
        return _apply_part(words, topics, values, bounds[0], bounds[1], coef, row_start, row_capacity, row_size,
                           pool_topics, pool_values, pool_topics, pool_values, pool_used, moved, min_capacity)
    return _apply_part(words, topics, values, bounds[part], bounds[part + 1], coef, row_start, row_capacity, row_size,
                       pool_topics, pool_values, scratch_topics, scratch_values, scratch_start[part], moved,
                       min_capacity)


@njit(cache=True, nogil=True)
def _copy_piece(piece, copied, scratch_topics, scratch_values, scratch_start, pool_topics, pool_values, destination,
                topics, values, coef, topic_sums, bounds, n_moved, moved, row_start):
    """Piece `piece` of the copying: its even share of the scratch regions' used slots to the
    pool; then piece 0 adds the topic totals, and each other piece re-points its part's moved rows
    to where their segments now are."""
    n_parts = destination.shape[0]
    to_copy = copied[n_parts]
    lo, hi = to_copy * piece // n_parts, to_copy * (piece + 1) // n_parts
    for part in range(1, n_parts):
        first, last = max(lo, copied[part]), min(hi, copied[part + 1])
        if first < last:
            _copy_segments(scratch_topics, scratch_values, scratch_start[part] + first - copied[part],
                           pool_topics, pool_values, destination[part] + first - copied[part], last - first)
    if piece == 0:
        _add_topic_sums(topics, values, coef, topic_sums)
    else:
        for j in range(bounds[piece], bounds[piece] + n_moved[piece]):
            row_start[moved[j]] += destination[piece] - scratch_start[piece]


@njit(cache=True)
def _copy_segments(scratch_topics, scratch_values, start, pool_topics, pool_values, destination, length):
    """Copy `length` slots of segments from the scratch to the pool: topics, and the values of
    occupied slots (a free slot keeps the pool's value, as add_scaled leaves it)."""
    for offset in range(length):
        topic = scratch_topics[start + offset]
        pool_topics[destination + offset] = topic
        if topic != EMPTY:
            pool_values[destination + offset] = scratch_values[start + offset]


@njit(cache=True)
def _add_topic_sums(topics, values, coef, topic_sums):
    """topic_sums[topics[i]] += coef * values[i] for nonzero values: add_scaled's additions, in its order."""
    for i in range(topics.shape[0]):
        if values[i] != 0.0:
            topic_sums[topics[i]] += coef * values[i]
