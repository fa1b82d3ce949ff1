"""The state of the document being sampled: its topic counts, the scratch of a draw, and its
statistics at the end. Shared by the samplers (kernels/gibbs.py, kernels/alias_gibbs.py), the
left-to-right evaluator (kernels/evaluate.py) and the saved assignments (kernels/saved.py).

A document of n tokens with topics z_1..z_n has the counts n_dk[k] = #{i: z_i = k}. A draw needs
the topics with n_dk > 0 (at most min(K, n) of them), never all K, so the counts are dense and
their support is kept as a list with its inverse:

    n_dk[k]         int32 (K)   the document's count of topic k
    doc_topics[j]   int32 (K)   j < n_doc_topics: the topics with n_dk > 0, in no fixed order
    topic_slot[k]   int32 (K)   j with doc_topics[j] = k; -1 where n_dk[k] = 0

n_doc_topics is a scalar the caller carries. add_token moves a token in O(1) (a topic that
leaves the support takes the last one into its slot), a sum over the document's topics costs
O(n_doc_topics), and clear_document resets the state in O(n_doc_topics), not O(K). Between
documents n_dk = 0 and topic_slot = -1.

A draw searches running sums of the masses of its items (first_above, the inverse of their
cumulative distribution): the word's share in kernels/gibbs.py, the document part in
kernels/alias_gibbs.py. The scratch for them:

    word_cum[j]     float64 (S)  the running sum of the items' masses
    word_topic[j]   int32 (S)    item j's topic, where the caller does not know it otherwise
    word_coef[j]    float64 (S)  coef[k, w] of that topic

with S = max(1, min(K, the most items a draw can have)): the items are a word's row or the
document's topics, so never more than K.

At the end of a document, finish_document turns the saved sweeps into its statistics. The
assignments are laid out sweep by sweep, z_saved[s * n_tokens + i], the tokens in entry order
(the c tokens of an entry (word w, count c) are contiguous), and for each entry and topic k

    count[w, k] = #{(token i of the entry, saved sweep s): z_i^(s) = k}

is written as a (word, topic, count) pair, so that Nhat[k, w] = count / samples. tally (int32,
K, zero between documents) counts one entry's topics, listed in doc_topics (free once the state
is cleared).

One worker holds one set of these arrays for all its documents. The arrays are allocated by
the per-worker functions (compiled with numba's runtime) and lent to the per-document kernels
(kernels/jit.py); the per-token helpers here are inlined into their callers.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def document_scratch(n_topics, max_items):
    """One worker's state of the document being sampled, clean (n_dk = 0, topic_slot = -1):
    (n_dk, doc_topics, topic_slot, word_cum, word_topic, word_coef), the running sums sized for
    draws of at most max_items items (module docstring)."""
    scratch = max(1, min(max_items, n_topics))
    return (np.zeros(n_topics, np.int32), np.zeros(n_topics, np.int32), np.full(n_topics, -1, np.int32),
            np.zeros(scratch, np.float64), np.zeros(scratch, np.int32), np.zeros(scratch, np.float64))


@njit(cache=True, inline="always")
def add_token(k, delta, n_dk, doc_topics, topic_slot, n_doc_topics):
    """n_dk[k] += delta (±1), keeping doc_topics[:n] = the topics with n_dk > 0; returns the new n."""
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
def clear_document(n_doc_topics, n_dk, doc_topics, topic_slot):
    """Leave the state clean for the next document: n_dk = 0, topic_slot = -1 (n_dk may hold
    counts or weights)."""
    for j in range(n_doc_topics):
        k = doc_topics[j]
        n_dk[k] = 0
        topic_slot[k] = -1


@njit(cache=True, inline="always")
def first_above(cumulative, lo, hi, target):
    """The smallest j in [lo, hi) with cumulative[j] > target (hi - 1 if rounding says none): the
    item at target in [0, cumulative[hi - 1]) of nondecreasing running sums, by bisection."""
    b = hi - 1
    while lo < b:
        mid = (lo + b) // 2
        if cumulative[mid] > target:
            b = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, inline="always")
def finish_document(entry_words, entry_counts, samples, n_tokens, z_saved, n_doc_topics, n_dk, doc_topics,
                    topic_slot, tally, out_words, out_topics, out_counts):
    """Clean the state (clear_document) and emit the saved assignments z_saved (samples sweeps of
    n_tokens) as (word, topic, count) pairs (module docstring); returns how many pairs were
    written."""
    clear_document(n_doc_topics, n_dk, doc_topics, topic_slot)

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
