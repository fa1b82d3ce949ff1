"""Sparse Gibbs sampling of one document's topic assignments with the topic-word terms frozen.

Within a minibatch the topic-word statistics N are fixed, so the conditional of token i of
document d (word w) is

    p(z_i = k | z_-i) ∝ (alpha + n_dk) * exp(Elog_beta[k, w])
                      = (alpha + n_dk) * (smoothing[k] + coef[k, w])

with smoothing[k] = e^psi(eta) / e^psi(V eta + N[k]) dense over topics and
coef[k, w] = (e^psi(eta + N[k,w]) - e^psi(eta)) / e^psi(V eta + N[k]) > 0 only where N[k,w] > 0
(algorithms.md, section 1). The mass splits into three buckets (Mimno et al. 2012, appendix A):

    row    = sum_{k: N[k,w] > 0} (alpha + n_dk) coef[k,w]   scanned over the word's row
    doc    = sum_{k: n_dk > 0}   n_dk smoothing[k]           kept incrementally, scanned over
                                                            the document's topics
    static = alpha * sum_k smoothing[k]                      drawn by binary search over the
                                                            prefix sums, fixed for the minibatch

so a draw costs O(topics in the word's row + topics in the document + log K), never O(K).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .rng import next_uniform


@njit(cache=True)
def draw_topic(u, w, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, static_mass,
               row_indptr, row_topics, row_coef, smoothing, smoothing_cumsum, row_cumulative):
    """Draw a topic for one token of word w from the three-bucket conditional, given u ~ U[0,1).

    n_dk, doc_topics[:n_doc_topics] and doc_mass must already exclude the token being
    resampled; static_mass = alpha * smoothing_cumsum[-1]. row_cumulative is scratch of at least
    the row's length.
    """
    lo = row_indptr[w]
    hi = row_indptr[w + 1]
    row_mass = 0.0
    for j in range(lo, hi):
        row_mass += (alpha + n_dk[row_topics[j]]) * row_coef[j]
        row_cumulative[j - lo] = row_mass
    x = u * (row_mass + doc_mass + static_mass)
    if x < row_mass:
        for j in range(hi - lo):
            if x < row_cumulative[j]:
                return row_topics[lo + j]
        return row_topics[hi - 1]
    x -= row_mass
    if n_doc_topics > 0 and x < doc_mass:
        for i in range(n_doc_topics):
            k = doc_topics[i]
            x -= n_dk[k] * smoothing[k]
            if x < 0.0:
                return k
        return doc_topics[n_doc_topics - 1]  # rounding carried x just past the end
    # static bucket: the smallest k with smoothing_cumsum[k] > x / alpha
    target = (x - doc_mass) / alpha
    a = 0
    b = smoothing_cumsum.shape[0] - 1
    while a < b:
        m = (a + b) // 2
        if smoothing_cumsum[m] > target:
            b = m
        else:
            a = m + 1
    return a


@njit(cache=True)
def _add_token(k, delta, n_dk, doc_topics, topic_slot, n_doc_topics):
    """n_dk[k] += delta (±1), keeping doc_topics[:n] = the topics with n_dk > 0."""
    n_dk[k] += delta
    if delta > 0 and n_dk[k] == 1:
        doc_topics[n_doc_topics] = k
        topic_slot[k] = n_doc_topics
        n_doc_topics += 1
    elif delta < 0 and n_dk[k] == 0:
        last = doc_topics[n_doc_topics - 1]
        slot = topic_slot[k]
        doc_topics[slot] = last
        topic_slot[last] = slot
        topic_slot[k] = -1
        n_doc_topics -= 1
    return n_doc_topics


@njit(cache=True)
def sample_document(entry_words, entry_counts, alpha, burnin, samples, seed,
                    row_indptr, row_topics, row_coef, smoothing, smoothing_cumsum,
                    n_dk, doc_topics, topic_slot, z, z_saved, row_cumulative, tally,
                    out_words, out_topics, out_counts):
    """Gibbs-sample one document and emit its sufficient statistics.

    The document is given as entries (word, count); its tokens are the entries' words repeated.
    Initialisation is sequential, p(z_i = k) ∝ (alpha + #{j < i: z_j = k}) exp(Elog_beta[k,w_i]);
    then `burnin` sweeps are discarded and `samples` sweeps saved. Emits, per (word, topic) pair,
    the number of (token, saved sweep) assignments, so Nhat[k,w] = out_count / samples.
    Scratch n_dk / topic_slot must be zero / -1 on entry and are left that way. Returns the
    number of pairs written to out_*.
    """
    n_topics = smoothing_cumsum.shape[0]
    static_mass = alpha * smoothing_cumsum[n_topics - 1]
    state = seed
    n_doc_topics = 0
    doc_mass = 0.0
    n_tokens = 0
    for e in range(entry_words.shape[0]):
        n_tokens += entry_counts[e]

    # sequential initialisation: each token sees only the tokens before it
    i = 0
    for e in range(entry_words.shape[0]):
        w = entry_words[e]
        for _ in range(entry_counts[e]):
            state, u = next_uniform(state)
            k = draw_topic(u, w, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, static_mass,
                           row_indptr, row_topics, row_coef, smoothing, smoothing_cumsum, row_cumulative)
            z[i] = k
            n_doc_topics = _add_token(k, 1, n_dk, doc_topics, topic_slot, n_doc_topics)
            doc_mass += smoothing[k]
            i += 1

    for sweep in range(burnin + samples):
        # recompute the incremental mass once per sweep so rounding never accumulates
        doc_mass = 0.0
        for j in range(n_doc_topics):
            k = doc_topics[j]
            doc_mass += n_dk[k] * smoothing[k]
        i = 0
        for e in range(entry_words.shape[0]):
            w = entry_words[e]
            for _ in range(entry_counts[e]):
                k = z[i]
                n_doc_topics = _add_token(k, -1, n_dk, doc_topics, topic_slot, n_doc_topics)
                doc_mass -= smoothing[k]
                state, u = next_uniform(state)
                k = draw_topic(u, w, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, static_mass,
                               row_indptr, row_topics, row_coef, smoothing, smoothing_cumsum, row_cumulative)
                z[i] = k
                n_doc_topics = _add_token(k, 1, n_dk, doc_topics, topic_slot, n_doc_topics)
                doc_mass += smoothing[k]
                i += 1
        if sweep >= burnin:
            z_saved[(sweep - burnin) * n_tokens:(sweep - burnin + 1) * n_tokens] = z[:n_tokens]

    # leave the scratch clean for the next document
    for j in range(n_doc_topics):
        k = doc_topics[j]
        n_dk[k] = 0
        topic_slot[k] = -1

    # tally saved assignments per entry; tokens of an entry are contiguous
    n_pairs = 0
    first = 0
    for e in range(entry_words.shape[0]):
        n_touched = 0
        for s in range(samples):
            base = s * n_tokens + first
            for t in range(entry_counts[e]):
                k = z_saved[base + t]
                if tally[k] == 0:
                    doc_topics[n_touched] = k  # doc_topics is free scratch now
                    n_touched += 1
                tally[k] += 1
        for j in range(n_touched):
            k = doc_topics[j]
            out_words[n_pairs] = entry_words[e]
            out_topics[n_pairs] = k
            out_counts[n_pairs] = tally[k]
            tally[k] = 0
            n_pairs += 1
        first += entry_counts[e]
    return n_pairs


@njit(parallel=True)
def _sample_minibatch(doc_indptr, entry_words, entry_counts, token_starts, doc_seeds,
                      worker_bounds, alpha, burnin, samples, max_doc_tokens, max_row,
                      row_indptr, row_topics, row_coef, smoothing, smoothing_cumsum,
                      out_words, out_topics, out_counts, out_n_pairs):
    """Each worker samples a static, contiguous range of documents with its own scratch.

    Document d writes its pairs at offset token_starts[d] * samples, so the output does not
    depend on the number of workers.
    """
    n_topics = smoothing_cumsum.shape[0]
    for worker in prange(worker_bounds.shape[0] - 1):
        n_dk = np.zeros(n_topics, np.int32)
        doc_topics = np.zeros(n_topics, np.int32)
        topic_slot = np.full(n_topics, -1, np.int32)
        tally = np.zeros(n_topics, np.int32)
        z = np.zeros(max_doc_tokens, np.int32)
        z_saved = np.zeros(max_doc_tokens * samples, np.int32)
        row_cumulative = np.zeros(max(max_row, 1), np.float64)
        for d in range(worker_bounds[worker], worker_bounds[worker + 1]):
            lo, hi = doc_indptr[d], doc_indptr[d + 1]
            base = token_starts[d] * samples
            top = token_starts[d + 1] * samples
            out_n_pairs[d] = sample_document(
                entry_words[lo:hi], entry_counts[lo:hi], alpha, burnin, samples, doc_seeds[d],
                row_indptr, row_topics, row_coef, smoothing, smoothing_cumsum,
                n_dk, doc_topics, topic_slot, z, z_saved, row_cumulative, tally,
                out_words[base:top], out_topics[base:top], out_counts[base:top])
