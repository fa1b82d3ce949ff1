"""Drawing documents from the LDA generative process (Blei, Ng & Jordan 2003).

For document d, with its own counter-based random streams (rng.py), so that what it draws never
depends on the block it is generated in or the thread that runs it:

    N_d      = 1 + Poisson(mean_length - 1)          (at least one token, mean `mean_length`)
    theta_d  ~ Dirichlet(alpha_1, ..., alpha_K)      over K topics (alpha_k = alpha if symmetric)
    z_di     ~ Categorical(theta_d)                  for i = 1..N_d
    w_di     ~ Categorical(beta[z_di])               beta: K x V topic-word distributions

theta_d is integrated out for the topics: z_d1, z_d2, ... follow the Polya urn

    p(z_di = k | z_d1..z_d(i-1)) = (alpha_k + n_dk) / (alpha_0 + i - 1),   alpha_0 = sum_k alpha_k

drawn with one uniform (a topic drawn from the prior with probability alpha_0 / (alpha_0 + i - 1),
else the topic of a uniformly chosen earlier token), so a token costs O(1) whatever K with a
symmetric prior (a uniform topic), O(K) for the rarer draws from an asymmetric one. alpha is a
number or K numbers (kernels/prior.py).
When the true proportions are wanted, theta_d is then drawn from its conditional
Dirichlet(alpha + n_d): (theta_d, z_d) has exactly the joint distribution of the model.

Words are drawn in O(1) from per-topic alias tables (Walker 1977, Vose 1991) packed as one uint64
per entry (alias id << 32 | 32-bit acceptance threshold), so that a draw reads one cache line.

The length comes from stream LENGTH_STREAM, topics and words from TOKEN_STREAM and theta from
THETA_STREAM, so lengths can be summed before any token is drawn, and saving theta or not never
changes the words.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types, uint64
from numba.extending import overload

from .prior import prior_total, prior_vector
from .rng import next_uniform, stream_seed

LENGTH_STREAM = 1
TOKEN_STREAM = 2
THETA_STREAM = 3
THRESHOLD_SCALE = 4294967296.0  # 2**32: thresholds are 32-bit fractions
LOW_32 = uint64(0xFFFFFFFF)


@njit(cache=True)
def standard_normal(state):
    """(new_state, x) with x ~ N(0, 1) by Box-Muller (the second variate is discarded)."""
    state, u1 = next_uniform(state)
    state, u2 = next_uniform(state)
    return state, math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)


@njit(cache=True)
def log_gamma_variate(state, shape):
    """(new_state, log g) with g ~ Gamma(shape, 1), computed in log space.

    Marsaglia & Tsang (2000) for shape >= 1. For shape < 1, g = Gamma(shape + 1) * U^(1/shape),
    i.e. log g = log Gamma(shape + 1) + log(U) / shape: for the small shapes of sparse priors
    (alpha = 0.01) g itself underflows to 0, its logarithm does not.
    """
    boost = 0.0
    if shape < 1.0:
        state, u = next_uniform(state)
        boost = math.log(1.0 - u) / shape
        shape += 1.0
    d = shape - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        state, x = standard_normal(state)
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        state, u = next_uniform(state)
        if math.log(1.0 - u) < 0.5 * x * x + d - d * v + d * math.log(v):
            return state, math.log(d * v) + boost


@njit(cache=True)
def poisson_variate(state, mean):
    """(new_state, n) with n ~ Poisson(mean).

    Multiplication of uniforms for mean < 10; Hörmann's transformed rejection with squeeze
    (PTRS, 1993; as in NumPy) above, O(1) expected uniforms for any mean.
    """
    if mean <= 0.0:
        return state, 0
    if mean < 10.0:
        limit = math.exp(-mean)
        n = 0
        product = 1.0
        while True:
            state, u = next_uniform(state)
            product *= u
            if product <= limit:
                return state, n
            n += 1
    log_mean = math.log(mean)
    b = 0.931 + 2.53 * math.sqrt(mean)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2.0)
    while True:
        state, u = next_uniform(state)
        u -= 0.5
        state, v = next_uniform(state)
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + mean + 0.43)
        if us >= 0.07 and v <= v_r:
            return state, int(k)
        if k < 0.0 or (us < 0.013 and v > us):
            continue
        if (math.log(v) + math.log(inv_alpha) - math.log(a / (us * us) + b)
                <= -mean + k * log_mean - math.lgamma(k + 1.0)):
            return state, int(k)


@njit(cache=True)
def fill_alias_row(probabilities, row, small, large):
    """Vose's alias table of one distribution over V outcomes into row (uint64, length V).

    Outcome j is kept if the fraction of a uniform draw of bucket j is below threshold_j / 2**32,
    else replaced by alias_j; buckets with threshold 1 alias themselves. small and large are
    int64 scratch of length V.
    """
    n = probabilities.shape[0]
    scaled = probabilities * (n / probabilities.sum())
    n_small = n_large = 0
    for j in range(n):
        if scaled[j] < 1.0:
            small[n_small] = j
            n_small += 1
        else:
            large[n_large] = j
            n_large += 1
    while n_small > 0 and n_large > 0:
        n_small -= 1
        s = small[n_small]
        g = large[n_large - 1]
        row[s] = (uint64(g) << uint64(32)) | uint64(scaled[s] * THRESHOLD_SCALE)
        scaled[g] = (scaled[g] + scaled[s]) - 1.0
        if scaled[g] < 1.0:
            n_large -= 1
            small[n_small] = g
            n_small += 1
    # What is left has probability 1 up to rounding: it keeps itself.
    for i in range(n_large):
        row[large[i]] = (uint64(large[i]) << uint64(32)) | LOW_32
    for i in range(n_small):
        row[small[i]] = (uint64(small[i]) << uint64(32)) | LOW_32


@njit(parallel=True, cache=True)
def fill_alias_tables(topic_word, table):
    """Packed alias tables (K x V uint64) of the rows of topic_word (K x V, rows sum to 1)."""
    n_topics, n_words = topic_word.shape
    for k in prange(n_topics):
        fill_alias_row(topic_word[k], table[k], np.empty(n_words, np.int64), np.empty(n_words, np.int64))


@njit(cache=True)
def draw_alias(row, u):
    """An outcome of the distribution whose alias table is row, given u ~ U[0, 1)."""
    x = u * row.shape[0]
    j = min(int(x), row.shape[0] - 1)
    entry = row[j]
    keep = (x - j) * THRESHOLD_SCALE < float(entry & LOW_32)
    return j if keep else int(entry >> uint64(32))  # a select, not a branch the CPU mispredicts


@njit(parallel=True, nogil=True, cache=True)
def document_lengths(seed, first_doc, n_docs, mean_length):
    """N_d = 1 + Poisson(mean_length - 1) for documents first_doc .. first_doc + n_docs - 1."""
    lengths = np.empty(n_docs, np.int64)
    for i in prange(n_docs):
        state = stream_seed(seed, LENGTH_STREAM, first_doc + i)
        state, n = poisson_variate(state, mean_length - 1.0)
        lengths[i] = 1 + n
    return lengths


@njit(parallel=True, nogil=True, cache=True)
def draw_documents(word_alias, alpha, seed, first_doc, offsets, topics, tokens, theta_out):
    """Draw the topics and words of documents first_doc + i, i < len(offsets) - 1.

    word_alias: the topics' alias tables (alias_tables). Document i's topics and words go to
    topics/tokens[offsets[i]:offsets[i + 1]] in the order drawn; theta_d goes to theta_out[i]
    unless theta_out has no rows.
    """
    n_topics = word_alias.shape[0]
    n_docs = offsets.shape[0] - 1
    prior_mass = prior_total(alpha, n_topics)
    for i in prange(n_docs):
        lo = offsets[i]
        state = stream_seed(seed, TOKEN_STREAM, first_doc + i)
        hi = offsets[i + 1]
        for t in range(lo, hi):
            state, u = next_uniform(state)
            x = u * (prior_mass + (t - lo))
            if x < prior_mass:
                topics[t] = prior_topic(alpha, x, n_topics)
            else:
                topics[t] = topics[lo + min(int(x - prior_mass), t - lo - 1)]
        # Words in a loop of their own: the table reads are independent of one another, so the
        # CPU overlaps their cache misses (the urn's unpredictable branch above would not).
        for t in range(lo, hi):
            state, u = next_uniform(state)
            tokens[t] = draw_alias(word_alias[topics[t]], u)
        if theta_out.shape[0] > 0:
            draw_theta(alpha, topics[lo:hi], stream_seed(seed, THETA_STREAM, first_doc + i), theta_out[i])


def prior_topic(alpha, x, n_topics):
    """The topic at x in [0, alpha_0) of the prior's masses laid end to end."""


