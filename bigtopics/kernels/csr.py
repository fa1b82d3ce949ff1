"""CSR utilities."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def transpose_csr(indptr, indices, data, n_cols):
    """The transpose of an (n_rows x n_cols) CSR matrix, as CSR; O(nnz + n_cols).

    A counting sort by column: within each output row, entries keep ascending input-row order.
    """
    counts = np.zeros(n_cols + 1, np.int64)
    for p in range(indices.shape[0]):
        counts[indices[p] + 1] += 1
    for c in range(n_cols):
        counts[c + 1] += counts[c]
    fill = counts[:-1].copy()
    out_indices = np.empty(indices.shape[0], np.int64)
    out_data = np.empty(indices.shape[0], data.dtype)
    for r in range(indptr.shape[0] - 1):
        for p in range(indptr[r], indptr[r + 1]):
            c = indices[p]
            out_indices[fill[c]] = r
            out_data[fill[c]] = data[p]
            fill[c] += 1
    return counts, out_indices, out_data

