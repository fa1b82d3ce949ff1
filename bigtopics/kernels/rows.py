"""Copying rows of the topic-word table out of its pool, slot for slot.

Row r of the copy is the segment [out_start[r], out_start[r] + capacity[r]) holding exactly the
slots of the table row that starts at source_start[r], so every entry keeps its place in the
row's open-addressing layout (kernels/table.py) and a lookup or a frozen view reads the same
values from the copy as from the table.
"""

from __future__ import annotations

import numba
from numba import njit, prange

from .ranges import even_ranges


@njit(parallel=True)
def copy_segments(source_start, capacity, pool_topics, pool_values, out_start, topics, values):
    """The segments of the given rows back to back into (topics, values) from out_start[r]
    (out_start: n + 1 running sums of capacity); the rows are split between the threads by
    their slots."""
    bounds = even_ranges(out_start, numba.get_num_threads())
    for part in prange(bounds.shape[0] - 1):
        for r in range(bounds[part], bounds[part + 1]):
            lo, out = source_start[r], out_start[r]
            topics[out: out + capacity[r]] = pool_topics[lo: lo + capacity[r]]
            values[out: out + capacity[r]] = pool_values[lo: lo + capacity[r]]
