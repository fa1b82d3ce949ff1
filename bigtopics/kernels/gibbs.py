"""Sparse Gibbs sampling of one document's topic assignments with the topic-word terms frozen.

Within a minibatch the topic-word statistics N are fixed, so the conditional of token i of
document d (word w) is

    p(z_i = k | z_-i) ∝ (alpha_k + n_dk) * beta[k, w]
                      = (alpha_k + n_dk) * (smoothing[k] + coef[k, w])

with beta estimated from N by its mean (the default) or its geometric mean exp(E[log beta])
(beta_estimate "geometric"; kernels/frozen.py): smoothing[k] dense over topics, coef[k, w] > 0
only where N[k,w] > 0 (algorithms.md, section 1). The mass splits
into buckets (after Mimno et al. 2012, appendix A):

    word   = sum_{k: N[k,w] > 0} (alpha_k + n_dk) coef[k,w]  the word's row
    doc    = sum_{k: n_dk > 0} n_dk smoothing[k]             kept incrementally
    static = sum_k alpha_k smoothing[k]                      fixed for the minibatch

A short row (at most SCAN_PER_DOC_TOPIC times the document's topics) is summed in one
branch-free pass. A long row splits its bucket into shared = sum n_dk coef[k,w] over the
document's topics, each looked up in the row's index, and sum alpha_k coef[k,w], fixed for the
minibatch and drawn from prefix sums. The static bucket is drawn from prefix sums too (the
exact, static counterpart of Li et al.'s alias tables). alpha is a number (a symmetric prior)
or K numbers (an asymmetric one; kernels/prior.py). A draw therefore costs
O(min(row length, doc topics) + doc topics + log K), never O(K).

The tokens of one entry (a word repeated in the document) are drawn one after another, and
between two of them the counts move by one token each way. So the word's share (the scanned row,
or the shared part) is summed once per entry; each later token notes the changes since then
(topic k's count moved by delta, so its item's mass by delta coef[k, w]) and draws exactly by
rejection: propose from the summed share plus what the items gained, accept an item that lost
with probability (its mass now) / (its summed mass), and on a rejection sum the share again and
draw from it. Accepted or not, the token's topic follows the conditional exactly (tests check it
against the dense one); a later token costs O(changes + log row) instead of the scan, and the
share is summed again once more than MAX_CHANGES distinct topics changed.

The frozen view is the tuple (row_indptr, row_topics, row_coef, row_coef_cumsum, smoothing,
smoothing_cumsum, *index) of kernels/frozen.py, with smoothing's running sum added and the
rows' index spliced in (one flat tuple).

The layers, outermost first: _sample_minibatch (pieces of documents for the threads,
kernels/pieces.py) -> sample_documents (one piece, its scratch: kernels/doc_state.py and change_scratch)
-> sample_document (one document, kernels/jit.py) -> draw_token (one token, inlined).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import pieces
from .doc_state import add_token, document_scratch, finish_document, first_above
from .frozen import lookup
from .jit import document_kernel
from .prior import prior_of, prior_scale
from .rng import next_uniform

# The per-token helpers are inlined at numba's level, and the document loop runs without numba's
# reference counting (kernels/jit.py), which would otherwise cost more than the draw.


# Scan a row up to this many times the document's topics, else look those topics up: 16 was a
# little faster than 4 at K = 2000 (benchmarks/RESULTS.md, "Training throughput").
SCAN_PER_DOC_TOPIC = 16


@njit(cache=True, inline="always")
def scans(w, n_doc_topics, frozen):
    """Whether word w's row is short enough to scan for a document of n_doc_topics topics."""
    return frozen[0][w + 1] - frozen[0][w] <= SCAN_PER_DOC_TOPIC * n_doc_topics


