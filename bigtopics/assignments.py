"""Each document's topic assignments from its latest visit, kept on disk for `exclude_own`.

With exclude_own the trainer samples a minibatch against the topics without the statistics its
own documents added on their previous visit: N^(-B) = max(N - sum_{d in B} Nhat_d, 0), as a
collapsed Gibbs sampler draws a document against the counts of all the others. Otherwise a
document revisited over many epochs is drawn towards the topics it already had, and the estimate
settles short of the collapsed sampler's (benchmarks/RESULTS.md, "Leaving a minibatch's own
statistics out"). Nhat_d is rebuilt from the `samples` saved sweeps of d's tokens, which this
file keeps: samples x (corpus tokens) topics of 2 bytes (4 beyond 65,535 topics), memory-mapped,
in the order of the store's documents. It grows with the corpus, so the option is for corpora
trained over several epochs; one epoch gains nothing from it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .kernels.saved import saved_tallies, store_saved
from .local_step import DocumentTallies, Minibatch
from .store import Store
from .topic_word import _ArrayFiles


def topic_dtype(n_topics: int) -> np.dtype:
    """The smallest unsigned type holding topic ids and one more value, the "not yet visited" mark."""
    return np.dtype(np.uint16 if n_topics < np.iinfo(np.uint16).max else np.uint32)


def assignment_bytes(store: Store, n_topics: int, samples: int) -> int:
    """Disk the saved assignments of `store` take (for the up-front resource check)."""
    return store.n_tokens * samples * topic_dtype(n_topics).itemsize + (store.n_docs + 1) * 8


class SavedAssignments:
    """The saved topics of every document of a store (see the module docstring).

    `previous_tallies(batch)` gives the statistics the batch's documents added on their previous
    visit (none for a document not seen yet); `record(batch, assignments)` replaces them with
    this visit's. `state()` / the `saved` argument carry them through checkpoints.
    """

    def __init__(self, store: Store, n_topics: int, samples: int, directory: str | Path,
                 saved: np.ndarray | None = None):
        self.n_topics = int(n_topics)
        self.samples = int(samples)
        self.dtype = topic_dtype(n_topics)
        self.unvisited = np.iinfo(self.dtype).max
        files = _ArrayFiles(directory)
        self._files = files
        self.token_offsets = files.new("token_offsets", np.int64, store.n_docs + 1)
        for block in store.iter_blocks():
            stop = block.start + block.n_docs
            self.token_offsets[block.start + 1: stop + 1] = (self.token_offsets[block.start]
                                                             + np.cumsum(block.doc_lengths))
        n_slots = int(self.token_offsets[-1]) * self.samples
        if saved is not None and (saved.dtype != self.dtype or len(saved) != n_slots):
            raise ValueError(f"saved assignments of {len(saved)} {saved.dtype} do not fit this store and settings "
                             f"({n_slots} {self.dtype})")
        self.topics = files.new("topics", self.dtype, n_slots, saved)
        if saved is None:
            self.topics[:] = self.unvisited

    def previous_tallies(self, batch: Minibatch) -> DocumentTallies:
        """The batch's documents' statistics Nhat_d from their previous visit, per document as
        the sampler emits them (DocumentTallies, here over word ids); none for a document not
        visited yet."""
        token_starts = batch.token_starts()
        total = int(token_starts[-1]) * self.samples
        out_words, out_topics, out_counts = (np.empty(total, np.int32) for _ in range(3))
        out_n_pairs = np.zeros(batch.n_docs, np.int64)
        saved_tallies(batch.indptr, np.asarray(batch.words, np.int32), np.asarray(batch.counts, np.int32),
                      token_starts, self.topics, self._saved_starts(batch), self.unvisited, self.samples,
                      self.n_topics, out_words, out_topics, out_counts, out_n_pairs)
        return DocumentTallies(out_words, out_topics, out_counts, token_starts[:-1] * self.samples, out_n_pairs,
                               self.samples)

    def record(self, batch: Minibatch, assignments: np.ndarray) -> None:
        """Keep this visit's saved topics of the batch's documents (DocumentTallies.assignments)."""
        store_saved(assignments, batch.token_starts(), self.topics, self._saved_starts(batch), self.samples)

    def _saved_starts(self, batch: Minibatch) -> np.ndarray:
        return self.token_offsets[batch.doc_numbers] * self.samples

    def state(self) -> dict[str, np.ndarray]:
        return {"saved_assignments": self.topics}

    def close(self) -> None:
        self._files.close()
