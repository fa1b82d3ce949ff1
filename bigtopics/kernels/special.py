"""Special functions needed inside kernels (numba has no scipy.special)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange


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
    f = 1.0 / (x * x)
    series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))))
    return result + math.log(x) - 0.5 / x - series


@njit(parallel=True)
def exp_digamma_array(values: np.ndarray) -> np.ndarray:
    """exp(psi(v)) elementwise (about v - 1/2 for large v, about 1/v near 0)."""
    out = np.empty(values.shape[0], np.float64)
    for i in prange(values.shape[0]):
        out[i] = math.exp(digamma(values[i]))
    return out
