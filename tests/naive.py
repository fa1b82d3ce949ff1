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


def mean_beta(topic_word: np.ndarray, eta: float) -> np.ndarray:
    """Dense E_q[beta_kw] = (eta + N_kw) / (V eta + N_k), K x V."""
    return (eta + topic_word) / (topic_word.shape[1] * eta + topic_word.sum(1))[:, None]


def beta_estimate(topic_word: np.ndarray, eta: float, estimate: str) -> np.ndarray:
    """The trainer's estimate of beta: "mean" or "geometric" (exp E_q[log beta])."""
    return mean_beta(topic_word, eta) if estimate == "mean" else exp_elog_beta(topic_word, eta)


def gibbs_conditional(token_word: int, other_topics: np.ndarray, alpha, weights: np.ndarray) -> np.ndarray:
    """p(z_i = k | z_-i) ∝ (alpha_k + n_dk^-i) * weights[k, w_i], normalised (dense, K); alpha a
    number or K numbers."""
    n_topics = weights.shape[0]
    n_dk = np.bincount(other_topics, minlength=n_topics)
    p = (alpha + n_dk) * weights[:, token_word]
    return p / p.sum()


def document_posterior(token_words: np.ndarray, alpha, weights: np.ndarray) -> dict[tuple, float]:
    """Exact distribution over all K^N topic configurations of one short document.

    Collapsing theta ~ Dirichlet(alpha): p(z) ∝ prod_k Gamma(alpha_k + n_k) * prod_i weights[z_i, w_i];
    alpha a number or K numbers.
    """
    from math import lgamma

    n_topics = weights.shape[0]
    log_p = {}
    for z in itertools.product(range(n_topics), repeat=len(token_words)):
        n_k = np.bincount(z, minlength=n_topics)
        log_p[z] = sum(lgamma(a + n) for a, n in zip(np.broadcast_to(alpha, n_topics), n_k)) + sum(
            np.log(weights[k, w]) for k, w in zip(z, token_words)
        )
    top = max(log_p.values())
    total = sum(np.exp(v - top) for v in log_p.values())
    return {z: float(np.exp(v - top) / total) for z, v in log_p.items()}


def expected_word_topic_counts(token_words: np.ndarray, alpha, weights: np.ndarray) -> np.ndarray:
    """E[#tokens of word w in topic k] under document_posterior, as an array (V x K) over the
    words of weights."""
    exact = np.zeros((weights.shape[1], weights.shape[0]))
    for z, p in document_posterior(token_words, alpha, weights).items():
        for k, w in zip(z, token_words):
            exact[w, k] += p
    return exact


class EagerTopicWord:
    """Dense K x V topic-word statistics updated eagerly, N <- (1 - rho) N + rho * scale * Nhat,
    with the lazy table's reset schedule (pi = prod (1 - rho) since the last reset or rho = 1;
    a reset once pi < reset_below zeroes the entries with N < drop_below and counts their mass)."""

    def __init__(self, n_topics: int, n_words: int, reset_below: float, drop_below: float):
        self.N = np.zeros((n_topics, n_words))
        self.pi = 1.0
        self.reset_below = reset_below
        self.drop_below = drop_below
        self.n_resets = 0
        self.mass_dropped = 0.0

    def update(self, words, topics, values, rho: float, scale: float) -> None:
        nhat = np.zeros_like(self.N)
        nhat[topics, words] = values
        self.N = (1 - rho) * self.N + rho * scale * nhat
        self.pi = 1.0 if rho == 1 else self.pi * (1 - rho)
        if self.pi < self.reset_below:
            dropped = self.N < self.drop_below
            self.mass_dropped += self.N[dropped].sum()
            self.N[dropped] = 0.0
            self.pi = 1.0
            self.n_resets += 1


