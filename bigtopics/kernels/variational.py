"""Variational local steps with the topics frozen: Online VB, L-sparse VB and SCVB0.

Within a minibatch the topic-word weights are fixed and split, as in kernels/gibbs.py, into

    beta[k, w] = smoothing[k] + coef[k, w]      (coef nonzero only on word w's row)

which is exp(Elog_beta[k, w]) for Online VB and L-sparse, and the point estimate
(N[k, w] + eta) / (N[k] + V eta) for SCVB0 (algorithms.md sections 2-4). A document is a list of
entries (word w, count c). With a document weight a[k] the responsibility of an entry is

    phi[k] = a[k] beta[k, w] / norm,   norm = sum_k a[k] beta[k, w],

where a[k] = exp(psi(gamma_k)) for the variational methods (the -psi(sum gamma) of
Elog_theta cancels in the normalisation) and a[k] = N_theta[k] + alpha for SCVB0. alpha is a
number or, for the variational methods, K numbers alpha_k (kernels/prior.py). For a learned alpha
each of their documents can also write E[log theta_dk] = psi(gamma_dk) - psi(sum_k gamma_dk) into
its row of `log_theta`, a flat documents x K array (empty when not wanted).

Online VB and SCVB0 are dense in K: their statistic Nhat[k, w] = sum_d c_dw phi_dw[k] has K
entries per word. It is built in two phases so that the sum is deterministic whatever the number
of threads: each document stores its final weights a_d[k] and per entry s_dw = c_dw / norm_dw;
then, per word, Nhat[k, w] = beta[k, w] * sum_{d in ascending order} a_d[k] s_dw (Hoffman's
onlineldavb accumulates the same outer product). L-sparse keeps at most L topics per entry and
emits (word, topic, c * phi) triples per document, merged like the Gibbs tallies.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import pieces
from .jit import document_kernel
from .prior import prior_of
from .ranges import even_ranges
from .rng import next_uniform
from .special import digamma
from .synth import log_gamma_variate

CONVERGED_MEAN_CHANGE = 1e-5  # Hoffman et al.: stop when mean_k |gamma change| falls below this
# Hoffman et al.'s initial gamma_dk ~ Gamma(100, 1/100): mean 1, a small random spread that
# breaks the symmetry of topics that start out equal (an empty table).
GAMMA_INIT_SHAPE = 100.0
# SCVB0's document step size rho_t = SCVB0_SCALE / (SCVB0_DELAY + t)^SCVB0_DECAY (Foulds et al.)
SCVB0_SCALE, SCVB0_DELAY, SCVB0_DECAY = 1.0, 10.0, 0.9


@njit(cache=True)
def fill_initial_gamma(seed, gamma):
    """gamma[k] ~ Gamma(100, 1/100) independently, from the document's stream."""
    state = seed
    for k in range(gamma.shape[0]):
        state, log_g = log_gamma_variate(state, GAMMA_INIT_SHAPE)
        gamma[k] = math.exp(log_g) / GAMMA_INIT_SHAPE


@njit(cache=True)
def fill_initial_theta_weight(seed, doc_length, alpha, theta_weight):
    """SCVB0's random start: N_theta = doc_length * u / sum(u), u_k ~ U(0, 1] from the document's
    stream; stores theta_weight[k] = N_theta[k] + alpha."""
    state = seed
    total = 0.0
    for k in range(theta_weight.shape[0]):
        state, u = next_uniform(state)
        theta_weight[k] = 1.0 - u
        total += 1.0 - u
    for k in range(theta_weight.shape[0]):
        theta_weight[k] = doc_length * theta_weight[k] / total + alpha


@njit(cache=True, inline="always")
def dense_weights(w, doc_weight, row_indptr, row_topics, row_coef, smoothing, out):
    """out[k] = doc_weight[k] * beta[k, w] for every topic (O(K)); returns sum_k out[k]."""
    n_topics = smoothing.shape[0]
    for k in range(n_topics):
        out[k] = doc_weight[k] * smoothing[k]
    for j in range(row_indptr[w], row_indptr[w + 1]):
        k = row_topics[j]
        out[k] += doc_weight[k] * row_coef[j]
    total = 0.0
    for k in range(n_topics):
        total += out[k]
    return total


