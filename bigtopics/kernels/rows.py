"""Copying rows of the topic-word table out of its pool, slot for slot.

Row r of the copy is the segment [out_start[r], out_start[r] + capacity[r]) holding exactly the
slots of the table row that starts at source_start[r], so every entry keeps its place in the
row's open-addressing layout (kernels/table.py) and a lookup or a frozen view reads the same
values from the copy as from the table.
"""

from __future__ import annotations

from numba import njit

from . import pieces
from .ranges import even_ranges


@njit(cache=True, nogil=True)
def _copy_range(first, last, source_start, capacity, pool_topics, pool_values, out_start, topics, values):
    """Rows first..last - 1 of copy_segments."""
    for r in range(first, last):
        lo, out = source_start[r], out_start[r]
        topics[out: out + capacity[r]] = pool_topics[lo: lo + capacity[r]]
        values[out: out + capacity[r]] = pool_values[lo: lo + capacity[r]]


def copy_segments(source_start, capacity, pool_topics, pool_values, out_start, topics, values):
    """The segments of the given rows back to back into (topics, values) from out_start[r]
    (out_start: n + 1 running sums of capacity); pieces of rows of about equal slots for the
    threads (kernels/pieces.py)."""
    bounds = even_ranges(out_start, pieces.piece_count(pieces.threads()))
    pieces.run_ranges(_copy_range, bounds, source_start, capacity, pool_topics, pool_values, out_start, topics,
                      values)
