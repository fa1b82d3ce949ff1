"""The frozen view: the topic-word terms a minibatch's samplers read, built once per minibatch.

For the minibatch's words (rows r = 0, 1, ...) the view holds, as CSR over rows,

    row_topics[j], row_coef[j]   the topics k with N[k, w] > 0 and their coefficients
    row_coef_cumsum[j]           the running sum of row_coef within the row

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

A (word, topic) lookup reads the rows' index, five arrays that end the view's tuple

    index = (slot_start, slot_capacity, slot_topics, slot_values, topic_scale):
        row r's slots are [slot_start[r], slot_start[r] + slot_capacity[r]), an open-addressing
        table topic -> value (slot_topics -1 where free), and coef[k, w] = value * topic_scale[k]

in the topic-word table's own layout (kernels/table.py: power-of-two capacities at most
MAX_LOAD full, linear probing from home_slot), so a lookup is O(1) and reads one slot. For the
mean estimate the index IS the table's pool: coef = M[k, w] * pi / (V eta + N[k]) with the
stored values M = N / pi, so freezing copies no slots; the view is valid until the table
changes. Otherwise (the geometric estimate, or rows of a model on disk) index_rows builds an
index of the row coefficients with topic_scale 1.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import pieces
from .ranges import even_ranges
from .special import exp_digamma
from .table import EMPTY, capacity_for, home_slot, layout_start

# Smallest index of a row built from CSR: any power of two works; 2 keeps tiny rows tiny.
MIN_INDEX_SLOTS = 2


@njit(cache=True, inline="always")
def lookup(index, r, k):
    """coef[k, w] of row r's word, 0.0 where topic k is not in the row (index: module docstring)."""
    slot_start, slot_capacity, slot_topics, slot_values, topic_scale = index
    capacity = slot_capacity[r]
    if capacity == 0:
        return 0.0
    base = slot_start[r]
    h = home_slot(k, capacity)
    while slot_topics[base + h] != k and slot_topics[base + h] >= 0:
        h = (h + 1) & (capacity - 1)
    return slot_values[base + h] * topic_scale[k] if slot_topics[base + h] == k else 0.0


@njit(cache=True)
def _index_layout(row_indptr):
    """(slot_start, slot_capacity) of index_rows: the segments, n + 1 running sums and n sizes."""
    n_rows = row_indptr.shape[0] - 1
    slot_capacity = np.empty(n_rows, np.int64)
    slot_start = np.zeros(n_rows + 1, np.int64)
    for r in range(n_rows):
        slot_capacity[r] = capacity_for(row_indptr[r + 1] - row_indptr[r], MIN_INDEX_SLOTS)
        slot_start[r + 1] = slot_start[r] + slot_capacity[r]
    return slot_start, slot_capacity


@njit(cache=True, nogil=True)
def _index_range(first, last, row_indptr, row_topics, row_coef, slot_start, slot_capacity, row_coef_cumsum,
                 slot_topics, slot_values):
    """Rows first..last - 1 of index_rows."""
    for r in range(first, last):
        base = slot_start[r]
        capacity = slot_capacity[r]
        total = 0.0
        for j in range(row_indptr[r], row_indptr[r + 1]):
            total += row_coef[j]
            row_coef_cumsum[j] = total
            h = home_slot(row_topics[j], capacity)
            while slot_topics[base + h] >= 0:
                h = (h + 1) & (capacity - 1)
            slot_topics[base + h] = row_topics[j]
            slot_values[base + h] = row_coef[j]


def index_rows(row_indptr, row_topics, row_coef):
    """The running sums and the index of CSR rows: (row_coef_cumsum, slot_start, slot_capacity,
    slot_topics, slot_values), values = coef (the index's topic_scale is 1); pieces of rows of
    about equal slots for the threads (kernels/pieces.py)."""
    slot_start, slot_capacity = _index_layout(row_indptr)
    slot_topics = np.full(slot_start[-1], -1, np.int32)
    slot_values = np.zeros(slot_start[-1], np.float64)
    row_coef_cumsum = np.empty(row_coef.shape[0], np.float64)
    bounds = even_ranges(slot_start, pieces.piece_count(pieces.threads()))
    pieces.run_ranges(_index_range, bounds, row_indptr, row_topics, row_coef, slot_start, slot_capacity,
                      row_coef_cumsum, slot_topics, slot_values)
    return row_coef_cumsum, slot_start, slot_capacity, slot_topics, slot_values


@njit(cache=True)
def _freeze_layout(words, row_capacity, row_size):
    """freeze_table_rows' row_indptr, and the work of its rows as running sums (a row's slots
    and one more)."""
    n_rows = words.shape[0]
    row_indptr = np.zeros(n_rows + 1, np.int64)
    work = np.zeros(n_rows + 1, np.int64)
    for r in range(n_rows):
        row_indptr[r + 1] = row_indptr[r] + row_size[words[r]]
        work[r + 1] = work[r] + 1 + row_capacity[words[r]]
    return row_indptr, work


@njit(cache=True, nogil=True)
def _freeze_range(first, last, words, row_indptr, pi, eta, e0, geometric, topic_scale, row_start, row_capacity,
                  pool_topics, pool_values, row_topics, row_coef, row_coef_cumsum):
    """Rows first..last - 1 of freeze_table_rows."""
    for r in range(first, last):
        _freeze_row(row_start[words[r]], row_capacity[words[r]], row_indptr[r], pi, eta, e0, geometric,
                    topic_scale, pool_topics, pool_values, row_topics, row_coef, row_coef_cumsum)


def freeze_table_rows(words, pi, eta, geometric, topic_scale, row_start, row_capacity, row_size, pool_topics,
                      pool_values, row_topics, row_coef, row_coef_cumsum):
    """The rows of table rows `words` (N = pi M) in one pass: returns row_indptr and writes the
    caller's row_topics, row_coef and row_coef_cumsum (each as long as the rows' sizes summed),
    with coef = M * topic_scale[k] (topic_scale = pi / (V eta + N[k])), or if `geometric`
    (e^psi(eta + N) - e^psi(eta)) * topic_scale[k] (topic_scale = 1 / e^psi(V eta + N[k])).

    Entries come in the table's layout order, so the view depends only on the table's contents
    and layout, which checkpoints preserve. Pieces of rows of about equal work for the threads
    (kernels/pieces.py).
    """
    row_indptr, work = _freeze_layout(words, row_capacity, row_size)
    bounds = even_ranges(work, pieces.piece_count(pieces.threads()))
    pieces.run_ranges(_freeze_range, bounds, words, row_indptr, pi, eta, exp_digamma(eta), geometric, topic_scale,
                      row_start, row_capacity, pool_topics, pool_values, row_topics, row_coef, row_coef_cumsum)
    return row_indptr


@njit(cache=True)
def _freeze_row(start, capacity, j, pi, eta, e0, geometric, topic_scale, pool_topics, pool_values, row_topics,
                row_coef, row_coef_cumsum):
    """One row of freeze_table_rows, written from entry j on."""
    if capacity == 0:
        return
    first = layout_start(pool_topics, start, capacity)
    total = 0.0
    for i in range(capacity):
        slot = start + ((first + i) & (capacity - 1))
        k = pool_topics[slot]
        if k == EMPTY:
            continue
        m = pool_values[slot]
        coef = ((exp_digamma(eta + pi * m) - e0) if geometric else m) * topic_scale[k]
        total += coef
        row_topics[j] = k
        row_coef[j] = coef
        row_coef_cumsum[j] = total
        j += 1
