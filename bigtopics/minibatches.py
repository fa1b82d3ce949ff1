"""Minibatches streamed out of a store in a random order that changes every epoch.

Bounded memory: the order is a random permutation of the store's blocks (indptr chunks); blocks
are read a window at a time, the window's documents are shuffled, and minibatches are cut from
the shuffled stream (documents left over at the end of a window open the next one). Everything is
fixed by (seed, epoch), and which documents go into which minibatch depends only on the block
sizes, so a resumed run can skip minibatches without reading them.
A background thread reads and decompresses ahead so the sampler never waits on I/O.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .local_step import Minibatch
from .store import Store

_WINDOW_PURPOSE = 1
_BLOCK_PURPOSE = 2


def _rng(seed: int, epoch: int, purpose: int, index: int = 0) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch, purpose, index])))


def gather_rows(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, rows: np.ndarray):
    """The CSR rows `rows` of (indptr, indices, data), in that order."""
    lengths = indptr[rows + 1] - indptr[rows]
    new_indptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=new_indptr[1:])
    source = np.repeat(indptr[rows] - new_indptr[:-1], lengths) + np.arange(new_indptr[-1])
    return new_indptr, indices[source], data[source]


@dataclass
class MinibatchStream:
    """Cuts a store into shuffled minibatches.

    `exclude` holds document numbers that training must never see (held-out documents);
    `windows_blocks` is how many blocks are shuffled together.
    """

    store: Store
    batch_size: int
    seed: int
    window_blocks: int = 16
    exclude: np.ndarray | None = None

    @property
    def n_training_docs(self) -> int:
        return self.store.n_docs - (0 if self.exclude is None else len(self.exclude))

    def batches_per_epoch(self) -> int:
        return -(-self.n_training_docs // self.batch_size)

    def epoch(self, epoch: int, skip: int = 0) -> Iterator[Minibatch]:
        """The minibatches of one epoch, from the `skip`-th on."""
        step = self.store.docs_per_block
        starts = np.arange(0, self.store.n_docs, step)
        order = _rng(self.seed, epoch, _BLOCK_PURPOSE).permutation(len(starts))
        carry: Minibatch | None = None
        emitted = 0
        for w, lo in enumerate(range(0, len(order), self.window_blocks)):
            blocks = starts[order[lo : lo + self.window_blocks]]
            doc_numbers = np.concatenate([np.arange(b, min(b + step, self.store.n_docs)) for b in blocks])
            keep = None
            if self.exclude is not None and len(self.exclude):
                keep = ~np.isin(doc_numbers, self.exclude)
                doc_numbers = doc_numbers[keep]
            permutation = _rng(self.seed, epoch, _WINDOW_PURPOSE, w).permutation(len(doc_numbers))
            n_available = len(doc_numbers) + (carry.n_docs if carry is not None else 0)
            n_full = n_available // self.batch_size
            leftover = n_available - n_full * self.batch_size
            # a window is not read when every minibatch it feeds (including the one its
            # leftover documents open) is skipped
            if emitted + n_full + (1 if leftover else 0) <= skip:
                emitted += n_full
                carry = _unread(leftover)
                continue
            window = self._read_window(blocks, step, keep)
            window_docs = Minibatch(doc_numbers[permutation], *gather_rows(*window, permutation))
            if carry is not None and carry.n_docs:
                window_docs = _concat(carry, window_docs)
            for i in range(n_full):
                if emitted >= skip:
                    yield _prepared(_slice(window_docs, i * self.batch_size, (i + 1) * self.batch_size))
                emitted += 1
            carry = _slice(window_docs, n_full * self.batch_size, window_docs.n_docs)
        if carry is not None and carry.n_docs and emitted >= skip:
            yield _prepared(carry)

    def _read_window(self, blocks, step, keep):
        parts = [self.store.read_docs(b, b + step) for b in blocks]
        offsets = np.cumsum([0] + [len(p.indices) for p in parts])
        indptr = np.concatenate([[0]] + [p.indptr[1:] + o for p, o in zip(parts, offsets)])
        indices = np.concatenate([p.indices for p in parts])
        data = np.concatenate([p.data for p in parts])
        if keep is not None:
            indptr, indices, data = gather_rows(indptr, indices, data, np.nonzero(keep)[0])
        return indptr, indices, data


def read_documents(store: Store, doc_numbers: np.ndarray) -> Minibatch:
    """The given documents (ascending document numbers) as one minibatch, reading each block
    that holds any of them once."""
    doc_numbers = np.asarray(doc_numbers, np.int64)
    step = store.docs_per_block
    blocks = doc_numbers // step
    bounds = np.concatenate([np.flatnonzero(np.diff(blocks, prepend=-1)), [len(blocks)]])
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        block = blocks[lo]
        rows = store.read_docs(block * step, (block + 1) * step)
        parts.append(gather_rows(rows.indptr, rows.indices, rows.data, doc_numbers[lo:hi] - block * step))
    offsets = np.cumsum([0] + [len(p[1]) for p in parts])
    indptr = np.concatenate([[0]] + [p[0][1:] + o for p, o in zip(parts, offsets)]).astype(np.int64)
    words = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    counts = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64)
    return Minibatch(doc_numbers, indptr, words, counts)


def _prepared(batch: Minibatch) -> Minibatch:
    """The batch with what every training step asks of it already computed, here in the
    read-ahead thread rather than between the sampler's parallel sections."""
    batch.token_starts()
    batch.distinct_words()
    return batch


def _unread(n_docs: int) -> Minibatch:
    """Stand-in for documents of an unread window; they only ever fall in skipped minibatches."""
    return Minibatch(np.full(n_docs, -1, np.int64), np.zeros(n_docs + 1, np.int64),
                     np.zeros(0, np.int64), np.zeros(0, np.int64))


def _slice(batch: Minibatch, lo: int, hi: int) -> Minibatch:
    a, b = batch.indptr[lo], batch.indptr[hi]
    return Minibatch(batch.doc_numbers[lo:hi], batch.indptr[lo : hi + 1] - a, batch.words[a:b], batch.counts[a:b])


def _concat(first: Minibatch, second: Minibatch) -> Minibatch:
    return Minibatch(
        np.concatenate([first.doc_numbers, second.doc_numbers]),
        np.concatenate([first.indptr, second.indptr[1:] + first.indptr[-1]]),
        np.concatenate([first.words, second.words]),
        np.concatenate([first.counts, second.counts]),
    )


def read_ahead(items: Iterator, depth: int = 2) -> Iterator:
    """Iterate `items` produced by a background thread, up to `depth` ahead of the consumer."""
    buffer: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def produce():
        try:
            for item in items:
                if stop.is_set():
                    return
                buffer.put(item)
            buffer.put(done)
        except BaseException as e:  # re-raised in the consumer
            buffer.put(e)

    thread = threading.Thread(target=produce, daemon=True, name="bigtopics-read-ahead")
    thread.start()
    try:
        while True:
            item = buffer.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting on a full buffer
            try:
                buffer.get_nowait()
            except queue.Empty:
                thread.join(timeout=0.05)
