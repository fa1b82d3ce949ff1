"""Static, deterministic work ranges for the parallel drivers."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def even_ranges(cumulative, n_ranges):
    """Bounds b (n_ranges + 1 of them, b[0] = 0, b[-1] = n_items) of contiguous item ranges with
    about equal work, given cumulative[i] = the work of items [0, i) (length n_items + 1).

    Range r is items [b[r], b[r+1]); it starts at the first item whose preceding work reaches
    r / n_ranges of the total. Work is split by its measure, not by item counts, because items
    (documents, word rows) differ in size by orders of magnitude, and word rows come in
    descending frequency order: equal item counts would leave one worker most of the work.
    """
    if n_ranges < 1:
        raise ValueError("the number of ranges must be at least 1")
    n_items = cumulative.shape[0] - 1
    total = cumulative[n_items]
    bounds = np.empty(n_ranges + 1, np.int64)
    bounds[0] = 0
    for r in range(1, n_ranges):
        bounds[r] = np.searchsorted(cumulative, total * r / n_ranges)
    bounds[n_ranges] = n_items
    return bounds
