"""Walker alias tables: O(1) draws from a fixed discrete distribution after an O(n) build.

A table over weights w_0..w_{n-1} (total W) has n bins of equal mass W/n. Bin i holds outcome i
with probability prob[i] and outcome alias[i] otherwise, so outcome k gets

    (W/n) * (prob[k] + sum_{i: alias[i] = k} (1 - prob[i])) = w_k.

A draw picks a bin uniformly and flips its biased coin. Built by Vose's method: bins scaled to
p_i = n w_i / W; repeatedly pair a bin with p < 1 with one with p >= 1, which gives away 1 - p
and keeps (p_large + p_small) - 1 (this order of operations keeps rounding small).

Tables over the rows of a CSR array (one distribution per row) share flat arrays laid out like
the row entries, with alias holding offsets within the row.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import pieces
from .ranges import even_ranges


@njit(cache=True)
def build_alias(weights, prob, alias, work):
    """Fill prob / alias (same length n as weights) with the alias table of the non-negative
    weights; work is int32 scratch of length n. Returns the total weight. All-zero weights
    give a uniform table (callers never draw from a distribution of zero mass)."""
    n = weights.shape[0]
    total = 0.0
    for i in range(n):
        total += weights[i]
    scale = n / total if total > 0.0 else 0.0
    # bins still short of one unit stack up from the front of work, the others from the back
    n_small = 0
    n_large = 0
    for i in range(n):
        prob[i] = weights[i] * scale if total > 0.0 else 1.0
        alias[i] = i
        if prob[i] < 1.0:
            work[n_small] = i
            n_small += 1
        else:
            n_large += 1
            work[n - n_large] = i
    while n_small > 0 and n_large > 0:
        n_small -= 1
        small = work[n_small]
        large = work[n - n_large]
        alias[small] = large
        prob[large] = (prob[large] + prob[small]) - 1.0
        if prob[large] < 1.0:  # the large bin is now short: move it to the small stack
            n_large -= 1
            work[n_small] = large
            n_small += 1
    # whatever is left is full up to rounding
    for i in range(n_small):
        prob[work[i]] = 1.0
    for i in range(n - n_large, n):
        prob[work[i]] = 1.0
    return total


@njit(cache=True)
def alias_table(weights):
    """(prob, alias, total) of one table over a dense weight vector."""
    n = weights.shape[0]
    prob = np.empty(n, np.float64)
    alias = np.empty(n, np.int32)
    total = build_alias(weights, prob, alias, np.empty(n, np.int32))
    return prob, alias, total


@njit(cache=True, nogil=True)
def _alias_range(first, last, indptr, weights, prob, alias, work, totals):
    """Rows first..last - 1 of row_alias_tables."""
    for r in range(first, last):
        lo, hi = indptr[r], indptr[r + 1]
        totals[r] = build_alias(weights[lo:hi], prob[lo:hi], alias[lo:hi], work[lo:hi])


def row_alias_tables(indptr, weights):
    """One table per row of a CSR weight array, pieces of rows for the threads (kernels/pieces.py):
    (prob, alias, totals), prob / alias laid out like weights (alias = offset within the row),
    totals per row."""
    prob = np.empty(weights.shape[0], np.float64)
    alias = np.empty(weights.shape[0], np.int32)
    work = np.empty(weights.shape[0], np.int32)
    totals = np.zeros(indptr.shape[0] - 1, np.float64)
    bounds = even_ranges(indptr, pieces.piece_count(pieces.threads()))
    pieces.run_ranges(_alias_range, bounds, indptr, weights, prob, alias, work, totals)
    return prob, alias, totals


@njit(cache=True, inline="always")
def alias_draw(prob, alias, lo, n, u):
    """Offset in [0, n) drawn from the table at prob[lo:lo+n], alias[lo:lo+n] given u ~ U[0,1).

    The integer part of u*n picks the bin and its fractional part (still uniform, with
    log2(n) fewer bits) flips the bin's coin.
    """
    x = u * n
    i = min(int(x), n - 1)
    if x - i < prob[lo + i]:
        return i
    return alias[lo + i]
