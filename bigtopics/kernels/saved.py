"""Saved assignments (assignments.py): each document's `samples` saved sweeps, kept per store document."""

from __future__ import annotations

import numpy as np
from numba import njit

from .gibbs import finish_document


@njit(cache=True)
def saved_tallies(doc_indptr, entry_words, entry_counts, token_starts, saved, saved_starts, unvisited, samples,
                  n_topics, out_words, out_topics, out_counts, out_n_pairs):
    """Document d's saved topics saved[saved_starts[d]:][:samples * n_d] (sweep by sweep) as
    (word, topic, count) pairs at offset token_starts[d] * samples of out_*, as the sampler emits
    them (kernels/gibbs.py finish_document); a document whose first slot is `unvisited` has none."""
    n_dk = np.zeros(n_topics, np.int32)
    topic_slot = np.full(n_topics, -1, np.int32)
    tally = np.zeros(n_topics, np.int32)
    doc_topics = np.zeros(n_topics, np.int32)
    for d in range(doc_indptr.shape[0] - 1):
        n_tokens = token_starts[d + 1] - token_starts[d]
        start = saved_starts[d]
        if n_tokens == 0 or saved[start] == unvisited:
            out_n_pairs[d] = 0
            continue
        lo, hi = doc_indptr[d], doc_indptr[d + 1]
        base, top = token_starts[d] * samples, token_starts[d + 1] * samples
        out_n_pairs[d] = finish_document(entry_words[lo:hi], entry_counts[lo:hi], samples, n_tokens,
                                         saved[start:start + n_tokens * samples], 0, n_dk, doc_topics, topic_slot,
                                         tally, out_words[base:top], out_topics[base:top], out_counts[base:top])


@njit(cache=True)
def store_saved(assignments, token_starts, saved, saved_starts, samples):
    """Copy each document's saved topics from the minibatch layout (offset token_starts[d] *
    samples) to its place saved_starts[d] in `saved`."""
    for d in range(token_starts.shape[0] - 1):
        n = (token_starts[d + 1] - token_starts[d]) * samples
        base = token_starts[d] * samples
        for j in range(n):
            saved[saved_starts[d] + j] = assignments[base + j]
