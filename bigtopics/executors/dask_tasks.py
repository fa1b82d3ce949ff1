"""What runs on a Dask worker for executors/dask.py: reading a shard's documents, the
previous-visit tallies, the local step on the worker's copy of the table (Replica), the exchange
of the shards' statistics in word slices between workers (pieces kept here, served by a handler
that the WorkerSetup plugin installs with the step's compiled kernels). Imported by workers (and
by the driver only when it trains on a cluster)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import dask
import numpy as np
from distributed import WorkerPlugin, get_worker, secede
from distributed.comm import CommClosedError
from distributed.core import send_recv
from distributed.protocol import to_serialize
from distributed.utils import sync

from ..assignments import chain_starts, previous_stats
from ..cluster import KERNELS
from ..cores import use_threads
from ..frozen import ReusedArrays, TableRows
from ..minibatch import Minibatch
from ..reader import DocumentReader, prepared
from ..stats import SparseStats, StepResult, concatenated, merge_results, split_by_words
from ..store import Store
from ..topic_word import TopicWordTable
from .base import StepTask
from .warmup import compile_step

_readers: dict = {}  # per worker process: one reader (and its block cache) per store
_reading = threading.Lock()
NEED_TABLE = "need-table"  # run_shard's answer when this worker's copy of the table is not current
PIECES_HANDLER = "bigtopics_piece"  # the worker's handler serving the pieces of its shards' statistics
# A worker that holds pieces answers at once (its event loop serves them while its thread samples);
# one that does not answer in this time is taken as lost, rather than waiting Dask's connect
# timeout (30 s) on every merge that needs it.
PIECES_CONNECT_SECONDS = 5.0


@dataclass
class Replica:
    """This worker's copy of a run's topic-word table (one run at a time): the driver's table
    after `version` global steps."""

    session: str
    version: int
    table: TopicWordTable
    buffers: ReusedArrays


_replica: Replica | None = None
# this worker's shards' statistics cut into word slices, for the exchange under way:
# (session, exchange, shard index) -> one piece per slice
_pieces: dict[tuple[str, str, int], list[StepResult]] = {}
_pieces_lock = threading.Lock()


@dataclass
class ShardDone:
    """run_shard's answer to the driver: where the shard's pieces wait (the worker's address) and
    what of its result only the driver needs (`rest`: the last sweep, the priors' counts, with no
    statistics); the statistics go between workers (merge_slice)."""

    address: str
    rest: StepResult
    entries: int  # (word, topic) entries of the shard's statistics

    @property
    def nbytes(self) -> int:
        return self.rest.nbytes


class PiecesLost(ConnectionError):
    """A shard's pieces are gone with the worker that held them: the minibatch's step is run again
    (a ConnectionError, which the driver's retries take as a lost worker)."""


@dataclass(frozen=True)
class StoreHandle:
    """What a read task is sent instead of the Store: a worker opens the store from it once per
    run (`key`: the executor's session), not once per task; on object storage opening costs
    about ten requests. A store ingested again under the run shows as a changed fingerprint
    when a worker first opens it."""

    key: str
    state: dict  # Store.__getstate__

    def open(self) -> Store:
        return Store.reopen(self.state)


def _reader(store: StoreHandle, cache_blocks: int) -> DocumentReader:
    if store.key not in _readers:
        _readers.clear()  # one store at a time: the cache stays bounded
        _readers[store.key] = DocumentReader(store.open(), cache_blocks)
    return _readers[store.key]


def read_shard(store: StoreHandle, doc_numbers: np.ndarray, cache_blocks: int) -> Minibatch:
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
              task: StepTask, doc_seeds: np.ndarray, exchange: tuple[str, int, np.ndarray],
              table_state: dict | None = None, previous: tuple | None = None) -> ShardDone | str:
    """The step on one shard with the worker's threads, reading the worker's copy of the table
    at `version` (brought there by `updates`, the last (version, merged slices, rho, scale), or
    built from `table_state`); NEED_TABLE if it cannot be. `previous`: the shard's (saved topics,
    unvisited mark), for a step that continues its chains. The statistics stay here, cut into
    word slices at `exchange`'s bounds, for merge_slice. One shard at a time per worker process,
    as each runs on all the worker's threads (cluster.KERNELS)."""
    result = _run_shard(batch, session, version, updates, own, task, doc_seeds, table_state, previous)
    if isinstance(result, str):
        return result
    name, shard, bounds = exchange
    with _pieces_lock:  # the pieces of an exchange that has ended are no longer asked for
        for key in [key for key in _pieces if key[:2] != (session, name)]:
            del _pieces[key]
        _pieces[session, name, shard] = split_by_words(result, bounds)
    empty = np.zeros(0, np.int64)
    rest = StepResult(empty, empty, np.zeros(0), result.divisor, result.last_sweep, result.prior_counts)
    return ShardDone(get_worker().address, rest, len(result.words))


def merge_slice(session: str, exchange: str, slice_index: int, holders: list[str], n_topics: int) -> StepResult:
    """Slice `slice_index` of the minibatch's statistics: the pieces of its shards (shard i's held
    by the worker at holders[i]) merged in shard order (stats.split_by_words)."""
    worker = get_worker()

    async def fetch(shard: int, address: str) -> StepResult:
        if address == worker.address:
            return _piece(session, exchange, shard, slice_index)
        try:
            comm = await worker.rpc.connect(address, timeout=PIECES_CONNECT_SECONDS)
            try:
                answer = await send_recv(comm, op=PIECES_HANDLER, session=session, exchange=exchange, shard=shard,
                                         slice_index=slice_index)
            finally:
                worker.rpc.reuse(address, comm)
        except (OSError, CommClosedError) as error:
            raise PiecesLost(f"the statistics of shard {shard} were lost with worker {address}: {error}") from error
        if answer.get("piece") is None:
            raise PiecesLost(f"worker {address} no longer holds the statistics of shard {shard}")
        return answer["piece"]

    async def fetch_all() -> list[StepResult]:
        return await asyncio.gather(*(fetch(shard, address) for shard, address in enumerate(holders)))

    pieces = sync(worker.loop, fetch_all)
    return merge_results(pieces, n_topics) if len(pieces) > 1 else pieces[0]


def _held(session: str, exchange: str, shard: int) -> list[StepResult] | None:
    """The pieces of a shard this worker holds for an exchange, or None."""
    with _pieces_lock:
        return _pieces.get((session, exchange, shard))


def _piece(session: str, exchange: str, shard: int, slice_index: int) -> StepResult:
    pieces = _held(session, exchange, shard)
    if pieces is None:
        raise PiecesLost(f"this worker no longer holds the statistics of shard {shard}")
    return pieces[slice_index]


def serve_piece(session: str, exchange: str, shard: int, slice_index: int) -> dict:
    """The worker's handler (PIECES_HANDLER): one piece of one of its shards, or None."""
    pieces = _held(session, exchange, shard)
    return {"status": "OK", "piece": None if pieces is None else to_serialize(pieces[slice_index])}


def _run_shard(batch, session, version, updates, own, task, doc_seeds, table_state, previous) -> StepResult | str:
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
        n_threads = use_threads(get_worker().state.nthreads)  # the thread count is per calling thread
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
    for update_version, slices, rho, scale in updates:
        if update_version == _replica.version + 1:
            stats = concatenated(slices).stats()
            _replica.table.update(stats.words, stats.topics, stats.values, rho, scale)
            _replica.version = update_version
    return _replica.table if _replica.version == version else None


class WorkerSetup(WorkerPlugin):
    """A worker plugin, set up when a worker joins (and on every worker there already): install the
    handler that serves the exchange's pieces, and compile the run's local step's kernels, so
    that no minibatch waits on numba."""

    name = "bigtopics-worker-setup"

    def __init__(self, step):
        self.step = step

    def setup(self, worker):
        worker.handlers[PIECES_HANDLER] = serve_piece
        compile_step(self.step)


def pause_fraction() -> float | bool:
    """The fraction of this worker's memory limit at which Dask pauses it (False: never)."""
    return dask.config.get("distributed.worker.memory.pause")
