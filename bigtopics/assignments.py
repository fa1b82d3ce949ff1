"""Each document's topic assignments from its latest visit, kept on disk for `exclude_own`.

With exclude_own the trainer samples a minibatch against the topics without the statistics its
own documents added on their previous visit: N^(-B) = max(N - sum_{d in B} Nhat_d, 0), as a
collapsed Gibbs sampler draws a document against the counts of all the others. Otherwise a
document revisited over many epochs is drawn towards the topics it already had, and the estimate
settles short of the collapsed sampler's (benchmarks/RESULTS.md, "Leaving a minibatch's own
statistics out"). Nhat_d averaged the visit's `samples` saved sweeps; its last sweep stands for
it here (the counts of one draw instead of the average of several: the same held-out scores on
Reuters at K = 100 and 1000, for a quarter of the disk and memory of keeping every sweep). This
file keeps that sweep: one topic of 2 bytes (4 beyond 65,534 topics) per corpus token,
memory-mapped, in the order of the store's documents. It grows with the corpus, so the option is
for corpora trained over several epochs; one epoch gains nothing from it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .frozen import local_ids
from .kernels.saved import load_saved, saved_tallies, store_last_sweep
from .kernels.sparse_stats import merge_pairs
from .minibatch import Minibatch
from .stats import StepResult
from .store import Store
from .topic_word import _ArrayFiles


def topic_dtype(n_topics: int) -> np.dtype:
    """The smallest unsigned type holding topic ids and one more value, the "not yet visited" mark."""
    return np.dtype(np.uint16 if n_topics < np.iinfo(np.uint16).max else np.uint32)


def assignment_bytes(store: Store, n_topics: int) -> int:
    """Disk the saved assignments of `store` take (for the up-front resource check)."""
    return store.n_tokens * topic_dtype(n_topics).itemsize + (store.n_docs + 1) * 8


class SavedAssignments:
    """The saved topics of every document of a store (see the module docstring).

    `topics_of(doc_numbers)` gives the documents' saved topics, from which `previous_stats`
    computes the statistics they added on their previous visit; `record(doc_numbers, last_sweep)`
    replaces them with this visit's. `state()` / the `saved` argument carry them through checkpoints.
    """

    def __init__(self, store: Store, n_topics: int, directory: str | Path, saved: np.ndarray | None = None):
        self.n_topics = int(n_topics)
        self.dtype = topic_dtype(n_topics)
        self.unvisited = np.iinfo(self.dtype).max
        files = _ArrayFiles(directory, what="the saved assignments")
        self._files = files
        self.token_offsets = files.new("token_offsets", np.int64, store.n_docs + 1)
        for block in store.iter_blocks():
            stop = block.start + block.n_docs
            self.token_offsets[block.start + 1: stop + 1] = (self.token_offsets[block.start]
                                                             + np.cumsum(block.doc_lengths))
        n_tokens = int(self.token_offsets[-1])
        if saved is not None and (saved.dtype != self.dtype or len(saved) != n_tokens):
            raise ValueError(f"saved assignments of {len(saved)} {saved.dtype} do not fit this store and settings "
                             f"({n_tokens} {self.dtype})")
        self.topics = files.new("topics", self.dtype, n_tokens, saved)
        if saved is None:
            self.topics[:] = self.unvisited

    def topics_of(self, doc_numbers: np.ndarray) -> np.ndarray:
        """The saved topics of the given documents, one after another (unvisited where none)."""
        offsets, token_starts = self._layout(doc_numbers)
        out = np.empty(int(token_starts[-1]), self.dtype)
        load_saved(self.topics, offsets, token_starts, out)
        return out

    def record(self, doc_numbers: np.ndarray, last_sweep: np.ndarray) -> None:
        """Keep each document's topics of this visit's last sweep (StepResult.last_sweep, the
        documents' tokens one after another)."""
        offsets, token_starts = self._layout(doc_numbers)
        store_last_sweep(last_sweep, token_starts, 1, self.topics, offsets)

    def _layout(self, doc_numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(where each document's saved topics start in the file, where they start one document
        after another in the given order: n_docs + 1 of them)."""
        offsets = self.token_offsets[doc_numbers]
        token_starts = np.zeros(len(offsets) + 1, np.int64)
        np.cumsum(self.token_offsets[np.asarray(doc_numbers) + 1] - offsets, out=token_starts[1:])
        return offsets, token_starts

    def state(self) -> dict[str, np.ndarray]:
        return {"saved_assignments": self.topics}

    def close(self) -> None:
        self._files.close()


def chain_starts(topics: np.ndarray, unvisited: int) -> np.ndarray:
    """Saved topics (SavedAssignments.topics_of) as a local step starts its chains from them:
    int32, -1 for the tokens of a document not visited yet."""
    starts = topics.astype(np.int32)
    starts[topics == unvisited] = -1
    return starts


def previous_stats(batch: Minibatch, saved: np.ndarray, unvisited: int, n_topics: int) -> StepResult:
    """The statistics the batch's documents added on their previous visit, as the counts of its
    last saved sweep per (word id, topic), each pair once (kernels/sparse_stats.py), given their
    saved topics one document after another (SavedAssignments.topics_of); none for a document
    not visited yet. A pure function of its arguments, so a worker holding the documents can
    compute it."""
    token_starts = batch.token_starts()
    total = int(token_starts[-1])
    words = batch.distinct_words()
    out_words, out_topics, out_counts = (np.empty(total, np.int32) for _ in range(3))
    out_n_pairs = np.zeros(batch.n_docs, np.int64)
    saved_tallies(batch.indptr, local_ids(words, batch.words), np.asarray(batch.counts, np.int32), token_starts,
                  saved, token_starts[:-1], unvisited, n_topics, out_words, out_topics, out_counts, out_n_pairs)
    local, topics, counts = merge_pairs(out_words, out_topics, out_counts, token_starts[:-1], out_n_pairs,
                                        len(words), n_topics)
    return StepResult(words[local], topics, counts.astype(np.float64))
