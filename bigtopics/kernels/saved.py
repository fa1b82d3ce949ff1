"""Saved assignments (assignments.py): the last saved sweep of each document, kept per store document."""

from __future__ import annotations

import numpy as np
from numba import njit

from . import pieces
from .doc_state import finish_document
from .ranges import even_ranges


@njit(cache=True, nogil=True)
def _tally_range(first, last, doc_indptr, entry_words, entry_counts, token_starts, saved, saved_starts, unvisited,
                 n_topics, out_words, out_topics, out_counts, out_n_pairs):
    """Documents first..last - 1 of saved_tallies, with one set of scratch."""
    n_dk = np.zeros(n_topics, np.int32)
    topic_slot = np.full(n_topics, -1, np.int32)
    tally = np.zeros(n_topics, np.int32)
    doc_topics = np.zeros(n_topics, np.int32)
    for d in range(first, last):
        n_tokens = token_starts[d + 1] - token_starts[d]
        start = saved_starts[d]
        if n_tokens == 0 or saved[start] == unvisited:
            out_n_pairs[d] = 0
            continue
        lo, hi = doc_indptr[d], doc_indptr[d + 1]
        base, top = token_starts[d], token_starts[d + 1]
        out_n_pairs[d] = finish_document(entry_words[lo:hi], entry_counts[lo:hi], 1, n_tokens,
                                         saved[start:start + n_tokens], 0, n_dk, doc_topics, topic_slot, tally,
                                         out_words[base:top], out_topics[base:top], out_counts[base:top])


def saved_tallies(doc_indptr, entry_words, entry_counts, token_starts, saved, saved_starts, unvisited, n_topics,
                  out_words, out_topics, out_counts, out_n_pairs):
    """Document d's saved topics saved[saved_starts[d]:][:n_d] (one per token) as (word, topic,
    count) pairs at offset token_starts[d] of out_*, as the sampler emits them for one saved
    sweep (kernels/doc_state.py finish_document); a document whose first slot is `unvisited` has none.
    Pieces of documents of about equal tokens for the threads (kernels/pieces.py)."""
    bounds = even_ranges(token_starts, pieces.piece_count(pieces.threads()))
    pieces.run_ranges(_tally_range, bounds, doc_indptr, entry_words, entry_counts, token_starts, saved, saved_starts,
                      unvisited, n_topics, out_words, out_topics, out_counts, out_n_pairs)


@njit(cache=True, nogil=True)
def _store_range(first, last, assignments, token_starts, samples, saved, saved_starts):
    """Documents first..last - 1 of store_last_sweep."""
    for d in range(first, last):
        n = token_starts[d + 1] - token_starts[d]
        last_sweep = token_starts[d] * samples + (samples - 1) * n
        for j in range(n):
            saved[saved_starts[d] + j] = assignments[last_sweep + j]


def store_last_sweep(assignments, token_starts, samples, saved, saved_starts):
    """Copy each document's last sweep from the sampler's layout (`samples` sweeps of its tokens,
    sweep by sweep, from offset token_starts[d] * samples) to its place saved_starts[d] in
    `saved`; pieces of documents for the threads (kernels/pieces.py)."""
    bounds = even_ranges(token_starts, pieces.piece_count(pieces.threads()))
    pieces.run_ranges(_store_range, bounds, assignments, token_starts, samples, saved, saved_starts)


@njit(cache=True)
def load_saved(saved, saved_starts, token_starts, out):
    """Each document's saved topics saved[saved_starts[d]:][:n_d] to out[token_starts[d]:
    token_starts[d + 1]] (store_last_sweep's inverse for one sweep). Serial: a leaf kernel is
    compiled once (cache) rather than in every run, and threads would save under a millisecond."""
    for d in range(token_starts.shape[0] - 1):
        for j in range(token_starts[d + 1] - token_starts[d]):
            out[token_starts[d] + j] = saved[saved_starts[d] + j]
