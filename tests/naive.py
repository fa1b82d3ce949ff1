"""Slow, obviously-correct reference implementations that the fast kernels are checked against.

Dense NumPy over small problems; clarity over speed. Shared by every test module.
"""

from __future__ import annotations

import itertools

import numpy as np


def digamma(x: float) -> float:
    """psi(x) by recurrence to x >= 30 and the asymptotic series (an independent check)."""
    result = 0.0
    while x < 30.0:
        result -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return result + np.log(x) - 0.5 / x - f * (1 / 12 - f * (1 / 120 - f * (1 / 252)))


def exp_elog_beta(topic_word: np.ndarray, eta: float) -> np.ndarray:
    """Dense exp(E_q[log beta_kw]) = exp(psi(eta + N_kw) - psi(V eta + N_k)), K x V."""
    n_words = topic_word.shape[1]
    psi = np.vectorize(digamma)
    return np.exp(psi(eta + topic_word) - psi(n_words * eta + topic_word.sum(1))[:, None])


def gibbs_conditional(token_word: int, other_topics: np.ndarray, alpha: float, weights: np.ndarray) -> np.ndarray:
    """p(z_i = k | z_-i) ∝ (alpha + n_dk^-i) * weights[k, w_i], normalised (dense, K)."""
    n_topics = weights.shape[0]
    n_dk = np.bincount(other_topics, minlength=n_topics)
    p = (alpha + n_dk) * weights[:, token_word]
    return p / p.sum()


def document_posterior(token_words: np.ndarray, alpha: float, weights: np.ndarray) -> dict[tuple, float]:
    """Exact distribution over all K^N topic configurations of one short document.

    Collapsing theta ~ Dirichlet(alpha): p(z) ∝ prod_k Gamma(alpha + n_k) * prod_i weights[z_i, w_i].
    """
    from math import lgamma

    n_topics = weights.shape[0]
    log_p = {}
    for z in itertools.product(range(n_topics), repeat=len(token_words)):
        n_k = np.bincount(z, minlength=n_topics)
        log_p[z] = sum(lgamma(alpha + n) for n in n_k) + sum(
            np.log(weights[k, w]) for k, w in zip(z, token_words)
        )
    top = max(log_p.values())
    total = sum(np.exp(v - top) for v in log_p.values())
    return {z: float(np.exp(v - top) / total) for z, v in log_p.items()}