class OneByOneRows:
    """The topic-word table's rows (M = N / pi, kernels/table.py) as adding the global step's
    pairs one by one in array order builds them: each row a list of slots (topic, value) or None,
    probed linearly from a Fibonacci hash of the topic; a row whose load would pass MAX_LOAD is
    first re-inserted, in slot order, into capacity_for(size) slots."""

    MAX_LOAD = 0.7

    def __init__(self, n_topics: int, n_words: int, min_capacity: int):
        self.rows: list[list] = [[] for _ in range(n_words)]
        self.topic_sums = np.zeros(n_topics)
        self.min_capacity = min_capacity
        self.pi = 1.0

    def update(self, words, topics, values, rho: float, scale: float) -> None:
        self.pi *= 1.0 - rho
        coef = rho * scale / self.pi
        for word, topic, value in zip(words, topics, values):
            if value == 0.0:
                continue
            row, amount = self.rows[word], coef * value
            slot = self._find(row, topic) if row else None
            if slot is not None and row[slot] is not None:
                row[slot] = (topic, row[slot][1] + amount)
            else:
                size = sum(entry is not None for entry in row) + 1
                if size > self.MAX_LOAD * len(row):
                    capacity = self.min_capacity
                    while size > self.MAX_LOAD * capacity:
                        capacity *= 2
                    old, row = row, [None] * capacity
                    for entry in old:
                        if entry is not None:
                            row[self._find(row, entry[0])] = entry
                    self.rows[word] = row
                row[self._find(row, topic)] = (topic, amount)
            self.topic_sums[topic] += amount

    @staticmethod
    def _find(row: list, topic: int) -> int:
        """The slot holding `topic`, else the free slot where it belongs."""
        capacity = len(row)
        slot = ((int(topic) * 0x9E3779B97F4A7C15) % 2**64 >> 32) & (capacity - 1)
        while row[slot] is not None and row[slot][0] != topic:
            slot = (slot + 1) % capacity
        return slot


def word_statistics(rows: list[tuple[np.ndarray, np.ndarray]], n_words: int) -> tuple[np.ndarray, np.ndarray]:
    """(term_counts, doc_freqs) of documents given as (word ids, counts) rows, one word at a time."""
    term_counts = [0] * n_words
    doc_freqs = [0] * n_words
    for words, counts in rows:
        for w, c in zip(words.tolist(), counts.tolist()):
            term_counts[w] += c
        for w in set(words.tolist()):
            doc_freqs[w] += 1
    return np.array(term_counts), np.array(doc_freqs)


def bag_of_words(text: str, min_length: int = 3, stop=(), keep_case: bool = False) -> dict[str, int]:
    """Counts of the runs of Unicode letters and marks (categories L*, M*) of length >= min_length,
    NFC-normalized and lowercased, minus stop words: ingest's default tokenizer, character by character."""
    import unicodedata
    from collections import Counter

    text = unicodedata.normalize("NFC", text)
    if not keep_case:
        text = text.lower()
    words, current = [], []
    for ch in text + " ":
        if unicodedata.category(ch)[0] in "LM":
            current.append(ch)
        else:
            if len(current) >= min_length:
                words.append("".join(current))
            current = []
    return dict(Counter(w for w in words if w not in set(stop)))


# -- evaluation (bigtopics/evaluate.py) ----------------------------------------------------------
def point_estimates(topic_word: np.ndarray, eta: float) -> np.ndarray:
    """Dense p(w | k) = (eta + N_kw) / (V eta + N_k), K x V."""
    return (eta + topic_word) / (topic_word.shape[1] * eta + topic_word.sum(1))[:, None]


def log_evidence(token_words, alpha, phi: np.ndarray) -> float:
    """Exact log p(w_1..w_N) with theta ~ Dirichlet(alpha) integrated out and p(w|k) = phi fixed,
    by summing over all K^N topic configurations: p(z) = Gamma(alpha_0) / Gamma(N + alpha_0)
    prod_k Gamma(alpha_k + n_k) / Gamma(alpha_k). alpha: a number (symmetric) or K numbers."""
    from math import lgamma, log

    n_topics, n = phi.shape[0], len(token_words)
    alpha = np.broadcast_to(np.asarray(alpha, float), (n_topics,))
    terms = []
    for z in itertools.product(range(n_topics), repeat=n):
        n_k = np.bincount(z, minlength=n_topics)
        log_prior = lgamma(alpha.sum()) - lgamma(n + alpha.sum()) + sum(
            lgamma(a + c) - lgamma(a) for a, c in zip(alpha, n_k))
        terms.append(log_prior + sum(log(phi[k, w]) for k, w in zip(z, token_words)))
    top = max(terms)
    return top + log(sum(np.exp(t - top) for t in terms))


