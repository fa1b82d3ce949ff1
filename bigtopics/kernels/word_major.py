"""Gibbs sampling of a minibatch word by word: the conditional of kernels/gibbs.py, with each
token's draw costing O(topics in its document), whatever the length of its word's row.

Within a minibatch the topic-word terms are frozen, so documents are independent and a sweep may
visit their tokens in any order: a document's chain depends only on the order of its own tokens.
This sampler visits, in each sweep, the minibatch's words one after another and, for each word,
every token of it in every document of the worker's range. A document's own tokens are then still
met in ascending word order (descending in a rare-first initialisation), as the document-major
sampler meets them (the tokens of one entry, all of one word, forwards: any order of them gives
the same chain), so each document runs the same Markov chain; only the random numbers are spent
differently.

With the word w fixed while its tokens are drawn, its row is spread once into a dense vector
beta_w[k] = smoothing[k] + coef[k, w] (K numbers, the view's estimate of beta[k, w]; cleared
again after the word), and the conditional of a token of w in document d splits in two:

    p(z = k) ∝ (alpha_k + n_dk) beta_w[k]
             = n_dk beta_w[k]                                     doc part: over d's topics
             + alpha_k coef[k, w]  +  alpha_k smoothing[k]        prior part: fixed for the minibatch

The doc part is summed over the document's topics with dense lookups, O(topics in d); the prior
part is drawn from the view's running sums by bisection (kernels/prior.py weights them by alpha_k
where alpha is asymmetric). So a draw never scans its word's row: the row is read once per word
and sweep, not once per token, which is what makes long rows (large K) cheap.

A document's counts are a list of (topic, count) pairs with count > 0, in its own slice of the
worker's arrays, of capacity min(K, its tokens). The token being drawn is taken out by reading
its topic's count less one during the sum (a topic left with no token has no mass, so is never
drawn) and moved to its new topic after the draw; the list stays in the order the document's own
draws made, so it does not depend on the other documents or the worker.

Every document keeps its own random stream (its seed), so the result depends neither on the
number of workers nor on which documents share a worker. The output is that of
kernels/gibbs.py: per document, its saved sweeps and its (word, topic, count) pairs
(kernels/doc_state.py finish_document).

The layers: sample_minibatch (pieces of documents for the threads, kernels/pieces.py) ->
sample_worker (one piece: its word index and scratch) -> sample_sweeps (all sweeps over the worker's tokens,
kernels/jit.py) -> draw and move_token (one token, inlined).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import pieces
from .doc_state import finish_document, first_above
from .jit import document_kernel
from .prior import prior_scale
from .rng import next_uniform


@njit(cache=True, inline="always")
def prior_topic_of(x, r, alpha, view):
    """The topic at x in [0, prior mass of row r): the row's alpha coef, then alpha smoothing (the
    last topic if rounding carries x past the end)."""
    row_indptr, row_topics, row_coef_cumsum, smoothing_cumsum = view[0], view[1], view[3], view[5]
    scale = prior_scale(alpha)
    lo, hi = row_indptr[r], row_indptr[r + 1]
    if hi > lo:
        row_mass = scale * row_coef_cumsum[hi - 1]
        if x < row_mass:
            return row_topics[first_above(row_coef_cumsum, lo, hi, x / scale)]
        x -= row_mass
    return first_above(smoothing_cumsum, 0, smoothing_cumsum.shape[0], x / scale)


@njit(cache=True, inline="always")
def draw(state, old, base, n_listed, listed, beta_w, prior_mass, r, alpha, view, cum):
    """Draw a topic for one token of row r in a document whose listed (topic, count) pairs are
    listed[base: base + n_listed] (the token counted in topic `old`, or old = -1 if it is not
    counted). Returns (state, k, j_new, j_old): the topic, its place in the list (-1 if drawn
    from the prior part: the caller looks it up) and old's place (-1 if old = -1)."""
    mass = 0.0
    j_old = -1
    for j in range(n_listed):
        t = listed[base + j, 0]
        if t == old:
            j_old = j
        mass += (listed[base + j, 1] - (t == old)) * beta_w[t]
        cum[j] = mass
    state, u = next_uniform(state)
    x = u * (mass + prior_mass)
    if x < mass:
        j = first_above(cum, 0, n_listed, x)
        return state, listed[base + j, 0], j, j_old
    return state, prior_topic_of(x - mass, r, alpha, view), -1, j_old


