"""The document-topic prior as the sampler and evaluator kernels take it.

`alpha` is either a number, a symmetric prior alpha_k = alpha, or an array of K numbers, an
asymmetric one (learned: bigtopics/priors.py). numba compiles a kernel apart for each kind, and
the helpers here resolve at compile time, so with a number the kernels do exactly the arithmetic
they did before asymmetric priors existed (the same models, bit for bit).

The frozen view's two running sums enter the conditional only multiplied by the prior:

    sum_k alpha_k smoothing[k]           and, over a word's row, sum_k alpha_k coef[k, w]

With a number they are the plain running sums (smoothing_cumsum, row_coef_cumsum) times alpha;
with an array the view holds them already weighted by alpha_k (frozen.FrozenTopics.prior_view)
and the factor is 1. So a kernel writes `prior_scale(alpha) * running sum`, and
`prior_of(alpha, k)` where one topic's alpha_k is needed.

The Metropolis-Hastings sampler (kernels/alias_gibbs.py) also draws a topic from the prior
alone, t ~ alpha_t / sum_k alpha_k (`prior_topic`: uniform if symmetric, else by bisection of
`prior_running_sum`), and corrects its word proposal, drawn from tables weighted by alpha_k, by
`prior_ratio` = alpha_t / alpha_s (1 if symmetric, so its arithmetic is unchanged).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from . import pieces
from .doc_state import first_above
from .ranges import even_ranges
from .rng import next_uniform


def prior_of(alpha, k):
    """alpha_k."""
    return alpha if np.ndim(alpha) == 0 else alpha[k]


def prior_scale(alpha):
    """The factor of the view's running sums: alpha if symmetric, 1 if they are weighted."""
    return alpha if np.ndim(alpha) == 0 else 1.0


def prior_total(alpha, n_topics):
    """sum_k alpha_k."""
    return alpha * n_topics if np.ndim(alpha) == 0 else float(np.sum(alpha))


def prior_vector(alpha, n_topics):
    """alpha_1..alpha_K as a new array."""
    return np.full(n_topics, alpha) if np.ndim(alpha) == 0 else np.array(alpha, np.float64)


def prior_ratio(alpha, t, s):
    """alpha_t / alpha_s."""
    return 1.0 if np.ndim(alpha) == 0 else alpha[t] / alpha[s]


def prior_running_sum(alpha):
    """alpha_1, alpha_1 + alpha_2, ... (an empty array if symmetric: prior_topic needs none)."""
    return np.zeros(0) if np.ndim(alpha) == 0 else np.cumsum(alpha)


def prior_mass(alpha, running_sum, n_topics):
    """sum_k alpha_k, from running_sum = prior_running_sum(alpha) if asymmetric (O(1))."""
    return alpha * n_topics if np.ndim(alpha) == 0 else running_sum[-1]


def prior_topic(state, y, alpha, running_sum, n_topics):
    """(state, t), t ~ alpha_t / sum_k alpha_k: symmetric, a uniform topic by the stream's next
    number; asymmetric, the topic at y in [0, sum_k alpha_k) of running_sum (prior_running_sum)."""
    if np.ndim(alpha) == 0:
        state, u = next_uniform(state)
        return state, int(u * n_topics)
    return state, first_above(running_sum, 0, running_sum.shape[0], y)


@overload(prior_of, inline="always")
def _prior_of(alpha, k):
    if isinstance(alpha, types.Array):
        return lambda alpha, k: alpha[k]
    return lambda alpha, k: alpha


@overload(prior_scale, inline="always")
def _prior_scale(alpha):
    if isinstance(alpha, types.Array):
        return lambda alpha: 1.0
    return lambda alpha: alpha


@overload(prior_total, inline="always")
def _prior_total(alpha, n_topics):
    if isinstance(alpha, types.Array):
        def total(alpha, n_topics):
            s = 0.0
            for k in range(alpha.shape[0]):
                s += alpha[k]
            return s
        return total
    return lambda alpha, n_topics: alpha * n_topics


@overload(prior_ratio, inline="always")
def _prior_ratio(alpha, t, s):
    if isinstance(alpha, types.Array):
        return lambda alpha, t, s: alpha[t] / alpha[s]
    return lambda alpha, t, s: 1.0


@overload(prior_running_sum)
def _prior_running_sum(alpha):
    if isinstance(alpha, types.Array):
        return lambda alpha: np.cumsum(alpha)
    return lambda alpha: np.zeros(0)


@overload(prior_mass, inline="always")
def _prior_mass(alpha, running_sum, n_topics):
    if isinstance(alpha, types.Array):
        return lambda alpha, running_sum, n_topics: running_sum[running_sum.shape[0] - 1]
    return lambda alpha, running_sum, n_topics: alpha * n_topics


@overload(prior_topic, inline="always")
def _prior_topic(state, y, alpha, running_sum, n_topics):
    if isinstance(alpha, types.Array):
        return lambda state, y, alpha, running_sum, n_topics: (
            state, first_above(running_sum, 0, running_sum.shape[0], y))

    def uniform(state, y, alpha, running_sum, n_topics):
        state, u = next_uniform(state)
        return state, int(u * n_topics)
    return uniform


@overload(prior_vector)
def _prior_vector(alpha, n_topics):
    if isinstance(alpha, types.Array):
        return lambda alpha, n_topics: alpha.copy()
    return lambda alpha, n_topics: np.full(n_topics, alpha)


def weighted_row_cumsum(row_indptr, row_topics, row_coef, alpha):
    """The running sum of alpha[k] coef[k, w] within each row (CSR over rows), rows in pieces."""
    out = np.empty(row_coef.shape[0], np.float64)
    bounds = even_ranges(row_indptr, pieces.piece_count(pieces.threads()))
    pieces.run_ranges(_weighted_range, bounds, row_indptr, row_topics, row_coef, alpha, out)
    return out


@njit(cache=True, nogil=True)
def _weighted_range(lo, hi, row_indptr, row_topics, row_coef, alpha, out):
    for r in range(lo, hi):
        total = 0.0
        for j in range(row_indptr[r], row_indptr[r + 1]):
            total += alpha[row_topics[j]] * row_coef[j]
            out[j] = total