def completion_log_likelihood(observed, held, alpha: float, phi: np.ndarray) -> float:
    """sum over held-out tokens of log sum_k E[theta_k | observed] phi[k, w], with the posterior
    mean of theta computed exactly by enumerating the observed tokens' topic configurations."""
    n_topics = phi.shape[0]
    posterior = document_posterior(np.asarray(observed), alpha, phi)
    theta = np.zeros(n_topics)
    for z, p in posterior.items():
        theta += p * (alpha + np.bincount(np.asarray(z, int), minlength=n_topics)) / (len(observed) + n_topics * alpha)
    return float(sum(np.log(theta @ phi[:, w]) for w in held))


def umass_coherence(docs: list[set], top_words: np.ndarray) -> np.ndarray:
    """C_k = sum_{m > l} log((D(v_m, v_l) + 1) / D(v_l)) over each row of top_words, with document
    frequencies counted by checking every document (a set of word ids) for every pair."""
    out = []
    for row in top_words:
        c = 0.0
        for m in range(len(row)):
            for lower in range(m):
                both = sum(1 for d in docs if row[m] in d and row[lower] in d)
                single = sum(1 for d in docs if row[lower] in d)
                c += np.log((both + 1) / single)
        out.append(c)
    return np.array(out)


# -- alias tables (bigtopics/kernels/alias.py) ---------------------------------------------------
def alias_masses(prob: np.ndarray, alias: np.ndarray) -> np.ndarray:
    """The share of one bin's mass each outcome of an alias table gets, bin by bin: outcome k
    keeps prob[k] of its own bin and receives 1 - prob[i] from every bin i aliased to it."""
    masses = np.array(prob, dtype=float)
    for i in range(len(prob)):
        masses[alias[i]] += 1.0 - prob[i]
    return masses


def online_vb_expected_counts(docs, weights: np.ndarray, alpha, initial_gammas, max_iterations: int,
                              top_l: int | None = None, log_theta: list | None = None) -> np.ndarray:
    """Dense K x V Nhat[k, w] = sum_d c_dw phi_dw[k] of Online VB (Hoffman et al. 2010) with
    weights[k, w] = exp(Elog_beta); docs are (word ids, counts) pairs, one gamma start each.

    Per document: phi[w, k] ∝ exp(psi(gamma_k) - psi(sum gamma)) weights[k, w],
    gamma = alpha + sum_w c_w phi[w]; stop once mean |change of gamma| < 1e-5; Nhat from the phi
    of the final gamma. With top_l (L-sparse, Hughes & Sudderth): each phi[w] keeps its L
    largest entries, renormalised; after the first iteration only topics with expected count
    > 0 in the previous iteration may be chosen. alpha a number or K numbers; given a list
    log_theta, each document's E[log theta_k] = psi(gamma_k) - psi(sum gamma) is appended to it.
    """
    psi = np.vectorize(digamma)
    n_topics = weights.shape[0]
    nhat = np.zeros_like(weights, dtype=float)

    def responsibilities(words, gamma, allowed):
        phi = np.exp(psi(gamma) - digamma(gamma.sum()))[None, :] * weights[:, words].T
        phi[:, ~allowed] = 0.0
        if top_l is not None:
            for row in phi:
                row[np.argsort(-row, kind="stable")[top_l:]] = 0.0
        return phi / phi.sum(1, keepdims=True)

    for (words, counts), gamma in zip(docs, initial_gammas):
        gamma = np.array(gamma, float)
        allowed = np.ones(n_topics, bool)
        for _ in range(max_iterations):
            expected = counts @ responsibilities(words, gamma, allowed)
            new_gamma = alpha + expected
            change = np.abs(new_gamma - gamma).mean()
            gamma = new_gamma
            allowed &= expected > 0
            if change < 1e-5:
                break
        nhat[:, words] += (counts[:, None] * responsibilities(words, gamma, allowed)).T
        if log_theta is not None:
            log_theta.append(psi(gamma) - digamma(gamma.sum()))
    return nhat


