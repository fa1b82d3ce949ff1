"""Special functions needed inside kernels (numba has no scipy.special)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import pieces


@njit(cache=True, inline="always")
def _asymptotic_series(x: float) -> float:
    """sum_n B_2n / (2n x^2n) for n = 1..5: psi(x) ~ log x - 1/(2x) - this, for x >= 10."""
    f = 1.0 / (x * x)
    return f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))))


@njit(cache=True)
def digamma(x: float) -> float:
    """psi(x) = d/dx log Gamma(x) for x > 0.

    Recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic series
    psi(x) ~ log x - 1/(2x) - sum_n B_2n / (2n x^2n); absolute error below 1e-13.
    """
    result = 0.0
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    return result + math.log(x) - 0.5 / x - _asymptotic_series(x)


@njit(cache=True, inline="always")
def exp_digamma(x: float) -> float:
    """exp(psi(x)) for x > 0 (about x - 1/2 for large x, about 1/x near 0); relative error
    below 1e-12 (1e-13 for x >= 0.01).

    The same recurrence and series as digamma, arranged for speed (the freeze evaluates this
    once per table entry of every minibatch): the shift sum_{i<n} 1/(x + i) is accumulated as one
    fraction num/den (one division instead of n), and exp(log y - s) = y exp(-s) needs no log.
    """
    num = 0.0
    den = 1.0
    while x < 10.0:
        num = num * x + den
        den *= x
        x += 1.0
    return x * math.exp(-0.5 / x - _asymptotic_series(x) - num / den)


@njit(cache=True, nogil=True)
def _exp_digamma_range(first, last, values, out):
    for i in range(first, last):
        out[i] = exp_digamma(values[i])


def exp_digamma_array(values: np.ndarray) -> np.ndarray:
    """exp(psi(v)) elementwise, in even pieces for the threads (kernels/pieces.py)."""
    out = np.empty(values.shape[0], np.float64)
    n = values.shape[0]
    n_pieces = min(pieces.piece_count(pieces.threads()), max(n, 1))
    bounds = np.arange(n_pieces + 1, dtype=np.int64) * n // n_pieces
    pieces.run_ranges(_exp_digamma_range, bounds, values, out)
    return out


@njit(cache=True)
def trigamma(x: float) -> float:
    """psi'(x) for x > 0: the recurrence psi'(x) = psi'(x + 1) + 1/x^2 up to x >= 10, then
    psi'(x) ~ 1/x + 1/(2x^2) + sum_n B_2n / x^(2n+1) (n = 1..6); relative error below 1e-13."""
    result = 0.0
    while x < 10.0:
        result += 1.0 / (x * x)
        x += 1.0
    f = 1.0 / (x * x)
    series = 1.0 / 6 - f * (1.0 / 30 - f * (1.0 / 42 - f * (1.0 / 30 - f * (5.0 / 66 - f * (691.0 / 2730)))))
    return result + 1.0 / x + 0.5 * f + f / x * series


EULER_GAMMA = 0.5772156649015329


@njit(cache=True)
def inverse_digamma(y: float) -> float:
    """The x > 0 with psi(x) = y: Minka's start (exp(y) + 1/2, or -1/(y + Euler's gamma) for
    y < -2.22; "Estimating a Dirichlet distribution", appendix C) and Newton's steps on psi,
    which is increasing and concave, until the step is below 1e-14 relative (a few steps)."""
    x = math.exp(y) + 0.5 if y >= -2.22 else -1.0 / (y + EULER_GAMMA)
    for _ in range(50):
        step = (digamma(x) - y) / trigamma(x)
        x -= step
        if abs(step) <= 1e-14 * x:
            break
    return x