@njit(cache=True, inline="always")
def word_share(w, scanned, alpha, n_dk, doc_topics, n_doc_topics, frozen, word_cum, word_topic, word_coef):
    """The word's share of the conditional as running sums word_cum[:n_items] over items; returns
    n_items.

    A scanned row's items are its entries j (topic row_topics[row_indptr[w] + j]), of mass
    (alpha_k + n_dk) coef[k, w]; otherwise the items are the document's topics in the row
    (word_topic[j], coef word_coef[j]), of mass n_dk coef[k, w], and the row's alpha coef[k, w]
    lies outside the share (outside_mass).
    """
    row_indptr, row_topics, row_coef = frozen[:3]
    lo = row_indptr[w]
    hi = row_indptr[w + 1]
    if scanned:
        mass = 0.0
        for j in range(lo, hi):
            mass += (prior_of(alpha, row_topics[j]) + n_dk[row_topics[j]]) * row_coef[j]
            word_cum[j - lo] = mass
        return hi - lo
    index = frozen[6:]
    n_items = 0
    mass = 0.0
    for i in range(n_doc_topics):
        t = doc_topics[i]
        c = lookup(index, w, t)
        if c > 0.0:
            mass += n_dk[t] * c
            word_cum[n_items] = mass
            word_topic[n_items] = t
            word_coef[n_items] = c
            n_items += 1
    return n_items


@njit(cache=True, inline="always")
def share_topic(j, w, scanned, frozen, word_topic):
    """The topic of item j of the word's share (word_share)."""
    return frozen[1][frozen[0][w] + j] if scanned else word_topic[j]


@njit(cache=True, inline="always")
def share_coef(j, w, scanned, frozen, word_coef):
    """coef[k, w] of item j's topic k."""
    return frozen[2][frozen[0][w] + j] if scanned else word_coef[j]


@njit(cache=True, inline="always")
def outside_mass(w, alpha, scanned, doc_mass, frozen):
    """The conditional's mass beyond the word's share: the row's alpha coef (unless scanned),
    doc = sum n_dk smoothing and static = alpha sum smoothing."""
    row_indptr, row_coef_cumsum, smoothing_cumsum = frozen[0], frozen[3], frozen[5]
    lo = row_indptr[w]
    hi = row_indptr[w + 1]
    scale = prior_scale(alpha)
    row_mass = scale * row_coef_cumsum[hi - 1] if hi > lo and not scanned else 0.0
    return row_mass + doc_mass + scale * smoothing_cumsum[smoothing_cumsum.shape[0] - 1]


@njit(cache=True, inline="always")
def outside_topic(x, w, alpha, scanned, n_dk, doc_topics, n_doc_topics, doc_mass, frozen):
    """The topic at x in [0, outside_mass): the row's alpha coef (unless scanned), the doc
    bucket, then the static bucket (the last topic if rounding carries x past the end)."""
    row_indptr, row_topics, _, row_coef_cumsum, smoothing, smoothing_cumsum = frozen[:6]
    lo = row_indptr[w]
    hi = row_indptr[w + 1]
    scale = prior_scale(alpha)
    if not scanned and hi > lo:
        row_mass = scale * row_coef_cumsum[hi - 1]
        if x < row_mass:
            return row_topics[first_above(row_coef_cumsum, lo, hi, x / scale)]
        x -= row_mass
    if x < doc_mass and n_doc_topics > 0:
        for i in range(n_doc_topics):
            x -= n_dk[doc_topics[i]] * smoothing[doc_topics[i]]
            if x < 0.0:
                return doc_topics[i]
        return doc_topics[n_doc_topics - 1]
    return first_above(smoothing_cumsum, 0, smoothing_cumsum.shape[0], (x - doc_mass) / scale)


@njit(cache=True, inline="always")
def draw_topic(u, w, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, frozen, word_cum, word_topic, word_coef):
    """Draw a topic for one token of word w from the bucketed conditional, given u ~ U[0,1).

    n_dk, doc_topics[:n_doc_topics] and doc_mass (= sum n_dk smoothing) must already exclude
    the token being resampled. word_cum / word_topic / word_coef are scratch of at least
    min(K, longest row) entries.
    """
    scanned = scans(w, n_doc_topics, frozen)
    n_items = word_share(w, scanned, alpha, n_dk, doc_topics, n_doc_topics, frozen, word_cum, word_topic, word_coef)
    share = word_cum[n_items - 1] if n_items > 0 else 0.0
    x = u * (share + outside_mass(w, alpha, scanned, doc_mass, frozen))
    if x < share:
        return share_topic(first_above(word_cum, 0, n_items, x), w, scanned, frozen, word_topic)
    return outside_topic(x - share, w, alpha, scanned, n_dk, doc_topics, n_doc_topics, doc_mass, frozen)