def scvb0_expected_counts(docs, weights: np.ndarray, alpha: float, initial_thetas, burnin: int) -> np.ndarray:
    """Dense K x V Nhat[k, w] = sum_d c_dw gamma_dw[k] of SCVB0 (Foulds et al. 2013) with the
    topics fixed, weights[k, w] = (N_phi[w, k] + eta) / (N_z[k] + V eta).

    Token by token for `burnin` passes: gamma ∝ weights[:, w] * (N_theta + alpha),
    N_theta <- (1 - rho) N_theta + rho C_j gamma with rho = (10 + t)^-0.9, t = tokens updated so
    far in the document (one token at a time: the repeated tokens of a word see the same gamma,
    which is what the kernels' clumped update assumes); then gamma of every token with N_theta fixed.
    """
    nhat = np.zeros_like(weights, dtype=float)
    for (words, counts), n_theta in zip(docs, initial_thetas):
        n_theta = np.array(n_theta, float)
        doc_length = counts.sum()
        t = 0
        for _ in range(burnin):
            for w, c in zip(words, counts):
                gamma = weights[:, w] * (n_theta + alpha)
                gamma /= gamma.sum()
                rho = (10.0 + t) ** -0.9
                for _ in range(c):
                    n_theta = (1 - rho) * n_theta + rho * doc_length * gamma
                t += c
        for w, c in zip(words, counts):
            gamma = weights[:, w] * (n_theta + alpha)
            nhat[:, w] += c * gamma / gamma.sum()
    return nhat


