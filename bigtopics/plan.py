"""Which documents go into which minibatch: a plan fixed by (seed, epoch), made without reading.

Bounded memory: the order is a random permutation of the store's blocks (indptr chunks); blocks
are taken a window at a time, the window's documents are shuffled, and minibatches are cut from
the shuffled stream (documents left over at the end of a window open the next one). The plan
depends only on the number of documents, the block size, the batch size, the window, the seed
and the documents held out, so a resumed run skips minibatches without reading them and a
remote worker reads just the documents its plan names (reader.py).

A minibatch's documents are split into shards of `shard_docs` consecutive documents for
executors that spread one minibatch over several workers (executors/); 0 means one shard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .kernels.rng import stream_seeds

_WINDOW_PURPOSE = 1
_BLOCK_PURPOSE = 2


def _rng(seed: int, epoch: int, purpose: int, index: int = 0) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch, purpose, index])))


@dataclass(frozen=True)
class MinibatchPlan:
    """One minibatch: its place in the run and its documents, in the order they are sampled."""

    epoch: int
    index: int  # minibatch number within the epoch
    doc_numbers: np.ndarray  # int64

    @property
    def n_docs(self) -> int:
        return len(self.doc_numbers)

    def doc_seeds(self, seed: int) -> np.ndarray:
        """One random stream per document, fixed by (seed, epoch, document number)."""
        return stream_seeds(np.uint64(seed), np.uint64(self.epoch), self.doc_numbers.astype(np.uint64))

    def shards(self, shard_docs: int) -> list[tuple[int, int]]:
        """[lo, hi) ranges of the plan's documents, `shard_docs` each (0: one shard)."""
        step = shard_docs if shard_docs > 0 else max(self.n_docs, 1)
        return [(lo, min(lo + step, self.n_docs)) for lo in range(0, self.n_docs, step)]


@dataclass(frozen=True)
class EpochPlan:
    """Cuts a store's documents into shuffled minibatches, epoch by epoch.

    `exclude` holds document numbers that training must never see (held-out documents);
    `window_blocks` is how many blocks are shuffled together.
    """

    n_docs: int
    docs_per_block: int
    batch_size: int
    seed: int
    window_blocks: int = 16
    exclude: np.ndarray | None = None

    @property
    def n_training_docs(self) -> int:
        return self.n_docs - (0 if self.exclude is None else len(self.exclude))

    def batches_per_epoch(self) -> int:
        return -(-self.n_training_docs // self.batch_size)

    def epoch(self, epoch: int, skip: int = 0) -> Iterator[MinibatchPlan]:
        """The minibatches of one epoch, from the `skip`-th on."""
        step = self.docs_per_block
        starts = np.arange(0, self.n_docs, step)
        order = _rng(self.seed, epoch, _BLOCK_PURPOSE).permutation(len(starts))
        carry = np.zeros(0, np.int64)
        index = 0
        for w, lo in enumerate(range(0, len(order), self.window_blocks)):
            blocks = starts[order[lo: lo + self.window_blocks]]
            doc_numbers = np.concatenate([np.arange(b, min(b + step, self.n_docs)) for b in blocks])
            if self.exclude is not None and len(self.exclude):
                doc_numbers = doc_numbers[~np.isin(doc_numbers, self.exclude)]
            permutation = _rng(self.seed, epoch, _WINDOW_PURPOSE, w).permutation(len(doc_numbers))
            stream = np.concatenate([carry, doc_numbers[permutation]]).astype(np.int64)
            n_full = len(stream) // self.batch_size
            for i in range(n_full):
                if index >= skip:
                    yield MinibatchPlan(epoch, index, stream[i * self.batch_size: (i + 1) * self.batch_size])
                index += 1
            carry = stream[n_full * self.batch_size:]
        if len(carry) and index >= skip:
            yield MinibatchPlan(epoch, index, carry)