@njit(cache=True, inline="always")
def _exp_digamma(gamma, topics, n_topics_used, out):
    """out[k] = exp(psi(gamma[k])) for k in topics[:n_topics_used]."""
    for i in range(n_topics_used):
        k = topics[i]
        out[k] = math.exp(digamma(gamma[k]))


@njit(cache=True, inline="always")
def _expected_log_theta(gamma, out):
    """out[k] = psi(gamma_k) - psi(sum_k gamma_k), unless out is empty (not wanted)."""
    if out.shape[0] == 0:
        return
    total = 0.0
    for k in range(gamma.shape[0]):
        total += gamma[k]
    psi_total = digamma(total)
    for k in range(gamma.shape[0]):
        out[k] = digamma(gamma[k]) - psi_total


@document_kernel
def vb_document(entry_words, entry_counts, alpha, max_iterations, seed, row_indptr, row_topics, row_coef,
                smoothing, gamma, phi, expected, all_topics, doc_weight, entry_scale, log_theta):
    """Online VB's local fixed point for one document (Hoffman et al. 2010), dense in K.

    gamma starts at Gamma(100, 1/100) draws; then repeat
        phi[w, k] ∝ exp(psi(gamma_k)) beta[k, w],   gamma_k = alpha + sum_w c_w phi[w, k]
    until mean_k |change of gamma_k| < 1e-5 or max_iterations. Writes the final
    doc_weight[k] = exp(psi(gamma_k)) and entry_scale[e] = c_e / norm_e, so that the document's
    statistic is c_e phi[w_e, k] = doc_weight[k] beta[k, w_e] entry_scale[e], and log_theta (module
    docstring). gamma, phi, expected are scratch of K entries; all_topics = 0..K-1. Returns the
    iterations run.
    """
    n_topics = smoothing.shape[0]
    fill_initial_gamma(seed, gamma)
    iterations = 0
    while iterations < max_iterations:
        iterations += 1
        _exp_digamma(gamma, all_topics, n_topics, doc_weight)
        expected[:] = 0.0
        for e in range(entry_words.shape[0]):
            norm = dense_weights(entry_words[e], doc_weight, row_indptr, row_topics, row_coef, smoothing, phi)
            scale = entry_counts[e] / norm
            for k in range(n_topics):
                expected[k] += scale * phi[k]
        change = 0.0
        for k in range(n_topics):
            change += abs(prior_of(alpha, k) + expected[k] - gamma[k])
            gamma[k] = prior_of(alpha, k) + expected[k]
        if change / n_topics < CONVERGED_MEAN_CHANGE:
            break
    _exp_digamma(gamma, all_topics, n_topics, doc_weight)
    for e in range(entry_words.shape[0]):
        entry_scale[e] = entry_counts[e] / dense_weights(entry_words[e], doc_weight, row_indptr, row_topics,
                                                         row_coef, smoothing, phi)
    _expected_log_theta(gamma, log_theta)
    return iterations


@document_kernel
def scvb0_document(entry_words, entry_counts, alpha, burnin, seed, row_indptr, row_topics, row_coef,
                   smoothing, gamma, theta_weight, entry_scale):
    """SCVB0's document step (Foulds et al. 2013) with the topic statistics frozen, dense in K.

    N_theta starts random (fill_initial_theta_weight). Each of `burnin` passes visits the
    entries in order; an entry of word w with count c is one clumped update of its c tokens:
        gamma_k ∝ beta[k, w] (N_theta[k] + alpha)
        N_theta <- (1 - rho)^c N_theta + (1 - (1 - rho)^c) C_j gamma,   rho = (10 + t)^-0.9
    with C_j the document length and t the tokens this document has updated so far. The final
    pass reads out gamma with N_theta held at its value after burn-in (Foulds also update N_theta
    during that pass; holding it lets the statistic factor as below): writes
    theta_weight[k] = N_theta[k] + alpha and entry_scale[e] = c_e / norm_e, so the document's
    statistic is c_e gamma_e[k] = theta_weight[k] beta[k, w_e] entry_scale[e].
    """
    n_topics = smoothing.shape[0]
    doc_length = 0.0
    for e in range(entry_counts.shape[0]):
        doc_length += entry_counts[e]
    fill_initial_theta_weight(seed, doc_length, alpha, theta_weight)
    tokens_updated = 0
    for _ in range(burnin):
        for e in range(entry_words.shape[0]):
            norm = dense_weights(entry_words[e], theta_weight, row_indptr, row_topics, row_coef, smoothing, gamma)
            rho = SCVB0_SCALE / (SCVB0_DELAY + tokens_updated) ** SCVB0_DECAY
            keep = (1.0 - rho) ** entry_counts[e]
            step = (1.0 - keep) * doc_length / norm
            for k in range(n_topics):
                theta_weight[k] = keep * (theta_weight[k] - alpha) + step * gamma[k] + alpha
            tokens_updated += entry_counts[e]
    for e in range(entry_words.shape[0]):
        entry_scale[e] = entry_counts[e] / dense_weights(entry_words[e], theta_weight, row_indptr, row_topics,
                                                         row_coef, smoothing, gamma)