@overload(prior_topic, inline="always")
def _prior_topic(alpha, x, n_topics):
    if isinstance(alpha, types.Array):
        def scan(alpha, x, n_topics):
            for k in range(n_topics - 1):
                x -= alpha[k]
                if x < 0.0:
                    return k
            return n_topics - 1
        return scan
    return lambda alpha, x, n_topics: min(int(x / alpha), n_topics - 1)


@njit(cache=True)
def draw_theta(alpha, doc_topics, state, theta):
    """theta ~ Dirichlet(alpha_k + n_k), n_k the count of topic k in doc_topics.

    Normalised Gamma variates, scaled by the largest before exponentiating so that a tiny alpha
    cannot underflow all of them to zero.
    """
    n_topics = theta.shape[0]
    shape = prior_vector(alpha, n_topics)
    for z in doc_topics:
        shape[z] += 1.0
    log_g = np.empty(n_topics)
    for k in range(n_topics):
        state, g = log_gamma_variate(state, shape[k])
        log_g[k] = g
    weights = np.exp(log_g - log_g.max())
    theta[:] = weights / weights.sum()


@njit(cache=True)
def add_word_statistics(indices, counts, term_counts, doc_freqs):
    """term_counts[w] += sum of w's counts, doc_freqs[w] += number of rows holding w."""
    for j in range(indices.shape[0]):
        term_counts[indices[j]] += counts[j]
        doc_freqs[indices[j]] += 1