# The distinct topics whose changes an entry's share keeps track of before it is summed again.
MAX_CHANGES = 64

# A share is (n_items (-1: stale, to be summed before the next draw), scanned, summed mass,
# changed mass, gained mass, n_changes, n_gainers): the mass of its items when summed, what the
# noted changes added to it in all and in the items whose count rose, the changes noted, and how
# many of them leave their topic's count above the summed one (so that a gained mass left over
# from rounding is never drawn from).
STALE_SHARE = (-1, False, 0.0, 0.0, 0.0, 0, 0)


@njit(cache=True, inline="always")
def forget_share(share, change_slot, change_topics):
    """The stale share, with its changes cleared."""
    for s in range(share[5]):
        change_slot[change_topics[s]] = -1
    return STALE_SHARE


@njit(cache=True, inline="always")
def cache_share(share, w, scanned, alpha, n_dk, doc_topics, n_doc_topics, frozen, word_cum, word_topic, word_coef,
                change_slot, change_topics):
    """Sum word w's share for the current counts (word_share) into word_cum and start tracking
    changes against it (STALE_SHARE says what a share holds)."""
    forget_share(share, change_slot, change_topics)
    n_items = word_share(w, scanned, alpha, n_dk, doc_topics, n_doc_topics, frozen, word_cum, word_topic, word_coef)
    return (n_items, scanned, word_cum[n_items - 1] if n_items > 0 else 0.0, 0.0, 0.0, 0, 0)


@njit(cache=True, inline="always")
def note_change(share, k, delta, coef, change_slot, change_topics, change_counts, change_coef):
    """Record n_dk[k] += delta against the summed share: item k's mass moves by delta coef
    (coef = coef[k, w], 0 where k is not in the row). A stale share has nothing to track; a
    full list of changes makes it stale."""
    n_items, scanned, summed, changed, gained, n_changes, n_gainers = share
    if n_items < 0 or coef == 0.0:
        return share
    slot = change_slot[k]
    if slot < 0:
        if n_changes == MAX_CHANGES:
            return (-1, scanned, summed, changed, gained, n_changes, n_gainers)
        slot = n_changes
        change_slot[k] = slot
        change_topics[slot] = k
        change_counts[slot] = 0
        change_coef[slot] = coef
        n_changes += 1
    before = change_counts[slot]
    after = before + delta
    change_counts[slot] = after
    n_gainers += int(after > 0) - int(before > 0)
    gained = gained + (max(after, 0) - max(before, 0)) * coef if n_gainers > 0 else 0.0
    return (n_items, scanned, summed, changed + delta * coef, gained, n_changes, n_gainers)


