"""A minibatch: some documents of a store, by number, with their rows (global word ids)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .kernels.rng import stream_seeds


@dataclass
class Minibatch:
    """Documents of one minibatch: global document numbers and their rows (global word ids)."""

    doc_numbers: np.ndarray  # int64 (n_docs,), position of each document in the store
    indptr: np.ndarray  # int64 (n_docs + 1,)
    words: np.ndarray  # word ids of the entries
    counts: np.ndarray  # counts of the entries
    # computed on first use (token_starts, distinct_words): several steps of a minibatch ask
    _token_starts: np.ndarray | None = field(default=None, repr=False, compare=False)
    _distinct_words: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def n_docs(self) -> int:
        return len(self.doc_numbers)

    @property
    def n_tokens(self) -> int:
        return int(self.counts.sum(dtype=np.int64))

    def token_starts(self) -> np.ndarray:
        """Where each document's tokens start in the batch's token order (entries' words
        repeated by their counts), int64 (n_docs + 1,); computed once."""
        if self._token_starts is None:
            entry_tokens = np.concatenate([[0], np.cumsum(self.counts, dtype=np.int64)])
            self._token_starts = entry_tokens[self.indptr]
        return self._token_starts

    def distinct_words(self) -> np.ndarray:
        """The batch's word ids, each once, ascending (O(entries + largest id), no sort; computed once)."""
        if self._distinct_words is None:
            self._distinct_words = (np.flatnonzero(np.bincount(self.words)).astype(np.int64) if len(self.words)
                                    else np.zeros(0, np.int64))
        return self._distinct_words

    def slice(self, lo: int, hi: int) -> "Minibatch":
        """Documents [lo, hi) of the batch."""
        a, b = self.indptr[lo], self.indptr[hi]
        return Minibatch(self.doc_numbers[lo:hi], self.indptr[lo: hi + 1] - a, self.words[a:b], self.counts[a:b])

    def doc_seeds(self, seed: int, epoch: int) -> np.ndarray:
        """One random stream per document, fixed by (seed, epoch, document number)."""
        return stream_seeds(np.uint64(seed), np.uint64(epoch), self.doc_numbers.astype(np.uint64))


def gather_rows(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, rows: np.ndarray):
    """The CSR rows `rows` of (indptr, indices, data), in that order."""
    lengths = indptr[rows + 1] - indptr[rows]
    new_indptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=new_indptr[1:])
    source = np.repeat(indptr[rows] - new_indptr[:-1], lengths) + np.arange(new_indptr[-1])
    return new_indptr, indices[source], data[source]