@njit(cache=True, inline="always")
def move_token(k, j_new, j_old, base, n_listed, listed):
    """Move a token from the listed topic at j_old (-1: not counted yet) to topic k (at list place
    j_new, or -1 if not known); returns the new number of listed topics."""
    if j_new < 0:  # drawn from the prior part: k may be listed all the same
        for j in range(n_listed):
            if listed[base + j, 0] == k:
                j_new = j
                break
    if j_new >= 0 and j_new == j_old:
        return n_listed
    if j_new >= 0:
        listed[base + j_new, 1] += 1
    if j_old >= 0:
        listed[base + j_old, 1] -= 1
        if listed[base + j_old, 1] == 0:  # the last listed topic takes its place
            n_listed -= 1
            listed[base + j_old, 0] = listed[base + n_listed, 0]
            listed[base + j_old, 1] = listed[base + n_listed, 1]
    if j_new < 0:
        listed[base + n_listed, 0] = k
        listed[base + n_listed, 1] = 1
        n_listed += 1
    return n_listed


@document_kernel
def sample_sweeps(row_ptr, occurrence_doc, occurrence_token, occurrence_count, doc_first, doc_tokens, doc_warm, alpha,
                  burnin, samples, rare_first, view, states, list_start, list_size, listed, z, z_saved, beta_w, cum):
    """All sweeps of one worker's documents, word by word (module docstring).

    Row r occurs in the worker's documents at occurrences row_ptr[r]..row_ptr[r + 1] - 1 (its
    entries, in document order): occurrence p is in document occurrence_doc[p] (the worker's own
    numbering), with tokens z[occurrence_token[p]:][:occurrence_count[p]]. Document d's tokens
    are z[doc_first[d]: doc_first[d] + doc_tokens[d]], its saved sweeps z_saved at
    doc_first[d] * samples, sweep by sweep; its (topic, count) pairs listed[list_start[d]:]
    [:list_size[d]]. A document with doc_warm[d] starts from its topics in z (its list built from
    them) and skips the initialisation. beta_w must hold smoothing on entry and is left so.
    """
    row_indptr, row_topics, row_coef, row_coef_cumsum, smoothing, smoothing_cumsum = view[:6]
    scale = prior_scale(alpha)
    static_mass = scale * smoothing_cumsum[smoothing_cumsum.shape[0] - 1]
    n_rows = row_ptr.shape[0] - 1
    for sweep in range(-1, burnin + samples):  # sweep -1 is the sequential initialisation
        backwards = sweep < 0 and rare_first
        for step in range(n_rows):
            r = n_rows - 1 - step if backwards else step
            first, last = row_ptr[r], row_ptr[r + 1]
            if first == last:
                continue
            lo, hi = row_indptr[r], row_indptr[r + 1]
            for j in range(lo, hi):
                beta_w[row_topics[j]] += row_coef[j]
            prior_mass = static_mass + (scale * row_coef_cumsum[hi - 1] if hi > lo else 0.0)
            for p in range(first, last):
                d = occurrence_doc[p]
                if sweep < 0 and doc_warm[d]:
                    continue
                base = list_start[d]
                n_listed = list_size[d]
                state = states[d]
                i = occurrence_token[p]
                for _ in range(occurrence_count[p]):
                    old = z[i] if sweep >= 0 else -1
                    state, k, j_new, j_old = draw(state, old, base, n_listed, listed, beta_w, prior_mass, r, alpha,
                                                  view, cum)
                    n_listed = move_token(k, j_new, j_old, base, n_listed, listed)
                    z[i] = k
                    i += 1
                states[d] = state
                list_size[d] = n_listed
            for j in range(lo, hi):
                beta_w[row_topics[j]] = smoothing[row_topics[j]]
        if sweep >= burnin:
            for d in range(doc_first.shape[0]):
                n = doc_tokens[d]
                saved = doc_first[d] * samples + (sweep - burnin) * n
                for i in range(n):
                    z_saved[saved + i] = z[doc_first[d] + i]


