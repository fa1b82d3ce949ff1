"""Minka's fixed point for Dirichlet priors, over count histograms (bigtopics/priors.py).

For a Dirichlet(a_1..a_K) prior over multinomials observed through counts n_dk (draw d, item k,
N_d = sum_k n_dk), the Polya likelihood's fixed-point iteration (Minka 2000, eq. 55; Wallach 2008,
as MALLET's Dirichlet.learnParameters) is

    a_k <- a_k * sum_d [psi(n_dk + a_k) - psi(a_k)] / sum_d [psi(N_d + a_0) - psi(a_0)],   a_0 = sum_k a_k

and for a symmetric prior a_k = a over V items (eta over a topic's words)

    a <- a * sum_{d,k} [psi(n_dk + a) - psi(a)] / (V sum_d [psi(N_d + V a) - psi(V a)]).

A term with n_dk = 0 is zero, and equal counts give equal terms, so the sums run over histograms,
as MALLET's do: (item k, count n, how many draws have it) and (length N, how many draws have it).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .special import digamma


@njit(cache=True)
def alpha_sums(hist_items, hist_counts, hist_weights, lengths, length_weights, alpha):
    """(numerator[k], denominator) of the asymmetric iteration: hist_weights[j] draws have count
    hist_counts[j] > 0 of item hist_items[j]; length_weights[j] draws have N_d = lengths[j] > 0."""
    n_items = alpha.shape[0]
    total = 0.0
    for k in range(n_items):
        total += alpha[k]
    numerator = np.zeros(n_items)
    for j in range(hist_items.shape[0]):
        k = hist_items[j]
        numerator[k] += hist_weights[j] * (digamma(hist_counts[j] + alpha[k]) - digamma(alpha[k]))
    denominator = 0.0
    psi_total = digamma(total)
    for j in range(lengths.shape[0]):
        denominator += length_weights[j] * (digamma(lengths[j] + total) - psi_total)
    return numerator, denominator


@njit(cache=True)
def eta_sums(counts, weights, totals, total_weights, n_items, eta):
    """(numerator, denominator) of the symmetric iteration over n_items items: weights[j] cells
    have count counts[j] > 0, total_weights[j] draws have N_d = totals[j] > 0."""
    psi_eta = digamma(eta)
    numerator = 0.0
    for j in range(counts.shape[0]):
        numerator += weights[j] * (digamma(counts[j] + eta) - psi_eta)
    psi_total = digamma(n_items * eta)
    denominator = 0.0
    for j in range(totals.shape[0]):
        denominator += total_weights[j] * (digamma(totals[j] + n_items * eta) - psi_total)
    return numerator, n_items * denominator


@njit(cache=True)
def alpha_fixed_point(hist_items, hist_counts, hist_weights, lengths, length_weights, alpha, floor, ceiling,
                      max_iterations, tolerance):
    """Iterate the asymmetric update from `alpha` until no a_k moves by more than `tolerance`
    (relative) or for max_iterations, each a_k kept within [floor, ceiling]; a new array."""
    a = alpha.copy()
    for _ in range(max_iterations):
        numerator, denominator = alpha_sums(hist_items, hist_counts, hist_weights, lengths, length_weights, a)
        if not denominator > 0.0:
            break
        change = 0.0
        for k in range(a.shape[0]):
            new = min(max(a[k] * numerator[k] / denominator, floor), ceiling)
            change = max(change, abs(new - a[k]) / a[k])
            a[k] = new
        if change < tolerance:
            break
    return a


@njit(cache=True)
def eta_fixed_point(counts, weights, totals, total_weights, n_items, eta, floor, ceiling, max_iterations, tolerance):
    """Iterate the symmetric update from `eta` (as alpha_fixed_point)."""
    for _ in range(max_iterations):
        numerator, denominator = eta_sums(counts, weights, totals, total_weights, n_items, eta)
        if not denominator > 0.0:
            break
        new = min(max(eta * numerator / denominator, floor), ceiling)
        change = abs(new - eta) / eta
        eta = new
        if change < tolerance:
            break
    return eta
