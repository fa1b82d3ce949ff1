"""Kernels for judging a model: held-out likelihood and topic coherence.

The topics are given as a frozen view (kernels/frozen.py) holding point estimates,

    p(w | k) = smoothing[k] + coef[k, w],   smoothing[k] = eta / (V eta + N[k]),
                                            coef[k, w]   = N[k, w] / (V eta + N[k]),

so the predictive probability of a word given document-topic counts n_k of n tokens is

    p(w | n) = sum_k (alpha_k + n_k) p(w | k) / (n + sum_k alpha_k),

whose numerator splits like the sampler's buckets:
    sum_k n_k smoothing[k]  (doc_mass, kept by the caller)  +  sum_k alpha_k smoothing[k]
  + sum_{k in row w} alpha_k coef[k, w]  +  sum_{k in row w, n_k > 0} n_k coef[k, w].

alpha is a number (a symmetric prior) or K numbers (an asymmetric one; kernels/prior.py).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import pieces
from .doc_state import add_token, clear_document, document_scratch
from .frozen import lookup
from .gibbs import draw_topic, scans
from .jit import document_kernel
from .prior import prior_scale, prior_total
from .rng import next_uniform


@njit(cache=True, inline="always")
def word_mass(w, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, frozen):
    """sum_k (alpha_k + n_dk[k]) p(w | k) for local word w (n_dk may be counts or weights).

    doc_topics[:n_doc_topics] are the topics with n_dk > 0 and doc_mass = sum n_dk smoothing.
    """
    row_indptr, row_topics, row_coef, row_coef_cumsum, smoothing, smoothing_cumsum = frozen[:6]
    index = frozen[6:]
    lo = row_indptr[w]
    hi = row_indptr[w + 1]
    shared = 0.0
    if scans(w, n_doc_topics, frozen):
        for j in range(lo, hi):
            shared += n_dk[row_topics[j]] * row_coef[j]
    else:
        for i in range(n_doc_topics):
            shared += n_dk[doc_topics[i]] * lookup(index, w, doc_topics[i])
    row = row_coef_cumsum[hi - 1] if hi > lo else 0.0
    scale = prior_scale(alpha)
    return shared + scale * row + doc_mass + scale * smoothing_cumsum[smoothing_cumsum.shape[0] - 1]


@document_kernel
def left_to_right_document(tokens, alpha, particles, resample, seed, frozen,
                           n_dk, doc_topics, topic_slot, z, p_token, word_cum, word_topic, word_coef):
    """log p(w) of one document by the left-to-right algorithm (Wallach et al. 2009, alg. 3).

    tokens are local word ids in reading order (shuffled by the caller's stream for a bag of
    words). For every particle and position n: (if resample) one Gibbs sweep over z_<n given
    w_<n, then p_n += p(w_n | z_<n), then z_n ~ p(z_n | w_n, z_<n). Returns
    sum_n log(p_n / particles). Scratch n_dk / topic_slot must be zero / -1 and are left so.
    """
    smoothing = frozen[4]
    n_tokens = tokens.shape[0]
    total_alpha = prior_total(alpha, smoothing.shape[0])
    state = seed
    for n in range(n_tokens):
        p_token[n] = 0.0
    for _ in range(particles):
        n_doc_topics = 0
        doc_mass = 0.0
        for n in range(n_tokens):
            if resample and n > 0:
                doc_mass = 0.0  # recomputed per sweep so rounding never accumulates
                for i in range(n_doc_topics):
                    doc_mass += n_dk[doc_topics[i]] * smoothing[doc_topics[i]]
                for m in range(n):
                    k = z[m]
                    n_doc_topics = add_token(k, -1, n_dk, doc_topics, topic_slot, n_doc_topics)
                    doc_mass -= smoothing[k]
                    state, u = next_uniform(state)
                    k = draw_topic(u, tokens[m], alpha, n_dk, doc_topics, n_doc_topics, doc_mass,
                                   frozen, word_cum, word_topic, word_coef)
                    z[m] = k
                    n_doc_topics = add_token(k, 1, n_dk, doc_topics, topic_slot, n_doc_topics)
                    doc_mass += smoothing[k]
            w = tokens[n]
            p_token[n] += word_mass(w, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, frozen) / (n + total_alpha)
            state, u = next_uniform(state)
            k = draw_topic(u, w, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, frozen, word_cum, word_topic,
                           word_coef)
            z[n] = k
            n_doc_topics = add_token(k, 1, n_dk, doc_topics, topic_slot, n_doc_topics)
            doc_mass += smoothing[k]
        clear_document(n_doc_topics, n_dk, doc_topics, topic_slot)
    loglik = 0.0
    for n in range(n_tokens):
        loglik += math.log(p_token[n] / particles)
    return loglik


@njit(cache=True)
def shuffled_tokens(entry_words, entry_counts, state, out):
    """The document's tokens (entries' words repeated) in a random order drawn from `state`
    (Fisher-Yates); returns the advanced state."""
    n = 0
    for e in range(entry_words.shape[0]):
        for _ in range(entry_counts[e]):
            out[n] = entry_words[e]
            n += 1
    for i in range(n - 1, 0, -1):
        state, u = next_uniform(state)
        j = int(u * (i + 1))
        out[i], out[j] = out[j], out[i]
    return state


@njit(cache=True, nogil=True)
def left_to_right_documents(first, last, doc_indptr, entry_words, entry_counts, doc_seeds, alpha, particles,
                            resample, max_doc_tokens, max_row, frozen, out_loglik):
    """One worker's part of left_to_right_batch: documents first..last - 1 with one set of
    scratch (kernels/doc_state.py) allocated here and reused."""
    n_topics = frozen[4].shape[0]
    n_dk, doc_topics, topic_slot, word_cum, word_topic, word_coef = document_scratch(n_topics, max_row)
    tokens = np.zeros(max_doc_tokens, np.int32)
    z = np.zeros(max_doc_tokens, np.int32)
    p_token = np.zeros(max_doc_tokens, np.float64)
    for d in range(first, last):
        lo, hi = doc_indptr[d], doc_indptr[d + 1]
        n = 0
        for e in range(lo, hi):
            n += entry_counts[e]
        state = shuffled_tokens(entry_words[lo:hi], entry_counts[lo:hi], doc_seeds[d], tokens)
        out_loglik[d] = left_to_right_document(tokens[:n], alpha, particles, resample, state, frozen, n_dk,
                                               doc_topics, topic_slot, z, p_token, word_cum, word_topic, word_coef)


def left_to_right_batch(doc_indptr, entry_words, entry_counts, doc_seeds, worker_bounds, alpha, particles,
                        resample, max_doc_tokens, max_row, frozen, out_loglik):
    """left_to_right_document for every document: the pieces worker_bounds[i]..worker_bounds[i + 1] - 1
    (left_to_right_documents) taken by the threads as they come free (kernels/pieces.py), and
    every document its own random stream (results do not depend on the pieces or the threads)."""
    pieces.run_ranges(left_to_right_documents, worker_bounds, doc_indptr, entry_words, entry_counts, doc_seeds,
                      alpha, particles, resample, max_doc_tokens, max_row, frozen, out_loglik)


@njit(cache=True)
def completion_loglik(doc_indptr, entry_words, entry_counts, fit_indptr, fit_topics, fit_counts, alpha, frozen):
    """Per document, sum over the held-out entries of count * log p(w | theta_hat), with
    theta_hat[k] = (alpha_k + n_k) / (n + sum_k alpha_k) from the fitted topic counts n_k (the CSR
    fit_*, possibly fractional) of the n observed tokens."""
    smoothing = frozen[4]
    n_topics = smoothing.shape[0]
    n_docs = doc_indptr.shape[0] - 1
    n_dk = np.zeros(n_topics, np.float64)
    doc_topics = np.zeros(n_topics, np.int32)
    out = np.zeros(n_docs, np.float64)
    for d in range(n_docs):
        n_doc_topics = 0
        doc_mass = 0.0
        n_fit = 0.0
        for j in range(fit_indptr[d], fit_indptr[d + 1]):
            k = fit_topics[j]
            n_dk[k] = fit_counts[j]
            doc_topics[n_doc_topics] = k
            n_doc_topics += 1
            doc_mass += fit_counts[j] * smoothing[k]
            n_fit += fit_counts[j]
        norm = n_fit + prior_total(alpha, n_topics)
        for e in range(doc_indptr[d], doc_indptr[d + 1]):
            mass = word_mass(entry_words[e], alpha, n_dk, doc_topics, n_doc_topics, doc_mass, frozen)
            out[d] += entry_counts[e] * math.log(mass / norm)
        for i in range(n_doc_topics):
            n_dk[doc_topics[i]] = 0.0
    return out


@njit(cache=True)
def count_cooccurrences(indptr, indices, local_of, top_local, occ_indptr, occ_topic, occ_rank, present,
                        doc_freq, pair_freq):
    """Add one block of documents to the document frequencies of the top words.

    local_of maps a word id to its index among the top words (-1 if none); top_local[k, m] is
    topic k's m-th word; a top word u occurs in the topics occ_topic[occ_indptr[u]:...] at ranks
    occ_rank[...]. doc_freq[u] counts documents containing u and pair_freq[k, m, l] (l < m)
    documents containing both topic k's m-th and l-th words. `present` is False scratch.
    """
    for d in range(indptr.shape[0] - 1):
        for e in range(indptr[d], indptr[d + 1]):
            u = local_of[indices[e]]
            if u >= 0:
                present[u] = True
                doc_freq[u] += 1
        for e in range(indptr[d], indptr[d + 1]):
            u = local_of[indices[e]]
            if u < 0:
                continue
            for o in range(occ_indptr[u], occ_indptr[u + 1]):
                k = occ_topic[o]
                m = occ_rank[o]
                for lower in range(m):
                    if present[top_local[k, lower]]:
                        pair_freq[k, m, lower] += 1
        for e in range(indptr[d], indptr[d + 1]):
            u = local_of[indices[e]]
            if u >= 0:
                present[u] = False