@njit(cache=True, inline="always")
def _offer(heap_weight, heap_topic, size, capacity, x, k):
    """Keep the `capacity` largest weights offered in a min-heap (root = smallest kept), O(log L)
    per offer. Returns the new size."""
    if size < capacity:  # room left: add a leaf and sift it up
        i = size
        while i > 0 and heap_weight[(i - 1) // 2] > x:
            heap_weight[i] = heap_weight[(i - 1) // 2]
            heap_topic[i] = heap_topic[(i - 1) // 2]
            i = (i - 1) // 2
        heap_weight[i] = x
        heap_topic[i] = k
        return size + 1
    if x <= heap_weight[0]:
        return size
    i = 0  # x replaces the smallest kept: sift it down from the root
    while 2 * i + 1 < size:
        child = 2 * i + 1
        if child + 1 < size and heap_weight[child + 1] < heap_weight[child]:
            child += 1
        if heap_weight[child] >= x:
            break
        heap_weight[i] = heap_weight[child]
        heap_topic[i] = heap_topic[child]
        i = child
    heap_weight[i] = x
    heap_topic[i] = k
    return size


@njit(cache=True, inline="always")
def _top_l_pass(entry_words, entry_counts, top_l, active, n_active, doc_weight, row_indptr, row_topics,
                row_coef, smoothing, coef_of, heap_weight, heap_topic, expected, emit, out_words, out_topics,
                out_values):
    """One pass of L-sparse responsibilities over a document's entries.

    For each entry, the top L of doc_weight[k] beta[k, w] over the active topics, renormalised
    over those L; adds c * r to expected[k]. With `emit`, also writes the (word, topic, c * r)
    triples with c * r > 0 and returns how many. coef_of is zero scratch of K entries (the
    word's row is scattered into it and cleared again).
    """
    n_out = 0
    for e in range(entry_words.shape[0]):
        w = entry_words[e]
        for j in range(row_indptr[w], row_indptr[w + 1]):
            coef_of[row_topics[j]] = row_coef[j]
        size = 0
        for i in range(n_active):
            k = active[i]
            size = _offer(heap_weight, heap_topic, size, top_l, doc_weight[k] * (smoothing[k] + coef_of[k]), k)
        for j in range(row_indptr[w], row_indptr[w + 1]):
            coef_of[row_topics[j]] = 0.0
        total = 0.0
        for h in range(size):
            total += heap_weight[h]
        scale = entry_counts[e] / total
        for h in range(size):
            value = scale * heap_weight[h]
            expected[heap_topic[h]] += value
            if emit and value > 0.0:
                out_words[n_out] = w
                out_topics[n_out] = heap_topic[h]
                out_values[n_out] = value
                n_out += 1
    return n_out


@document_kernel
def lsparse_document(entry_words, entry_counts, alpha, top_l, max_iterations, seed, row_indptr, row_topics,
                     row_coef, smoothing, gamma, doc_weight, expected, active, coef_of, heap_weight, heap_topic,
                     out_words, out_topics, out_values, log_theta):
    """L-sparse variational responsibilities for one document (Hughes & Sudderth, Alg. 2 right).

    Online VB's fixed point (vb_document, same initial gamma and stopping rule) with every
    entry's responsibility cut to its top L topics and renormalised over them. The first
    iteration selects over all K topics (a size-L heap: O(K log L), no sort); afterwards only
    the document's active topics are considered, those with expected count > 0 after the
    previous iteration (a topic that dropped out is assumed never to return), so an iteration
    costs O(entries * active * log L + row lengths) instead of O(entries * K). The final
    responsibilities (from the final gamma) are emitted as (word, topic, c * r) triples, at most
    L per entry; returns how many; and log_theta (module docstring; a topic that left the document
    keeps gamma_k = alpha_k). Scratch: gamma, doc_weight, expected, active (int32) of K; coef_of
    of K zeros; heap_* of L.
    """
    n_topics = smoothing.shape[0]
    fill_initial_gamma(seed, gamma)
    for k in range(n_topics):
        active[k] = k
    n_active = n_topics
    for _ in range(max_iterations):
        _exp_digamma(gamma, active, n_active, doc_weight)
        for i in range(n_active):
            expected[active[i]] = 0.0
        _top_l_pass(entry_words, entry_counts, top_l, active, n_active, doc_weight, row_indptr, row_topics,
                    row_coef, smoothing, coef_of, heap_weight, heap_topic, expected, False, out_words,
                    out_topics, out_values)
        change = 0.0
        still_active = 0
        for i in range(n_active):
            k = active[i]
            change += abs(prior_of(alpha, k) + expected[k] - gamma[k])
            gamma[k] = prior_of(alpha, k) + expected[k]
            if expected[k] > 0.0:
                active[still_active] = k
                still_active += 1
        n_active = still_active
        if change / n_topics < CONVERGED_MEAN_CHANGE:
            break
    _exp_digamma(gamma, active, n_active, doc_weight)
    _expected_log_theta(gamma, log_theta)
    return _top_l_pass(entry_words, entry_counts, top_l, active, n_active, doc_weight, row_indptr, row_topics,
                       row_coef, smoothing, coef_of, heap_weight, heap_topic, expected, True, out_words,
                       out_topics, out_values)


@njit(cache=True, nogil=True)
def _vb_documents(first, last, doc_indptr, entry_words, entry_counts, doc_seeds, alpha, max_iterations, row_indptr,
                  row_topics, row_coef, smoothing, doc_weight, entry_scale, log_theta):
    """vb_document for documents first..last - 1 with one set of scratch: one piece of _vb_minibatch."""
    n_topics = smoothing.shape[0]
    gamma = np.empty(n_topics)
    phi = np.empty(n_topics)
    expected = np.empty(n_topics)
    all_topics = np.arange(n_topics)
    for d in range(first, last):
        lo, hi = doc_indptr[d], doc_indptr[d + 1]
        vb_document(entry_words[lo:hi], entry_counts[lo:hi], alpha, max_iterations, doc_seeds[d], row_indptr,
                    row_topics, row_coef, smoothing, gamma, phi, expected, all_topics, doc_weight[d],
                    entry_scale[lo:hi], log_theta[d * n_topics:(d + 1) * n_topics])


def _vb_minibatch(doc_indptr, entry_words, entry_counts, doc_seeds, worker_bounds, alpha, max_iterations,
                  row_indptr, row_topics, row_coef, smoothing, doc_weight, entry_scale, log_theta):
    """vb_document over the pieces of documents worker_bounds[i]..worker_bounds[i + 1] - 1, taken
    by the threads as they come free (kernels/pieces.py); document d writes row d of doc_weight
    (and of log_theta, if not empty) and its entries' slots of entry_scale."""
    pieces.run_ranges(_vb_documents, worker_bounds, doc_indptr, entry_words, entry_counts, doc_seeds, alpha,
                      max_iterations, row_indptr, row_topics, row_coef, smoothing, doc_weight, entry_scale, log_theta)


@njit(cache=True, nogil=True)
def _scvb0_documents(first, last, doc_indptr, entry_words, entry_counts, doc_seeds, alpha, burnin, row_indptr,
                     row_topics, row_coef, smoothing, doc_weight, entry_scale):
    """scvb0_document for documents first..last - 1 with one scratch: one piece of _scvb0_minibatch."""
    gamma = np.empty(smoothing.shape[0])
    for d in range(first, last):
        lo, hi = doc_indptr[d], doc_indptr[d + 1]
        scvb0_document(entry_words[lo:hi], entry_counts[lo:hi], alpha, burnin, doc_seeds[d], row_indptr,
                       row_topics, row_coef, smoothing, gamma, doc_weight[d], entry_scale[lo:hi])


def _scvb0_minibatch(doc_indptr, entry_words, entry_counts, doc_seeds, worker_bounds, alpha, burnin,
                     row_indptr, row_topics, row_coef, smoothing, doc_weight, entry_scale):
    """scvb0_document over the pieces of documents worker_bounds (outputs as _vb_minibatch)."""
    pieces.run_ranges(_scvb0_documents, worker_bounds, doc_indptr, entry_words, entry_counts, doc_seeds, alpha,
                      burnin, row_indptr, row_topics, row_coef, smoothing, doc_weight, entry_scale)


@njit(cache=True, nogil=True)
def _lsparse_documents(first, last, doc_indptr, entry_words, entry_counts, doc_seeds, alpha, top_l, max_iterations,
                       row_indptr, row_topics, row_coef, smoothing, out_words, out_topics, out_values, out_n_pairs,
                       log_theta):
    """lsparse_document for documents first..last - 1 with one set of scratch: one piece of
    _lsparse_minibatch."""
    n_topics = smoothing.shape[0]
    gamma = np.empty(n_topics)
    doc_weight = np.empty(n_topics)
    expected = np.empty(n_topics)
    active = np.empty(n_topics, np.int32)
    coef_of = np.zeros(n_topics)
    heap_weight = np.empty(top_l)
    heap_topic = np.empty(top_l, np.int32)
    for d in range(first, last):
        lo, hi = doc_indptr[d], doc_indptr[d + 1]
        out_n_pairs[d] = lsparse_document(
            entry_words[lo:hi], entry_counts[lo:hi], alpha, top_l, max_iterations, doc_seeds[d], row_indptr,
            row_topics, row_coef, smoothing, gamma, doc_weight, expected, active, coef_of, heap_weight,
            heap_topic, out_words[lo * top_l:hi * top_l], out_topics[lo * top_l:hi * top_l],
            out_values[lo * top_l:hi * top_l], log_theta[d * n_topics:(d + 1) * n_topics])


def _lsparse_minibatch(doc_indptr, entry_words, entry_counts, doc_seeds, worker_bounds, alpha, top_l,
                       max_iterations, row_indptr, row_topics, row_coef, smoothing, out_words, out_topics,
                       out_values, out_n_pairs, log_theta):
    """lsparse_document over the pieces of documents worker_bounds (kernels/pieces.py); document d
    writes its triples from offset doc_indptr[d] * top_l (and its row of log_theta, if not
    empty), so the output does not depend on the pieces or the threads."""
    pieces.run_ranges(_lsparse_documents, worker_bounds, doc_indptr, entry_words, entry_counts, doc_seeds, alpha,
                      top_l, max_iterations, row_indptr, row_topics, row_coef, smoothing, out_words, out_topics,
                      out_values, out_n_pairs, log_theta)


@njit(cache=True, nogil=True)
def _expected_counts_of_words(first, last, word_indptr, word_entries, entry_doc, entry_scale, doc_weight, row_indptr,
                              row_topics, row_coef, smoothing, out):
    """expected_counts_by_word for words first..last - 1, with its own beta scratch."""
    n_topics = out.shape[1]
    beta = smoothing.copy()
    for w in range(first, last):
        acc = out[w]
        for i in range(word_indptr[w], word_indptr[w + 1]):
            e = word_entries[i]
            weight = doc_weight[entry_doc[e]]
            scale = entry_scale[e]
            for k in range(n_topics):
                acc[k] += weight[k] * scale
        for j in range(row_indptr[w], row_indptr[w + 1]):
            beta[row_topics[j]] += row_coef[j]
        for k in range(n_topics):
            acc[k] *= beta[k]
        for j in range(row_indptr[w], row_indptr[w + 1]):
            beta[row_topics[j]] = smoothing[row_topics[j]]


def expected_counts_by_word(word_indptr, word_entries, entry_doc, entry_scale, doc_weight, row_indptr,
                            row_topics, row_coef, smoothing, out):
    """out[w, k] = beta[k, w] * sum_e doc_weight[entry_doc[e], k] * entry_scale[e] over word w's
    entries word_entries[word_indptr[w]:word_indptr[w + 1]], summed in that order (ascending
    documents), so every sum is fixed whatever the pieces or threads. out must be zero."""
    # a word costs its entries plus one pass over K
    bounds = even_ranges(word_indptr + np.arange(out.shape[0] + 1), pieces.piece_count(pieces.threads()))
    pieces.run_ranges(_expected_counts_of_words, bounds, word_indptr, word_entries, entry_doc, entry_scale,
                      doc_weight, row_indptr, row_topics, row_coef, smoothing, out)