@njit(cache=True, inline="always")
def draw_token(state, share, w, need_coef, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, frozen, word_cum,
               word_topic, word_coef, change_slot, change_topics, change_counts, change_coef):
    """Draw a topic k for a token of word w (not counted in n_dk) exactly, with word w's share
    summed once per entry and the changes since then tracked (module docstring). Returns
    (state, k, coef[k, w], share); a k drawn outside the share has its coef looked up only if
    need_coef (else 0.0)."""
    if share[0] < 0:
        share = cache_share(share, w, scans(w, n_doc_topics, frozen), alpha, n_dk, doc_topics, n_doc_topics,
                            frozen, word_cum, word_topic, word_coef, change_slot, change_topics)
    n_items, scanned, summed, changed, gained, n_changes, n_gainers = share
    current = summed + changed
    state, u = next_uniform(state)
    x = u * (current + outside_mass(w, alpha, scanned, doc_mass, frozen))
    if x >= current:
        k = outside_topic(x - current, w, alpha, scanned, n_dk, doc_topics, n_doc_topics, doc_mass, frozen)
        return state, k, lookup(frozen[6:], w, k) if need_coef else 0.0, share
    if n_changes == 0:
        j = first_above(word_cum, 0, n_items, x)
        return (state, share_topic(j, w, scanned, frozen, word_topic), share_coef(j, w, scanned, frozen, word_coef),
                share)
    # propose from the summed share plus what the items gained (y uniform below their sum)
    y = x / current * (summed + gained)
    if y >= summed and n_gainers > 0:
        y -= summed
        s = 0
        for s in range(n_changes):
            if change_counts[s] > 0:
                y -= change_counts[s] * change_coef[s]
                if y < 0.0:
                    break
        while change_counts[s] <= 0:  # rounding carried y past the last item that gained
            s -= 1
        return state, change_topics[s], change_coef[s], share
    j = first_above(word_cum, 0, n_items, y)
    k = share_topic(j, w, scanned, frozen, word_topic)
    slot = change_slot[k]
    if slot >= 0 and change_counts[slot] < 0:
        # the item lost: accept with probability (its mass now) / (its summed mass)
        prior = prior_of(alpha, k) if scanned else 0.0
        state, u = next_uniform(state)
        if u * (prior + n_dk[k] - change_counts[slot]) >= prior + n_dk[k]:
            # rejected: an exact draw from the share summed again (the same items, the same bucket)
            share = cache_share(share, w, scanned, alpha, n_dk, doc_topics, n_doc_topics, frozen, word_cum,
                                word_topic, word_coef, change_slot, change_topics)
            state, u = next_uniform(state)
            if share[0] == 0:  # only rounding leads here: the share is empty
                x = u * outside_mass(w, alpha, scanned, doc_mass, frozen)
                k = outside_topic(x, w, alpha, scanned, n_dk, doc_topics, n_doc_topics, doc_mass, frozen)
                return state, k, lookup(frozen[6:], w, k) if need_coef else 0.0, share
            j = first_above(word_cum, 0, share[0], u * share[2])
            k = share_topic(j, w, scanned, frozen, word_topic)
    return state, k, share_coef(j, w, scanned, frozen, word_coef), share


@njit(cache=True)
def change_scratch(n_topics):
    """Per-worker state of the changes an entry's share tracks: (change_slot, change_topics,
    change_counts, change_coef), clean (change_slot = -1)."""
    return (np.full(n_topics, -1, np.int32), np.zeros(MAX_CHANGES, np.int32), np.zeros(MAX_CHANGES, np.int32),
            np.zeros(MAX_CHANGES, np.float64))


@document_kernel
def sample_document(entry_words, entry_counts, alpha, burnin, samples, rare_first, seed, frozen,
                    n_dk, doc_topics, topic_slot, z, z_coef, z_saved, word_cum, word_topic, word_coef, tally,
                    change_slot, change_topics, change_counts, change_coef,
                    out_words, out_topics, out_counts):
    """Gibbs-sample one document and emit its sufficient statistics.

    The document is given as entries (word, count); its tokens are the entries' words repeated.
    Initialisation is sequential, p(z_i = k) ∝ (alpha + #{j < i: z_j = k}) beta[k, w_i] with
    beta[k, w] = smoothing[k] + coef[k, w] the frozen view's estimate (module docstring), over
    the tokens in order or, with rare_first, from the last to the first (word ids are ordered by
    frequency, so the rarest words, which say most about the document's topics, are placed first
    and the frequent words shared by all topics join them); then
    `burnin` sweeps are discarded and `samples` sweeps saved. Emits, per (word, topic) pair, the
    number of (token, saved sweep) assignments, so Nhat[k,w] = out_count / samples
    (kernels/doc_state.py finish_document).
    z_coef holds coef[z_i, w_i] for the tokens of repeated words (what their share tracks).
    Scratch n_dk / tally / topic_slot / change_slot must be zero / zero / -1 / -1 on entry and
    are left that way. Returns the number of pairs written to out_*.
    """
    smoothing = frozen[4]
    state = seed
    n_doc_topics = 0
    doc_mass = 0.0
    n_tokens = 0
    for e in range(entry_words.shape[0]):
        n_tokens += entry_counts[e]
    share = STALE_SHARE

    for sweep in range(-1, burnin + samples):  # sweep -1 is the sequential initialisation
        if sweep >= 0:
            # recompute the incremental mass once per sweep so rounding never accumulates
            doc_mass = 0.0
            for j in range(n_doc_topics):
                k = doc_topics[j]
                doc_mass += n_dk[k] * smoothing[k]
        backwards = sweep < 0 and rare_first  # the tokens from the last to the first
        i, i_step = (n_tokens - 1, -1) if backwards else (0, 1)
        n_entries = entry_words.shape[0]
        for step in range(n_entries):
            e = n_entries - 1 - step if backwards else step
            w = entry_words[e]
            count = entry_counts[e]
            share = forget_share(share, change_slot, change_topics)
            for t in range(count):
                if sweep >= 0:  # during the initialisation each token sees only the tokens before it
                    k = z[i]
                    n_doc_topics = add_token(k, -1, n_dk, doc_topics, topic_slot, n_doc_topics)
                    doc_mass -= smoothing[k]
                    if t > 0:
                        share = note_change(share, k, -1, z_coef[i], change_slot, change_topics, change_counts,
                                            change_coef)
                state, k, z_coef[i], share = draw_token(state, share, w, count > 1, alpha, n_dk, doc_topics,
                                                        n_doc_topics, doc_mass, frozen, word_cum, word_topic,
                                                        word_coef, change_slot, change_topics, change_counts,
                                                        change_coef)
                z[i] = k
                n_doc_topics = add_token(k, 1, n_dk, doc_topics, topic_slot, n_doc_topics)
                doc_mass += smoothing[k]
                if t + 1 < count:
                    share = note_change(share, k, 1, z_coef[i], change_slot, change_topics, change_counts,
                                        change_coef)
                i += i_step
        if sweep >= burnin:
            base = (sweep - burnin) * n_tokens
            for i in range(n_tokens):
                z_saved[base + i] = z[i]
    forget_share(share, change_slot, change_topics)
    return finish_document(entry_words, entry_counts, samples, n_tokens, z_saved, n_doc_topics, n_dk, doc_topics,
                           topic_slot, tally, out_words, out_topics, out_counts)


