"""Sums behind Minka's fixed point for Dirichlet priors (bigtopics/priors.py).

For a Dirichlet(a_1..a_K) prior over multinomials observed through counts n_dk (document d, item
k, N_d = sum_k n_dk), the Polya likelihood's fixed-point update (Minka 2000, eq. 55; Wallach 2008,
as MALLET's Dirichlet.learnParameters) is

    a_k <- a_k * sum_d [psi(n_dk + a_k) - psi(a_k)] / sum_d [psi(N_d + a_0) - psi(a_0)],   a_0 = sum_k a_k

and for a symmetric prior a_k = a over V items (eta over a topic's words)

    a <- a * sum_{d,k} [psi(n_dk + a) - psi(a)] / (V sum_d [psi(N_d + V a) - psi(V a)]).

A term with n_dk = 0 is zero, so the sums run over the non-zero counts only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .special import digamma


@njit(cache=True)
def alpha_sums(doc_sizes, topics, counts, alpha):
    """(numerator[k], denominator) of the asymmetric update over documents given as consecutive
    segments of (topic k, count n_dk > 0) pairs, doc_sizes[d] pairs each."""
    n_topics = alpha.shape[0]
    alpha_total = 0.0
    for k in range(n_topics):
        alpha_total += alpha[k]
    psi_alpha = np.empty(n_topics)
    for k in range(n_topics):
        psi_alpha[k] = digamma(alpha[k])
    psi_total = digamma(alpha_total)
    numerator = np.zeros(n_topics)
    denominator = 0.0
    j = 0
    for d in range(doc_sizes.shape[0]):
        length = 0.0
        for _ in range(doc_sizes[d]):
            k = topics[j]
            n = counts[j]
            numerator[k] += digamma(n + alpha[k]) - psi_alpha[k]
            length += n
            j += 1
        if length > 0.0:
            denominator += digamma(length + alpha_total) - psi_total
    return numerator, denominator


@njit(cache=True)
def eta_sums(counts, topic_totals, n_words, eta):
    """(numerator, denominator) of the symmetric update for eta over topics observed through the
    non-zero word counts `counts` (any order) with totals topic_totals[k]: the topics are the
    documents, the V words the items."""
    psi_eta = digamma(eta)
    numerator = 0.0
    for j in range(counts.shape[0]):
        numerator += digamma(counts[j] + eta) - psi_eta
    psi_total = digamma(n_words * eta)
    denominator = 0.0
    for k in range(topic_totals.shape[0]):
        if topic_totals[k] > 0.0:
            denominator += digamma(topic_totals[k] + n_words * eta) - psi_total
    return numerator, n_words * denominator
