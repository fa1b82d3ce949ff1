"""Minka's fixed point for Dirichlet priors, over count histograms (bigtopics/priors.py).

For a Dirichlet(a_1..a_K) prior over multinomials observed through counts n_dk (draw d, item k,
N_d = sum_k n_dk), the Polya likelihood's fixed-point iteration (Minka 2000, eq. 55; Wallach 2008,
as MALLET's Dirichlet.learnParameters) is

    a_k <- a_k * sum_d [psi(n_dk + a_k) - psi(a_k)] / sum_d [psi(N_d + a_0) - psi(a_0)],   a_0 = sum_k a_k

and for a symmetric prior a_k = a over V items (eta over a topic's words)

    a <- a * sum_{d,k} [psi(n_dk + a) - psi(a)] / (V sum_d [psi(N_d + V a) - psi(V a)]).

A term with n_dk = 0 is zero, and equal counts give equal terms, so the sums run over histograms,
as MALLET's do: (item k, count n, how many draws have it) and (length N, how many draws have it).

A variational local step has no counts but each document's q(theta_d) = Dirichlet(gamma_d), and
the bound's terms in alpha are D [log Gamma(a_0) - sum_k log Gamma(a_k) + sum_k (a_k - 1) s_k]
with s_k the mean over the D documents of E[log theta_dk] = psi(gamma_dk) - psi(sum_k gamma_dk)
(Blei, Ng & Jordan 2003, A.4.2). Its maximum is the Dirichlet's fixed point (Minka 2000, eq. 9)

    a_k <- psi^-1(psi(a_0) + s_k),

each iteration a step that raises the bound.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .special import digamma, inverse_digamma

# psi(n + a) - psi(a) = sum_{i < n} 1 / (a + i): for counts up to this, the sum (as MALLET's
# learnParameters does), cheaper than two digammas; beyond it the digammas.
DIRECT_SUM_BELOW = 16


@njit(cache=True, inline="always")
def digamma_step(n, a, psi_a):
    """psi(n + a) - psi(a) for a count n >= 0, given psi_a = psi(a)."""
    if n < DIRECT_SUM_BELOW:
        s = 0.0
        for i in range(n):
            s += 1.0 / (a + i)
        return s
    return digamma(n + a) - psi_a


@njit(cache=True)
def alpha_sums(hist_items, hist_counts, hist_weights, lengths, length_weights, alpha):
    """(numerator[k], denominator) of the asymmetric iteration: hist_weights[j] draws have count
    hist_counts[j] > 0 of item hist_items[j]; length_weights[j] draws have N_d = lengths[j] > 0."""
    n_items = alpha.shape[0]
    total = 0.0
    for k in range(n_items):
        total += alpha[k]
    psi_alpha = np.full(n_items, np.nan)  # psi(alpha_k), for the items counted only
    numerator = np.zeros(n_items)
    for j in range(hist_items.shape[0]):
        k = hist_items[j]
        if hist_counts[j] >= DIRECT_SUM_BELOW and np.isnan(psi_alpha[k]):
            psi_alpha[k] = digamma(alpha[k])
        numerator[k] += hist_weights[j] * digamma_step(hist_counts[j], alpha[k], psi_alpha[k])
    denominator = 0.0
    psi_total = digamma(total)
    for j in range(lengths.shape[0]):
        denominator += length_weights[j] * digamma_step(lengths[j], total, psi_total)
    return numerator, denominator


@njit(cache=True)
def eta_sums(counts, weights, totals, total_weights, n_items, eta):
    """(numerator, denominator) of the symmetric iteration over n_items items: weights[j] cells
    have count counts[j] > 0, total_weights[j] draws have N_d = totals[j] > 0."""
    psi_eta = digamma(eta)
    numerator = 0.0
    for j in range(counts.shape[0]):
        numerator += weights[j] * digamma_step(counts[j], eta, psi_eta)
    psi_total = digamma(n_items * eta)
    denominator = 0.0
    for j in range(totals.shape[0]):
        denominator += total_weights[j] * digamma_step(totals[j], n_items * eta, psi_total)
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


@njit(cache=True)
def dirichlet_fixed_point(mean_log, alpha, floor, ceiling, max_iterations, tolerance):
    """Iterate a_k <- psi^-1(psi(a_0) + mean_log[k]) from `alpha` (module docstring) until no a_k
    moves by more than `tolerance` (relative) or for max_iterations, each a_k kept within
    [floor, ceiling]; a new array."""
    a = alpha.copy()
    for _ in range(max_iterations):
        total = 0.0
        for k in range(a.shape[0]):
            total += a[k]
        psi_total = digamma(total)
        change = 0.0
        for k in range(a.shape[0]):
            new = min(max(inverse_digamma(psi_total + mean_log[k]), floor), ceiling)
            change = max(change, abs(new - a[k]) / a[k])
            a[k] = new
        if change < tolerance:
            break
    return a


@njit(cache=True)
def doc_topic_counts(doc_tokens, token_topics, n_topics):
    """Each document's topic counts from its tokens' topics (documents of doc_tokens[d]
    consecutive tokens): (pairs per document, topics int32, counts int64), documents in order,
    topics in the order first met."""
    sizes = np.zeros(doc_tokens.shape[0], np.int64)
    topics = np.empty(token_topics.shape[0], np.int32)
    counts = np.empty(token_topics.shape[0], np.int64)
    slot = np.full(n_topics, -1, np.int64)
    n = 0
    t = 0
    for d in range(doc_tokens.shape[0]):
        first = n
        for _ in range(doc_tokens[d]):
            k = token_topics[t]
            t += 1
            if slot[k] < 0:
                slot[k] = n
                topics[n] = k
                counts[n] = 0
                n += 1
            counts[slot[k]] += 1
        for j in range(first, n):
            slot[topics[j]] = -1
        sizes[d] = n - first
    return sizes, topics[:n].copy(), counts[:n].copy()