@njit(cache=True, nogil=True)
def sample_documents(first, last, doc_indptr, entry_words, entry_counts, token_starts, doc_seeds, alpha, burnin,
                     samples, rare_first, max_doc_tokens, max_row, frozen, out_words, out_topics, out_counts,
                     out_n_pairs, out_saved):
    """One worker's part of _sample_minibatch: documents first..last - 1, one after another, with
    one set of scratch (kernels/doc_state.py, change_scratch) allocated here and reused."""
    n_topics = frozen[4].shape[0]
    n_dk, doc_topics, topic_slot, word_cum, word_topic, word_coef = document_scratch(n_topics, max_row)
    change_slot, change_topics, change_counts, change_coef = change_scratch(n_topics)
    tally = np.zeros(n_topics, np.int32)
    z = np.zeros(max_doc_tokens, np.int32)
    z_coef = np.zeros(max_doc_tokens, np.float64)
    for d in range(first, last):
        lo, hi = doc_indptr[d], doc_indptr[d + 1]
        base = token_starts[d] * samples
        top = token_starts[d + 1] * samples
        out_n_pairs[d] = sample_document(
            entry_words[lo:hi], entry_counts[lo:hi], alpha, burnin, samples, rare_first, doc_seeds[d], frozen,
            n_dk, doc_topics, topic_slot, z, z_coef, out_saved[base:top], word_cum, word_topic, word_coef, tally,
            change_slot, change_topics, change_counts, change_coef,
            out_words[base:top], out_topics[base:top], out_counts[base:top])


def _sample_minibatch(doc_indptr, entry_words, entry_counts, token_starts, doc_seeds,
                      worker_bounds, alpha, burnin, samples, rare_first, max_doc_tokens, max_row, frozen,
                      out_words, out_topics, out_counts, out_n_pairs, out_saved):
    """Sample every document of the minibatch: the pieces worker_bounds[i]..worker_bounds[i + 1] - 1
    (sample_documents), taken by the threads as they come free (kernels/pieces.py).

    Document d writes its pairs, and its saved assignments (samples sweeps of its tokens, sweep
    by sweep), at offset token_starts[d] * samples, so the output does not depend on the pieces
    or the threads. max_doc_tokens bounds the documents' lengths and max_row the rows of their words.
    """
    pieces.run_ranges(sample_documents, worker_bounds, doc_indptr, entry_words, entry_counts, token_starts,
                      doc_seeds, alpha, burnin, samples, rare_first, max_doc_tokens, max_row, frozen, out_words,
                      out_topics, out_counts, out_n_pairs, out_saved)
