"""What runs on a Dask worker for executors/dask.py: reading a shard's documents, the
previous-visit tallies, the local step on the worker's copy of the table (Replica), and a plugin
that compiles the step's kernels when the worker joins. Imported by workers (and by the driver
only when it trains on a cluster)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import dask
import numpy as np
from distributed import WorkerPlugin, get_worker, secede

from ..assignments import chain_starts, previous_stats
from ..cluster import KERNELS
from ..cores import use_threads
from ..frozen import ReusedArrays, TableRows
from ..minibatch import Minibatch
from ..reader import DocumentReader, prepared
from ..stats import SparseStats, StepResult
from ..store import Store
from ..topic_word import TopicWordTable
from .base import StepTask
from .warmup import compile_step

_readers: dict = {}  # per worker process: one reader (and its block cache) per store
_reading = threading.Lock()
NEED_TABLE = "need-table"  # run_shard's answer when this worker's copy of the table is not current


@dataclass
class Replica:
    """This worker's copy of a run's topic-word table (one run at a time): the driver's table
    after `version` global steps."""

    session: str
    version: int
    table: TopicWordTable
    buffers: ReusedArrays


_replica: Replica | None = None


def _reader(store: Store, cache_blocks: int) -> DocumentReader:
    key = store.location
    if key not in _readers:
        _readers.clear()  # one store at a time: the cache stays bounded
        _readers[key] = DocumentReader(store, cache_blocks)
    return _readers[key]


def read_shard(store: Store, doc_numbers: np.ndarray, cache_blocks: int) -> Minibatch:
    """The shard's documents, read while the worker's thread samples the minibatch before: the
    task leaves the worker's thread pool (secede), as the in-process engine reads ahead in a
    thread of its own."""
    secede()
    with _reading:  # one shard read at a time: the block cache is not shared between threads
        return prepared(_reader(store, cache_blocks).read(doc_numbers))


def describe_shard(batch: Minibatch) -> tuple[np.ndarray, int]:
    return batch.distinct_words(), batch.n_tokens


def shard_previous_stats(batch: Minibatch, saved: np.ndarray, unvisited: int, n_topics: int) -> StepResult:
    return previous_stats(batch, saved, unvisited, n_topics)


def run_shard(batch: Minibatch, session: str, version: int, updates: list, own: SparseStats | None,
              task: StepTask, doc_seeds: np.ndarray, table_state: dict | None = None,
              previous: tuple | None = None) -> StepResult | str:
    """The step on one shard with the worker's threads, reading the worker's copy of the table
    at `version` (brought there by `updates`, the last (version, update) pairs, or built from
    `table_state`); NEED_TABLE if it cannot be. `previous`: the shard's (saved topics, unvisited
    mark), for a step that continues its chains. One shard at a time per worker process, as
    numba's thread pool serves one caller at a time (cluster.KERNELS)."""
    with KERNELS:
        table = _table_at(session, version, updates, table_state)
        if table is None:
            return NEED_TABLE
        words = batch.distinct_words()
        if own is None:
            rows = TableRows.from_table(table, words, _replica.buffers)
        else:  # the whole minibatch's statistics come out: they change the topic totals too
            rows = TableRows.from_table(table, np.union1d(words, own.words), _replica.buffers).without(own)
            rows = rows.subset(words)
        n_threads = use_threads(get_worker().state.nthreads)  # numba's thread count is per calling thread
        return task.run(batch, task.freeze(rows), doc_seeds, n_threads,
                        None if previous is None else chain_starts(*previous))


def _table_at(session: str, version: int, updates: list, table_state: dict | None) -> TopicWordTable | None:
    """This worker's copy of the session's table moved on to `version`, or None if the updates
    at hand cannot bring it there."""
    global _replica
    if table_state is not None:
        _replica = Replica(session, version, TopicWordTable.from_state(table_state), ReusedArrays())
    if _replica is None or _replica.session != session:
        return None
    for update_version, (words, topics, values, rho, scale) in updates:
        if update_version == _replica.version + 1:
            _replica.table.update(words, topics, values, rho, scale)
            _replica.version = update_version
    return _replica.table if _replica.version == version else None


class WarmKernels(WorkerPlugin):
    """A worker plugin: compile the run's local step's kernels when a worker joins (and on every
    worker there already), so that no minibatch waits on numba."""

    name = "bigtopics-warm-kernels"

    def __init__(self, step):
        self.step = step

    def setup(self, worker):
        compile_step(self.step)


def pause_fraction() -> float | bool:
    """The fraction of this worker's memory limit at which Dask pauses it (False: never)."""
    return dask.config.get("distributed.worker.memory.pause")
