"""Reading the documents a plan names, and reading ahead of the sampler.

A store is read a block (indptr chunk) at a time, since a chunk is decompressed whole. The
documents of a minibatch come from the few blocks of its window (plan.py), so `DocumentReader`
keeps the most recently used blocks decoded, at most `cache_blocks` of them: over an epoch each
block is decompressed about once, whether one process reads every minibatch or each worker of a
cluster reads the shards it is given.
"""

from __future__ import annotations

import queue
import threading
from collections import OrderedDict
from typing import Iterator

import numpy as np

from .kernels import pieces
from .minibatch import Minibatch
from .store import CSRBlock, Store


class DocumentReader:
    """Documents of a store by number, through a small cache of decoded blocks."""

    def __init__(self, store: Store, cache_blocks: int = 16):
        self.store = store
        self.cache_blocks = max(1, int(cache_blocks))
        self._blocks: OrderedDict[int, CSRBlock] = OrderedDict()

    def _block(self, b: int) -> CSRBlock:
        block = self._blocks.pop(b, None)
        if block is None:
            step = self.store.docs_per_block
            block = self.store.read_docs(b * step, (b + 1) * step)
        self._blocks[b] = block
        while len(self._blocks) > self.cache_blocks:
            self._blocks.popitem(last=False)
        return block

    def read(self, doc_numbers: np.ndarray) -> Minibatch:
        """The given documents, in the given order, as one minibatch (words and counts keep the
        store's dtypes)."""
        doc_numbers = np.asarray(doc_numbers, np.int64)
        step = self.store.docs_per_block
        block_of = doc_numbers // step
        blocks = {int(b): self._block(int(b)) for b in np.unique(block_of)}  # held until the batch is built
        row = doc_numbers - block_of * step
        lengths = np.zeros(len(doc_numbers), np.int64)
        for b, block in blocks.items():
            mine = block_of == b
            lengths[mine] = block.indptr[row[mine] + 1] - block.indptr[row[mine]]
        indptr = np.zeros(len(doc_numbers) + 1, np.int64)
        np.cumsum(lengths, out=indptr[1:])
        some = next(iter(blocks.values()), None)
        words = np.empty(indptr[-1], some.indices.dtype if some is not None else np.int64)
        counts = np.empty(indptr[-1], some.data.dtype if some is not None else np.int64)
        for b, block in blocks.items():
            mine = np.flatnonzero(block_of == b)
            n = lengths[mine]
            target = np.repeat(indptr[mine], n) + _ranks(n)
            source = np.repeat(block.indptr[row[mine]], n) + _ranks(n)
            words[target] = block.indices[source]
            counts[target] = block.data[source]
        return Minibatch(doc_numbers, indptr, words, counts)


def _ranks(lengths: np.ndarray) -> np.ndarray:
    """0, 1, ..., n_i - 1 for each length n_i, concatenated."""
    total = int(lengths.sum())
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(total) - starts


def read_documents(store: Store, doc_numbers: np.ndarray) -> Minibatch:
    """The given documents as one minibatch, reading each block that holds any of them once."""
    return DocumentReader(store, cache_blocks=1).read(doc_numbers)


def block_minibatch(block: CSRBlock) -> Minibatch:
    """A store block's documents as a minibatch (document numbers from the block's start)."""
    return Minibatch(np.arange(block.start, block.start + block.n_docs, dtype=np.int64), block.indptr,
                     np.asarray(block.indices, np.int64), np.asarray(block.data, np.int64))


def prepared(batch: Minibatch) -> Minibatch:
    """The batch with what every training step asks of it already computed, here in the
    read-ahead thread rather than between the sampler's parallel sections."""
    batch.token_starts()
    batch.distinct_words()
    return batch


def read_ahead(items: Iterator, depth: int = 2) -> Iterator:
    """Iterate `items` produced by a background thread, up to `depth` ahead of the consumer.

    The producer runs its kernels on its own thread only (kernels/pieces.py): it works beside
    the consumer's parallel phases, and a helper that took one of its pieces would hold up the
    consumer's phase until that piece ended. (It keeps the process's priority: at nice 19 it
    measured no faster on an otherwise idle machine, and beside busy processes in the same
    session it would wait for them whenever the consumer waits for it.)"""
    buffer: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def produce():
        pieces.set_threads(1)
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