@njit(cache=True, nogil=True)
def sample_worker(first, last, doc_indptr, entry_words, entry_counts, token_starts, doc_seeds, initial, alpha,
                  burnin, samples, rare_first, view, out_words, out_topics, out_counts, out_n_pairs, out_saved):
    """Documents first..last - 1 of the minibatch: the worker's occurrences of each row (its
    entries grouped by row, in document order: a counting sort) and scratch, then sample_sweeps,
    then each document's pairs (finish_document). A document whose tokens have topics in
    `initial` (the minibatch's tokens, -1 where none; empty: none has) starts from them."""
    n_topics = view[4].shape[0]
    n_rows = view[0].shape[0] - 1
    n_docs = last - first
    e_lo, e_hi = doc_indptr[first], doc_indptr[last]
    t_lo = token_starts[first]
    row_ptr = np.zeros(n_rows + 1, np.int64)
    for e in range(e_lo, e_hi):
        row_ptr[entry_words[e] + 1] += 1
    for r in range(n_rows):
        row_ptr[r + 1] += row_ptr[r]
    fill = row_ptr[:-1].copy()
    occurrence_doc = np.empty(e_hi - e_lo, np.int32)
    occurrence_token = np.empty(e_hi - e_lo, np.int64)
    occurrence_count = np.empty(e_hi - e_lo, np.int32)
    doc_first = np.empty(n_docs, np.int64)
    doc_tokens = np.empty(n_docs, np.int64)
    list_start = np.empty(n_docs, np.int64)
    list_size = np.zeros(n_docs, np.int64)
    states = np.empty(n_docs, np.uint64)
    capacity = 0
    longest = 1
    for d in range(n_docs):
        doc_first[d] = token_starts[first + d] - t_lo
        doc_tokens[d] = token_starts[first + d + 1] - token_starts[first + d]
        list_start[d] = capacity
        capacity += min(n_topics, doc_tokens[d])
        longest = max(longest, doc_tokens[d])
        states[d] = doc_seeds[first + d]
        i = doc_first[d]
        for e in range(doc_indptr[first + d], doc_indptr[first + d + 1]):
            p = fill[entry_words[e]]
            fill[entry_words[e]] += 1
            occurrence_doc[p] = d
            occurrence_token[p] = i
            occurrence_count[p] = entry_counts[e]
            i += entry_counts[e]
    listed = np.zeros((max(capacity, 1), 2), np.int32)
    z = np.zeros(max(token_starts[last] - t_lo, 1), np.int32)
    doc_warm = np.zeros(n_docs, np.bool_)
    for d in range(n_docs):
        if initial.shape[0] == 0 or doc_tokens[d] == 0 or initial[t_lo + doc_first[d]] < 0:
            continue
        doc_warm[d] = True
        n_listed = 0
        for i in range(doc_first[d], doc_first[d] + doc_tokens[d]):
            z[i] = initial[t_lo + i]
            n_listed = move_token(z[i], -1, -1, list_start[d], n_listed, listed)
        list_size[d] = n_listed
    beta_w = view[4].copy()
    cum = np.zeros(min(n_topics, longest), np.float64)
    z_saved = out_saved[t_lo * samples: token_starts[last] * samples]
    sample_sweeps(row_ptr, occurrence_doc, occurrence_token, occurrence_count, doc_first, doc_tokens, doc_warm, alpha,
                  burnin, samples, rare_first, view, states, list_start, list_size, listed, z, z_saved, beta_w, cum)
    n_dk = np.zeros(n_topics, np.int32)
    scratch_topics = np.zeros(n_topics, np.int32)
    topic_slot = np.full(n_topics, -1, np.int32)
    tally = np.zeros(n_topics, np.int32)
    for d in range(n_docs):
        lo, hi = doc_indptr[first + d], doc_indptr[first + d + 1]
        base = token_starts[first + d] * samples
        top = token_starts[first + d + 1] * samples
        out_n_pairs[first + d] = finish_document(
            entry_words[lo:hi], entry_counts[lo:hi], samples, doc_tokens[d], out_saved[base:top], 0, n_dk,
            scratch_topics, topic_slot, tally, out_words[base:top], out_topics[base:top], out_counts[base:top])


def sample_minibatch(doc_indptr, entry_words, entry_counts, token_starts, doc_seeds, worker_bounds, initial, alpha,
                     burnin, samples, rare_first, view, out_words, out_topics, out_counts, out_n_pairs, out_saved):
    """Sample every document of the minibatch word by word: the pieces of documents
    worker_bounds[i]..worker_bounds[i + 1] - 1 (sample_worker), taken by the threads as they come
    free (kernels/pieces.py). Outputs as kernels/gibbs.py's _sample_minibatch, at the same
    offsets, so they do not depend on the pieces or the threads."""
    pieces.run_ranges(sample_worker, worker_bounds, doc_indptr, entry_words, entry_counts, token_starts, doc_seeds,
                      initial, alpha, burnin, samples, rare_first, view, out_words, out_topics, out_counts,
                      out_n_pairs, out_saved)
