"""Sparse Gibbs sampling of one document's topic assignments with the topic-word terms frozen.

Within a minibatch the topic-word statistics N are fixed, so the conditional of token i of
document d (word w) is

    p(z_i = k | z_-i) ∝ (alpha + n_dk) * beta[k, w]
                      = (alpha + n_dk) * (smoothing[k] + coef[k, w])

with beta estimated from N by its mean or geometric mean (kernels/frozen.py): smoothing[k] dense
over topics, coef[k, w] > 0 only where N[k,w] > 0 (algorithms.md, section 1). The mass splits
into buckets (after Mimno et al. 2012, appendix A):

    word   = sum_{k: N[k,w] > 0} (alpha + n_dk) coef[k,w]    the word's row
    doc    = sum_{k: n_dk > 0} n_dk smoothing[k]             kept incrementally
    static = alpha * sum_k smoothing[k]                      fixed for the minibatch

A short row (at most SCAN_PER_DOC_TOPIC times the document's topics) is summed in one
branch-free pass. A long row splits its bucket into shared = sum n_dk coef[k,w] over the
document's topics, each looked up in the row's index, and alpha * sum coef[k,w], fixed for the
minibatch and drawn from prefix sums. The static bucket is drawn from prefix sums too (the exact,
static counterpart of Li et al.'s alias tables). A draw therefore costs
O(min(row length, doc topics) + doc topics + log K), never O(K).

The frozen view is the tuple (row_indptr, row_topics, row_coef, row_coef_cumsum, smoothing,
smoothing_cumsum, *index) of kernels/frozen.py, with smoothing's running sum added and the
rows' index spliced in (numba's parallel drivers take flat tuples only).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .frozen import lookup
from .jit import document_kernel
from .rng import next_uniform

# The per-token helpers are inlined at numba's level, and the document loop runs without numba's
# reference counting (kernels/jit.py), which would otherwise cost more than the draw.


# Scan a row up to this many times the document's topics, else look those topics up: 16 was 3-8%
# faster than 4 at K = 2000, within the machine's noise (benchmarks/RESULTS.md, "Training throughput").
SCAN_PER_DOC_TOPIC = 16


@njit(cache=True, inline="always")
def _first_above(cumulative, lo, hi, target):
    """The smallest j in [lo, hi) with cumulative[j] > target (hi - 1 if rounding says none)."""
    b = hi - 1
    while lo < b:
        mid = (lo + b) // 2
        if cumulative[mid] > target:
            b = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, inline="always")
def draw_topic(u, w, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, frozen, word_cum, word_topic):
    """Draw a topic for one token of word w from the bucketed conditional, given u ~ U[0,1).

    n_dk, doc_topics[:n_doc_topics] and doc_mass (= sum n_dk smoothing) must already exclude
    the token being resampled. word_cum / word_topic are scratch of at least min(K, longest row)
    entries.
    """
    row_indptr, row_topics, row_coef, row_coef_cumsum, smoothing, smoothing_cumsum = frozen[:6]
    index = frozen[6:]
    lo = row_indptr[w]
    hi = row_indptr[w + 1]
    static_mass = alpha * smoothing_cumsum[smoothing_cumsum.shape[0] - 1]
    k = -1
    if hi - lo <= SCAN_PER_DOC_TOPIC * n_doc_topics:
        word_mass = 0.0
        for j in range(lo, hi):
            word_mass += (alpha + n_dk[row_topics[j]]) * row_coef[j]
            word_cum[j - lo] = word_mass
        x = u * (word_mass + doc_mass + static_mass)
        if x < word_mass:
            k = row_topics[lo + _first_above(word_cum, 0, hi - lo, x)]
        x -= word_mass
    else:
        n_shared = 0
        shared_mass = 0.0
        for i in range(n_doc_topics):
            t = doc_topics[i]
            c = lookup(index, w, t)
            if c > 0.0:
                shared_mass += n_dk[t] * c
                word_cum[n_shared] = shared_mass
                word_topic[n_shared] = t
                n_shared += 1
        row_mass = alpha * row_coef_cumsum[hi - 1] if hi > lo else 0.0
        x = u * (shared_mass + row_mass + doc_mass + static_mass)
        if x < shared_mass:
            k = word_topic[_first_above(word_cum, 0, n_shared, x)]
        elif x < shared_mass + row_mass:
            k = row_topics[_first_above(row_coef_cumsum, lo, hi, (x - shared_mass) / alpha)]
        x -= shared_mass + row_mass
    if k < 0 and x < doc_mass and n_doc_topics > 0:
        k = doc_topics[n_doc_topics - 1]  # if rounding carries x just past the end
        for i in range(n_doc_topics):
            x -= n_dk[doc_topics[i]] * smoothing[doc_topics[i]]
            if x < 0.0:
                k = doc_topics[i]
                break
    if k < 0:
        k = _first_above(smoothing_cumsum, 0, smoothing_cumsum.shape[0], (x - doc_mass) / alpha)
    return k


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _draw_and_count(state, w, alpha, n_dk, doc_topics, topic_slot, n_doc_topics, doc_mass, frozen,
                    word_cum, word_topic):
    """Draw a topic for a token of word w (not counted in n_dk) and count it.

    Returns (state, topic, n_doc_topics, doc_mass).
    """
    state, u = next_uniform(state)
    k = draw_topic(u, w, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, frozen, word_cum, word_topic)
    n_doc_topics = _add_token(k, 1, n_dk, doc_topics, topic_slot, n_doc_topics)
    return state, k, n_doc_topics, doc_mass + frozen[4][k]


@njit(cache=True)
def document_scratch(n_topics, max_row):
    """Per-worker state of the document being sampled: (n_dk, doc_topics, topic_slot,
    word_cum, word_topic), clean (n_dk = 0, topic_slot = -1)."""
    scratch = max(1, min(max_row, n_topics))
    return (np.zeros(n_topics, np.int32), np.zeros(n_topics, np.int32), np.full(n_topics, -1, np.int32),
            np.zeros(scratch, np.float64), np.zeros(scratch, np.int32))


@njit(cache=True, inline="always")
def finish_document(entry_words, entry_counts, samples, n_tokens, z_saved, n_doc_topics, n_dk, doc_topics,
                    topic_slot, tally, out_words, out_topics, out_counts):
    """Clean the document scratch (n_dk, topic_slot) for the next document and emit the saved
    assignments z_saved (samples sweeps of n_tokens) as (word, topic, count) pairs; returns how
    many pairs were written."""
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


@document_kernel
def sample_document(entry_words, entry_counts, alpha, burnin, samples, seed, frozen,
                    n_dk, doc_topics, topic_slot, z, z_saved, word_cum, word_topic, tally,
                    out_words, out_topics, out_counts):
    """Gibbs-sample one document and emit its sufficient statistics.

    The document is given as entries (word, count); its tokens are the entries' words repeated.
    Initialisation is sequential, p(z_i = k) ∝ (alpha + #{j < i: z_j = k}) exp(Elog_beta[k,w_i]);
    then `burnin` sweeps are discarded and `samples` sweeps saved. Emits, per (word, topic) pair,
    the number of (token, saved sweep) assignments, so Nhat[k,w] = out_count / samples.
    Scratch n_dk / tally / topic_slot must be zero / zero / -1 on entry and are left that way. Returns the
    number of pairs written to out_*.
    """
    smoothing = frozen[4]
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
            state, z[i], n_doc_topics, doc_mass = _draw_and_count(
                state, w, alpha, n_dk, doc_topics, topic_slot, n_doc_topics, doc_mass, frozen,
                word_cum, word_topic)
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
                n_doc_topics = _add_token(z[i], -1, n_dk, doc_topics, topic_slot, n_doc_topics)
                doc_mass -= smoothing[z[i]]
                state, z[i], n_doc_topics, doc_mass = _draw_and_count(
                    state, w, alpha, n_dk, doc_topics, topic_slot, n_doc_topics, doc_mass, frozen,
                    word_cum, word_topic)
                i += 1
        if sweep >= burnin:
            base = (sweep - burnin) * n_tokens
            for i in range(n_tokens):
                z_saved[base + i] = z[i]
    return finish_document(entry_words, entry_counts, samples, n_tokens, z_saved, n_doc_topics, n_dk, doc_topics,
                           topic_slot, tally, out_words, out_topics, out_counts)


@njit(parallel=True)
def _sample_minibatch(doc_indptr, entry_words, entry_counts, token_starts, doc_seeds,
                      worker_bounds, alpha, burnin, samples, max_doc_tokens, max_row, frozen,
                      out_words, out_topics, out_counts, out_n_pairs, out_saved):
    """Each worker samples a static, contiguous range of documents with its own scratch.

    Document d writes its pairs, and its saved assignments (samples sweeps of its tokens, sweep
    by sweep), at offset token_starts[d] * samples, so the output does not depend on the number
    of workers.
    """
    n_topics = frozen[4].shape[0]
    for worker in prange(worker_bounds.shape[0] - 1):
        n_dk, doc_topics, topic_slot, word_cum, word_topic = document_scratch(n_topics, max_row)
        tally = np.zeros(n_topics, np.int32)
        z = np.zeros(max_doc_tokens, np.int32)
        for d in range(worker_bounds[worker], worker_bounds[worker + 1]):
            lo, hi = doc_indptr[d], doc_indptr[d + 1]
            base = token_starts[d] * samples
            top = token_starts[d + 1] * samples
            out_n_pairs[d] = sample_document(
                entry_words[lo:hi], entry_counts[lo:hi], alpha, burnin, samples, doc_seeds[d], frozen,
                n_dk, doc_topics, topic_slot, z, out_saved[base:top], word_cum, word_topic, tally,
                out_words[base:top], out_topics[base:top], out_counts[base:top])