def best_match_cosine(learned: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """For every true topic, the highest cosine similarity to any learned topic."""
    a = learned / np.linalg.norm(learned, axis=1, keepdims=True)
    b = truth / np.linalg.norm(truth, axis=1, keepdims=True)
    return (b @ a.T).max(axis=1)


def even_ranges(item_work: np.ndarray, n_ranges: int) -> np.ndarray:
    """Range r starts at the first item whose preceding work reaches r / n_ranges of the total."""
    preceding = np.concatenate([[0], np.cumsum(item_work)])
    total = preceding[-1]
    starts = [next(i for i in range(len(preceding)) if preceding[i] >= total * r / n_ranges)
              for r in range(1, n_ranges)]
    return np.array([0, *starts, len(item_work)])


def merge_pairs(words, topics, values, segment_starts, segment_sizes):
    """Sum values of equal (word, topic) pairs, segment by segment: (words, topics, values) with
    words ascending and, within a word, topics in the order first met."""
    sums = {}
    for start, size in zip(segment_starts, segment_sizes):
        for p in range(start, start + size):
            key = (int(words[p]), int(topics[p]))
            sums[key] = sums[key] + values[p] if key in sums else values[p]
    keys = sorted(sums, key=lambda key: key[0])  # stable: first-met order within a word
    return (np.array([w for w, _ in keys], np.int64), np.array([k for _, k in keys], np.int64),
            np.array([sums[key] for key in keys], np.asarray(values).dtype))


def polya_sums(counts: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, float]:
    """Minka's fixed-point sums for Dirichlet(alpha) over the rows of counts (D x K), every cell
    included: num_k = sum_d psi(n_dk + a_k) - psi(a_k), den = sum_d psi(N_d + a_0) - psi(a_0)."""
    psi = np.vectorize(digamma)
    counts = np.asarray(counts, np.float64)
    numerator = (psi(counts + alpha[None, :]) - psi(alpha)[None, :]).sum(axis=0)
    denominator = float(sum(digamma(n + alpha.sum()) - digamma(alpha.sum()) for n in counts.sum(axis=1)))
    return numerator, denominator


def minka_fixed_point(counts: np.ndarray, alpha: np.ndarray, iterations: int = 2000) -> np.ndarray:
    """The Polya maximum-likelihood alpha of the rows of counts, by iterating
    a_k <- a_k num_k / den from `alpha` (Minka 2000, eq. 55)."""
    alpha = np.asarray(alpha, np.float64).copy()
    for _ in range(iterations):
        numerator, denominator = polya_sums(counts, alpha)
        alpha = alpha * numerator / denominator
    return alpha


def symmetric_polya_sums(counts: np.ndarray, eta: float) -> tuple[float, float]:
    """The sums of the fixed point for a symmetric Dirichlet(eta) over the V columns of counts
    (K x V): sum_{k,w} psi(n_kw + eta) - psi(eta), and V sum_k psi(N_k + V eta) - psi(V eta)."""
    n_words = counts.shape[1]
    numerator = sum(digamma(float(n) + eta) - digamma(eta) for n in np.asarray(counts).ravel())
    denominator = n_words * sum(digamma(float(n) + n_words * eta) - digamma(n_words * eta) for n in counts.sum(axis=1))
    return float(numerator), float(denominator)


def inverse_digamma(y: float) -> float:
    """The x with digamma(x) = y, by bisection (digamma is increasing on x > 0)."""
    low, high = 1e-300, 1e12
    for _ in range(3000):
        middle = np.sqrt(low * high) if high / low > 4 else (low + high) / 2
        if digamma(middle) < y:
            low = middle
        else:
            high = middle
        if high - low <= 1e-15 * high:
            break
    return (low + high) / 2


def dirichlet_fixed_point(mean_log: np.ndarray, alpha: np.ndarray, iterations: int) -> np.ndarray:
    """The Dirichlet maximum-likelihood alpha given the mean of log theta_k over the draws, by
    iterating a_k <- psi^-1(psi(sum a) + mean_log[k]) from `alpha` (Minka 2000, eq. 9)."""
    alpha = np.asarray(alpha, np.float64).copy()
    for _ in range(iterations):
        alpha = np.array([inverse_digamma(digamma(alpha.sum()) + s) for s in mean_log])
    return alpha


def largest_remainder_counts(topics, weights, length: int, alpha) -> list[int]:
    """One document's dfr-browser counts, topic by topic: theta of the stored topics, the rest of
    the mass shared by the others in proportion to alpha; then floor(theta N) and one more token
    to each of the largest remainders (ties: lower topic) until the counts sum to N."""
    theta = [0.0] * len(alpha)
    for k, w in zip(topics, weights):
        theta[int(k)] = float(w)
    missing = [k for k in range(len(alpha)) if k not in set(int(t) for t in topics)]
    rest = max(0.0, 1.0 - sum(theta))
    for k in missing:
        theta[k] = rest * alpha[k] / sum(alpha[j] for j in missing)
    total = sum(theta)
    shares = [t / total * length for t in theta]
    counts = [int(np.floor(s)) for s in shares]
    by_remainder = sorted(range(len(alpha)), key=lambda k: (-(shares[k] - counts[k]), k))
    for k in by_remainder[: length - sum(counts)]:
        counts[k] += 1
    return counts


def pyldavis_terms(p: np.ndarray, totals: np.ndarray, R: int, lambdas: np.ndarray,
                   tie_tolerance: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The terms pyLDAvis' prepare lists given the whole K x V matrix p(w|k) and the topics'
    tokens, a topic at a time: per topic and lambda the R most relevant (relevance = lambda log
    p(w|k) + (1 - lambda) log(p(w|k) / p(w))), and the R most salient; in each list the terms
    above its R-th value and, of those level with it (within tie_tolerance, relative), the lowest
    ids. Returns (terms ascending, R-th relevance (lambdas x K), R-th saliency)."""
    proportion = totals @ p
    proportion = proportion / proportion.sum()
    shares = totals / totals.sum()
    given_term = p / p.sum(axis=0)
    saliency = proportion * (given_term * np.log(given_term / shares[:, None])).sum(axis=0)

    def listed(values: np.ndarray) -> tuple[set, np.ndarray]:  # rows x V
        last = -np.partition(-values, R - 1, axis=1)[:, R - 1]
        tolerance = tie_tolerance * np.maximum(1.0, np.abs(last))
        terms = set()
        for row, value, tol in zip(values, last, tolerance):
            above = np.flatnonzero(row > value + tol)
            level = np.flatnonzero((row <= value + tol) & (row >= value - tol))  # ascending ids
            terms.update(above.tolist() + level[: max(R - len(above), 0)].tolist())
        return terms, last

    terms, last_saliency = listed(saliency[None, :])
    last_relevance = np.zeros((len(lambdas), len(p)))
    for k in range(len(p)):
        relevance = (lambdas[:, None] * np.log(p[k])[None, :]
                     + (1 - lambdas)[:, None] * np.log(p[k] / proportion)[None, :])
        found, last_relevance[:, k] = listed(relevance)
        terms |= found
    return np.array(sorted(terms)), last_relevance, float(last_saliency[0])
