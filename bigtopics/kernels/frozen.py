"""The frozen view: the topic-word terms a minibatch's samplers read, built once per minibatch.

For the minibatch's words (rows r = 0, 1, ...) the view holds, as CSR over rows,

    row_topics[j], row_coef[j]   the topics k with N[k, w] > 0 and their coefficients
    row_coef_cumsum[j]           the running sum of row_coef within the row
    slot_start, slot_topics,     per row an open-addressing table topic -> coef, so that a
    slot_coef                    (word, topic) lookup is O(1) and reads one slot

plus dense per-topic terms (smoothing[k]) that the callers add, so that smoothing[k] + coef[k, w]
estimates beta[k, w] under q(beta_k) = Dirichlet(eta + N[k]) either by its mean (as CVB0, SCVB0
and the evaluators)

    E[beta[k, w]] = (eta + N[k, w]) / (V eta + N[k]):
        smoothing[k] = eta / (V eta + N[k]),  coef[k, w] = N[k, w] / (V eta + N[k])

or by its geometric mean (Mimno et al. 2012, eq. 9)

    exp(E[log beta[k, w]]) = e^psi(eta + N[k, w]) / e^psi(V eta + N[k]):
        smoothing[k] = e^psi(eta) / e^psi(V eta + N[k]),
        coef[k, w] = (e^psi(eta + N[k, w]) - e^psi(eta)) / e^psi(V eta + N[k]).

In both, coef[k, w] > 0 only where N[k, w] > 0.

A row's table has a power-of-two number of slots at most MAX_LOAD full (slot_topics -1 where
free), probed linearly from home_slot: the topic-word table's own layout (kernels/table.py).
freeze_table_rows therefore copies a table row slot for slot while it computes the
coefficients, in one parallel pass over the rows; index_rows builds the same structure from CSR
rows (a model on disk).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .ranges import even_ranges
from .special import exp_digamma
from .table import EMPTY, capacity_for, home_slot, layout_start

# Smallest index of a row built from CSR: any power of two works; 2 keeps tiny rows tiny.
MIN_INDEX_SLOTS = 2


@njit(cache=True, inline="always")
def lookup(slot_start, slot_topics, slot_coef, r, k):
    """coef[k, w] of row r's word, 0.0 where topic k is not in the row."""
    base = slot_start[r]
    capacity = slot_start[r + 1] - base
    h = home_slot(k, capacity)
    while slot_topics[base + h] != k and slot_topics[base + h] >= 0:
        h = (h + 1) & (capacity - 1)
    return slot_coef[base + h] if slot_topics[base + h] == k else 0.0


@njit(cache=True)
def _index_capacities(sizes):
    """Slots of each row's index: the table's capacity rule, and one free slot for an empty row
    (so a lookup there reads -1 and stops)."""
    out = np.empty(sizes.shape[0] + 1, np.int64)
    out[0] = 0
    for r in range(sizes.shape[0]):
        out[r + 1] = out[r] + max(1, capacity_for(sizes[r], MIN_INDEX_SLOTS))
    return out


@njit(parallel=True)
def index_rows(row_indptr, row_topics, row_coef):
    """The running sums and the lookup tables of CSR rows:
    (row_coef_cumsum, slot_start, slot_topics, slot_coef)."""
    n_rows = row_indptr.shape[0] - 1
    slot_start = _index_capacities(row_indptr[1:] - row_indptr[:-1])
    slot_topics = np.full(slot_start[n_rows], -1, np.int32)
    slot_coef = np.zeros(slot_start[n_rows], np.float64)
    row_coef_cumsum = np.empty(row_coef.shape[0], np.float64)
    bounds = even_ranges(slot_start, numba.get_num_threads())
    for part in prange(bounds.shape[0] - 1):
        for r in range(bounds[part], bounds[part + 1]):
            base = slot_start[r]
            capacity = slot_start[r + 1] - base
            total = 0.0
            for j in range(row_indptr[r], row_indptr[r + 1]):
                total += row_coef[j]
                row_coef_cumsum[j] = total
                h = home_slot(row_topics[j], capacity)
                while slot_topics[base + h] >= 0:
                    h = (h + 1) & (capacity - 1)
                slot_topics[base + h] = row_topics[j]
                slot_coef[base + h] = row_coef[j]
    return row_coef_cumsum, slot_start, slot_topics, slot_coef


@njit(parallel=True)
def freeze_table_rows(words, pi, eta, geometric, topic_norm, row_start, row_capacity, row_size, pool_topics,
                      pool_values):
    """The frozen view of table rows `words` (N = pi M) in one pass: (row_indptr, row_topics,
    row_coef, row_coef_cumsum, slot_start, slot_topics, slot_coef) with coef = N / topic_norm[k], or if
    `geometric` (e^psi(eta + N) - e^psi(eta)) / topic_norm[k]; topic_norm is the matching
    V eta + N[k] or e^psi(V eta + N[k]).

    Entries come in the table's layout order and each row's lookup table mirrors its segment, so
    the view depends only on the table's contents and layout, which checkpoints preserve.
    """
    e0 = exp_digamma(eta)
    n_rows = words.shape[0]
    row_indptr = np.zeros(n_rows + 1, np.int64)
    slot_start = np.zeros(n_rows + 1, np.int64)
    for r in range(n_rows):
        row_indptr[r + 1] = row_indptr[r] + row_size[words[r]]
        slot_start[r + 1] = slot_start[r] + max(1, row_capacity[words[r]])
    row_topics = np.empty(row_indptr[n_rows], np.int32)
    row_coef = np.empty(row_indptr[n_rows], np.float64)
    row_coef_cumsum = np.empty(row_indptr[n_rows], np.float64)
    slot_topics = np.empty(slot_start[n_rows], np.int32)
    slot_coef = np.zeros(slot_start[n_rows], np.float64)
    bounds = even_ranges(slot_start, numba.get_num_threads())
    for part in prange(bounds.shape[0] - 1):
        for r in range(bounds[part], bounds[part + 1]):
            w = words[r]
            start, capacity, base = row_start[w], row_capacity[w], slot_start[r]
            if capacity == 0:
                slot_topics[base] = -1
                continue
            first = layout_start(pool_topics, start, capacity)
            j = row_indptr[r]
            total = 0.0
            for i in range(capacity):
                offset = (first + i) & (capacity - 1)
                k = pool_topics[start + offset]
                slot_topics[base + offset] = k  # EMPTY is -1
                if k == EMPTY:
                    continue
                n = pi * pool_values[start + offset]
                coef = ((exp_digamma(eta + n) - e0) if geometric else n) / topic_norm[k]
                total += coef
                row_topics[j] = k
                row_coef[j] = coef
                row_coef_cumsum[j] = total
                slot_coef[base + offset] = coef
                j += 1
    return row_indptr, row_topics, row_coef, row_coef_cumsum, slot_start, slot_topics, slot_coef
