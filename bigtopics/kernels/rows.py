"""Copying rows of the topic-word table out of its pool, slot for slot.

Row r of the copy is the segment [out_start[r], out_start[r] + capacity[r]) holding exactly the
slots of table row `words[r]` ([row_start[w], row_start[w] + capacity)), so every entry keeps
its place in the row's open-addressing layout (kernels/table.py) and a lookup or a frozen view
reads the same values from the copy as from the table.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def copy_segments(source_start, capacity, pool_topics, pool_values):
    """(out_start (n + 1), topics, values): the segments of the given rows, back to back."""
    n_rows = source_start.shape[0]
    out_start = np.zeros(n_rows + 1, np.int64)
    for r in range(n_rows):
        out_start[r + 1] = out_start[r] + capacity[r]
    topics = np.empty(out_start[n_rows], pool_topics.dtype)
    values = np.empty(out_start[n_rows], pool_values.dtype)
    for r in range(n_rows):
        lo = source_start[r]
        for i in range(capacity[r]):
            topics[out_start[r] + i] = pool_topics[lo + i]
            values[out_start[r] + i] = pool_values[lo + i]
    return out_start, topics, values
