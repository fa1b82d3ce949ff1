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
    n_items = cumulative.shape[0] - 1
    total = cumulative[n_items]
    bounds = np.empty(n_ranges + 1, np.int64)
    bounds[0] = 0
    for r in range(1, n_ranges):
        bounds[r] = np.searchsorted(cumulative, total * r / n_ranges)
    bounds[n_ranges] = n_items
    return bounds


# Each worker's share of a minibatch is cut into this many document ranges, which numba's threads
# take one at a time (run the driver under numba.parallel_chunksize(1)): a thread that finishes
# early takes the next range instead of idling until the slowest is done. Which thread samples a
# range does not change the result (per-document seeds and output slots). Measured on one
# minibatch of Gutenberg sections at K = 100 and 2000, 2 threads against 1 (benchmarks/RESULTS.md,
# "Training throughput"): 0.90-0.97 of a perfect speed-up with one range per thread, 0.95-1.04
# with 8.
RANGES_PER_WORKER = 8


def document_ranges(cumulative_tokens, n_workers: int) -> np.ndarray:
    """even_ranges of documents for n_workers threads taking RANGES_PER_WORKER ranges each."""
    return even_ranges(np.asarray(cumulative_tokens, np.int64), n_workers * RANGES_PER_WORKER)
