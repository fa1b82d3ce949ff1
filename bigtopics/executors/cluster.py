"""A Dask cluster as executor: the local step of each minibatch runs on the cluster's workers.

A minibatch's documents are cut into shards (plan.MinibatchPlan.shards); for each shard one
task reads its documents from the store on a worker (the documents stay there, as a Dask
future) and reports back the shard's distinct words and tokens. The step's task runs on the
worker holding the shard and returns the shard's statistics; merged in shard order they are
the minibatch's, bit for bit as in process (stats.merge_results).

Each worker keeps a copy of the topic-word table (dask_worker.Replica) and the driver keeps the
table itself: after each global step the driver sends every worker the update it applied (the
minibatch's merged statistics, rho and the scale: TopicWordTable.update) and the workers apply
it too, so their copies stay the driver's table bit for bit, resets included. A shard's task
names the table version it needs and the last few updates; a worker whose copy is older than
those (one that joined, or a new run on the same cluster) answers NEED_TABLE and is sent the
whole table once. So what goes to the workers per minibatch is the update, which grows with
the statistics' nonzeros, never with K x V, and nothing waits on copying rows out of the table.

A step whose merge is exact (gibbs) gives the same model however a minibatch is cut, so with
shard_docs 0 it is cut into one shard per worker. Any other step's shards are fixed by the
run's settings (`shard_docs`, 0: one shard), never by the cluster's size, since its float sums
depend on the grouping.

Reading the next minibatch's shards is submitted before the current one samples. A task that
fails (a lost worker, a storage hiccup) is retried; a lost worker's documents are read again by
the scheduler from the task that read them.

Whatever the driver asks of the cluster itself (registering the warm-up plugin, scattering,
gathering what it scattered for) goes through `retried`: a worker that dies under the call, or
a scheduler that drops the connection and takes it up again, makes it try again (RETRIES times);
only a scheduler that stops answering (`may_try_again` tells which) ends the run, as ClusterLost.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from concurrent.futures import CancelledError
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..assignments import SavedAssignments
from ..plan import MinibatchPlan
from ..settings import OptionError
from ..stats import SparseStats, StepResult, merge_results
from ..store import Store
from ..topic_word import TopicWordTable
from .base import Executor, StepTask

RETRIES = 3
SCHEDULER_PATIENCE = 60.0  # seconds a scheduler may take to answer again (Dask's client reconnects for 10-30 s)
READ_AHEAD = 2  # minibatches whose reading is submitted ahead of the one sampling
UPDATES_KEPT = 4  # the last global steps a worker's copy of the table can catch up with


def connect(cluster: str | None = None, scheduler: str | None = None):
    """A dask.distributed Client: `cluster` "local:N" starts a LocalCluster of N single-threaded
    worker processes, `scheduler` joins a running cluster at that address."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ImportError("a cluster needs Dask: pip install 'bigtopics[distributed]'") from None
    if cluster is not None and scheduler is not None:
        raise OptionError("give --cluster or --scheduler, not both")
    if cluster is not None:
        kind, _, count = cluster.partition(":")
        if kind != "local" or not count.isdigit() or int(count) < 1:
            raise OptionError(f"--cluster {cluster!r}: give local:N (N worker processes)")
        local = LocalCluster(n_workers=int(count), threads_per_worker=1, processes=True, dashboard_address=None)
        try:
            return Client(local)
        except BaseException:  # (a Ctrl-C while connecting) the worker processes would outlive the command
            local.close()
            raise
    client = Client(scheduler, timeout="10s")  # a running scheduler answers at once
    # the client logs that it gave up on its scheduler: a second line beside ClusterLost's, which says it
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    return client


@contextmanager
def connected(cluster: str | None = None, scheduler: str | None = None):
    """connect()'s Client for the length of a with-block (None without a cluster), then closed
    with the LocalCluster it started."""
    if cluster is None and scheduler is None:
        yield None
        return
    client = connect(cluster, scheduler)
    try:
        yield client
    finally:
        local = client.cluster if cluster is not None else None
        client.close()
        if local is not None:
            local.close()


# -- the driver's side ---------------------------------------------------------------------------
@dataclass
class ClusterWork:
    plan: MinibatchPlan
    shards: list[tuple[int, int]]
    batches: list  # futures of the shards' Minibatch, held on the workers
    summaries: list  # futures of (distinct words, tokens)
    described: list | None = field(default=None)
    previous_topics: list | None = None  # exclude-own: each shard's (saved topics, the unvisited mark)


@dataclass
class ReplicaRows:
    """The rows a minibatch reads, as the executor's `rows` gives them on a cluster: the
    workers' copies of the table at `version`, less `own` (exclude-own) if given."""

    table: TopicWordTable  # the driver's, at `version` until the global step
    version: int
    own: SparseStats | None


class DaskExecutor(Executor):
    """Runs local steps on a dask.distributed cluster (see the module docstring)."""

    def __init__(self, client, store: Store, window_blocks: int = 16, warm: bool = True, owns_client: bool = False):
        from . import dask_worker  # the tasks' functions; importing it needs Dask

        self.on_worker = dask_worker
        self.client = client
        self.store = store
        self.cache_blocks = window_blocks
        self.warm = warm
        self.owns_client = owns_client  # a cluster this executor started (--cluster local:N) ends with it
        # driver_seconds: packing each shard's rows and merging the shards' statistics (the serial
        # part that the cluster adds); wait_seconds: waiting on the workers' results
        self.figures = {"bytes_sent": 0, "bytes_received": 0, "wait_seconds": 0.0, "driver_seconds": 0.0,
                        "minibatches": 0, "minibatches_submitted_again": 0}
        self.outstanding: list = []  # futures submitted and not known to be done
        # the workers' copies of the table: this executor's own (a new run on the same cluster
        # starts afresh), at `version` global steps, with the futures of the last updates
        self.session = uuid.uuid4().hex
        self.version = 0
        self.updates: deque = deque(maxlen=UPDATES_KEPT)
        self.n_workers, self.workers_asked = 0, -1e9

    # which shards, and reading them
    def _shards(self, plan: MinibatchPlan, task: StepTask) -> list[tuple[int, int]]:
        """The plan's shards (see the module docstring)."""
        if task.shard_docs or not task.step.exact_merge:
            return plan.shards(task.shard_docs)
        return plan.shards(-(-plan.n_docs // max(self._workers(), 1)))

    def _workers(self) -> int:
        """The cluster's workers now (asked of the scheduler at most once a second)."""
        if self.client.status == "running" and time.monotonic() - self.workers_asked > 1.0:
            self.n_workers = len(self.client.scheduler_info().get("workers", {}))
            self.workers_asked = time.monotonic()
        return self.n_workers

    def _submit_reads(self, plan: MinibatchPlan, task: StepTask) -> ClusterWork:
        work = ClusterWork(plan, self._shards(plan, task), [], [])
        self._read(work)
        return work

    def _read(self, work: ClusterWork) -> None:
        """Submit the tasks reading the work's shards on the workers (again, if the client had to
        connect to the scheduler again, which cancels every future it held)."""
        submit, worker, plan = self.client.submit, self.on_worker, work.plan
        work.batches = [submit(worker.read_shard, self.store, plan.doc_numbers[lo:hi], self.cache_blocks, pure=False,
                               retries=RETRIES) for lo, hi in work.shards]
        work.summaries = [submit(worker.describe_shard, b, pure=False, retries=RETRIES) for b in work.batches]
        self.outstanding.extend(work.batches + work.summaries)

    def _retried(self, call, work: ClusterWork, before_again=None):
        """retried(call) for a work item, whose shards are read again first if they were forgotten."""
        def again():
            if before_again is not None:
                before_again()
            if any(future.cancelled() for future in work.batches + work.summaries):
                self._read(work)
        return retried(self.client, call, again)

    def warm_up(self, step) -> None:
        """Compile `step`'s kernels on every worker now and on every worker that joins later. A
        worker that dies while it compiles fails the scheduler's broadcast of the plugin (which the
        scheduler keeps for the workers that join): it is registered again, with the workers left."""
        retried(self.client, lambda: self.client.register_plugin(self.on_worker.WarmKernels(step),
                                                                  name="bigtopics-warm-kernels"))
        self.warm = False

    def minibatches(self, plans: Iterator[MinibatchPlan], task: StepTask) -> Iterator[ClusterWork]:
        if self.warm:
            self.warm_up(task.step)
        pending: deque[ClusterWork] = deque()
        plans = iter(plans)
        try:
            while True:
                while len(pending) < READ_AHEAD + 1:
                    plan = next(plans, None)
                    if plan is None:
                        break
                    pending.append(self._submit_reads(plan, task))
                if not pending:
                    return
                yield pending.popleft()
        finally:  # a stopped run: drop what was read ahead, never hiding why it stopped
            if self.client.status == "running":
                with suppress(Exception):
                    for work in pending:
                        self.client.cancel(work.batches + work.summaries)

    def plan_of(self, work: ClusterWork) -> MinibatchPlan:
        return work.plan

    def _described(self, work: ClusterWork) -> list:
        if work.described is None:
            work.described = self._retried(lambda: self._gather(work.summaries), work)
        return work.described

    def words(self, work: ClusterWork) -> np.ndarray:
        return np.unique(np.concatenate([words for words, _ in self._described(work)]))

    def n_tokens(self, work: ClusterWork) -> int:
        return int(sum(tokens for _, tokens in self._described(work)))

    def previous_stats(self, work: ClusterWork, saved: SavedAssignments) -> StepResult:
        work.previous_topics = []
        for lo, hi in work.shards:
            topics = saved.topics_of(work.plan.doc_numbers[lo:hi])
            work.previous_topics.append((topics, saved.unvisited))
            self.figures["bytes_sent"] += topics.nbytes

        def tally():
            return self._gather([self.client.submit(self.on_worker.shard_previous_stats, batch, topics, unvisited,
                                                    saved.n_topics, pure=False, retries=RETRIES)
                                 for batch, (topics, unvisited) in zip(work.batches, work.previous_topics)])
        return merge_results(self._retried(tally, work), saved.n_topics, self.words(work))

    def rows(self, work: ClusterWork, table: TopicWordTable, own: SparseStats | None = None, buffers=None):
        return ReplicaRows(table, self.version, own)

    def run(self, work: ClusterWork, rows: ReplicaRows, task: StepTask) -> StepResult:
        """The step on the minibatch's shards, submitted again if the scheduler forgot data they
        needed: scattered data (the updates, `own`, a whole table) has no task to compute it again,
        so when the only worker holding it dies (Dask's memory manager keeps one copy of what no
        waiting task needs, broadcast or not) the scheduler forgets it and cancels the shards
        waiting on it. The next attempt sends no past updates: a worker whose copy is behind is
        sent the whole table (NEED_TABLE). A scatter to a worker that has died but is still
        listed fails (ScatterFailed), and is tried again the same way (retried); a task's own
        error (a storage error reading a shard) is not."""
        def again():
            self.updates.clear()
            self.figures["minibatches_submitted_again"] += 1
        return self._retried(lambda: self._run_shards(work, rows, task), work, again)

    def _run_shards(self, work: ClusterWork, rows: ReplicaRows, task: StepTask) -> StepResult:
        seeds = work.plan.doc_seeds(task.seed)
        start = time.monotonic()
        own = None
        if rows.own is not None:  # every shard takes the whole minibatch's out (topic totals)
            own = _scattered(self.client.scatter, rows.own, broadcast=True, direct=True, hash=False)
            self.figures["bytes_sent"] += _nbytes(rows.own) * max(self._workers(), 1)
        updates = [(version, _scattered(sending.result)) for version, sending in self.updates]
        shards = list(zip(work.shards, work.batches))
        previous = (work.previous_topics if task.step.continues_chains and work.previous_topics is not None
                    else [None] * len(shards))

        def submit(i, table_state=None):
            (lo, hi), batch = shards[i]
            self.figures["bytes_sent"] += seeds[lo:hi].nbytes + (0 if previous[i] is None else previous[i][0].nbytes)
            return self.client.submit(self.on_worker.run_shard, batch, self.session, rows.version, updates, own,
                                      task, seeds[lo:hi], table_state, previous[i], pure=False, retries=RETRIES)

        futures = [submit(i) for i in range(len(shards))]
        self.figures["driver_seconds"] += time.monotonic() - start
        self.outstanding.extend(futures)
        results = self._gather(futures + ([] if work.described is not None else work.summaries))
        results, work.described = results[:len(futures)], work.described or results[len(futures):]
        need_table = self.on_worker.NEED_TABLE
        behind = [i for i, result in enumerate(results) if isinstance(result, str) and result == need_table]
        if behind:  # workers without a current copy of the table: send them the whole table once
            holders = self.client.who_has([shards[i][1] for i in behind])
            workers = sorted({w for i in behind for w in holders.get(shards[i][1].key, ())})
            # in a list: a dict would be scattered under its own keys ("indptr", ...), the same for every table
            [state] = _scattered(self.client.scatter, [rows.table.state()], workers=workers or None,
                                 broadcast=True, direct=True, hash=False)
            self.figures["tables_sent"] = self.figures.get("tables_sent", 0) + len(behind)
            for i, result in zip(behind, self._gather([submit(i, state) for i in behind])):
                results[i] = result
        self.figures["bytes_received"] += sum(r.nbytes for r in results)
        self.figures["minibatches"] += 1
        self.client.cancel(work.batches + work.summaries)  # the documents are no longer needed
        start = time.monotonic()
        merged = merge_results(results, rows.table.n_topics)
        self.figures["driver_seconds"] += time.monotonic() - start
        return merged

    def global_step(self, table: TopicWordTable, stats: SparseStats, rho: float, scale: float) -> None:
        """The global step here, and its update sent to every worker's copy of the table."""
        table.update(stats.words, stats.topics, stats.values, rho, scale)
        self.version += 1
        update = (stats.words, stats.topics, stats.values, rho, scale)
        # sent while the driver goes on (priors, checkpoints, the next plan); run() waits for it
        sending = self.client.scatter(update, broadcast=True, direct=True, hash=False, asynchronous=True)
        self.updates.append((self.version, asyncio.run_coroutine_threadsafe(sending, self.client.loop.asyncio_loop)))
        self.figures["bytes_sent"] += _nbytes(stats) * max(self._workers(), 1)

    def _gather(self, futures: list) -> list:
        start = time.monotonic()
        results = self.client.gather(futures)
        self.figures["wait_seconds"] += time.monotonic() - start
        return results

    def metrics(self) -> dict:
        self.outstanding = [f for f in self.outstanding if not f.done()]
        n = max(self.figures["minibatches"], 1)
        return {"workers": self._workers(),  # after close(): the count as it was
                "tasks_in_flight": len(self.outstanding),
                "bytes_sent_per_minibatch": self.figures["bytes_sent"] // n,
                "bytes_received_per_minibatch": self.figures["bytes_received"] // n,
                "wait_seconds": round(self.figures["wait_seconds"], 3),
                "minibatches_submitted_again": self.figures["minibatches_submitted_again"]}

    def close(self) -> None:
        cluster = self.client.cluster if self.owns_client else None
        if self.owns_client:
            self.client.close()
        if cluster is not None:
            cluster.close()


def _nbytes(stats: SparseStats) -> int:
    return stats.words.nbytes + stats.topics.nbytes + stats.values.nbytes


def model_parts(client, model, read, parts: list[tuple], compute, *args,
                in_flight: int | None = None) -> Iterator[tuple[int, object]]:
    """(index of the part, its result) for each part, in the order they finish: `read(*part)`
    runs on a worker and gives back (what it read, its distinct words); the driver sends the
    model's rows for those words (infer.ModelRows), and `compute(what it read, rows, *args)` runs
    on the worker that read it. The documents stay on the workers and no part is sent the whole
    model. Parts are independent, so up to `in_flight` (two per worker) run at once. A part
    whose rows were lost with a worker (scattered data cannot be computed again: see
    DaskExecutor.run) is sent its rows again, and one whose futures the client dropped (it
    connected to its scheduler again) is read again, up to RETRIES times (may_try_again)."""
    from distributed import as_completed

    from ..infer import ModelRows
    from . import dask_worker as worker

    in_flight = in_flight or 2 * max(len(client.scheduler_info().get("workers", {})), 1)
    todo = iter(enumerate(parts))
    # future of a part's words -> (index, part, future of what it read, attempts so far); future of
    # its result -> (index, part, future of what it read, its words, attempts so far)
    reading, computing = {}, {}
    pending = as_completed()

    def read_part(index, part, attempt=0) -> None:
        data = client.submit(read, *part, pure=False, retries=RETRIES)
        words = client.submit(worker.second, data, pure=False, retries=RETRIES)
        reading[words] = (index, part, data, attempt)
        pending.add(words)

    def submit_next() -> None:
        index, part = next(todo, (None, None))
        if part is not None:
            read_part(index, part)

    def compute_part(index, part, data, words, attempt) -> None:
        rows = _scatter_until_sent(client, ModelRows.of(model, words))
        done = client.submit(compute, data, rows, *args, pure=False, retries=RETRIES)
        computing[done] = (index, part, data, words, attempt)
        pending.add(done)

    for _ in range(in_flight):
        submit_next()
    for future in pending:
        read_it = future in reading
        index, part, data, *words, attempt = reading.pop(future) if read_it else computing.pop(future)
        try:
            result = future.result()
        except CancelledError as error:  # the part's rows lost with a worker, or the client connected again
            if not may_try_again(client, error, attempt):
                raise
            if read_it or data.cancelled():  # (the client dropped every future it held)
                read_part(index, part, attempt + 1)
            else:
                compute_part(index, part, data, words[0], attempt + 1)
            continue
        if read_it:  # a part's words: send the model's rows for them
            compute_part(index, part, data, result, attempt)
            continue
        yield index, result
        submit_next()


def _scatter_until_sent(client, data):
    """client.scatter(data), tried again when it fails: a worker that died is listed by the
    scheduler until it notices, and a scatter to it fails once the connection times out."""
    return retried(client, lambda: _scattered(client.scatter, data, direct=True, hash=False))


class ScatterFailed(OSError):
    """Data the driver scattered did not reach the workers: one it was sent to had died (an
    OSError, so the CLI reports it in one line when the attempts run out)."""


def _scattered(send, *args, **options):
    """send(*args, **options) (a scatter, or waiting on one), raised as ScatterFailed when a
    worker it was sent to died: an OSError (the dead worker's connection timing out), or the
    scheduler's KeyError for a worker it removed after the data reached it and before the
    scatter told it where the data is (Scheduler.update_data, and replicate for a broadcast,
    look each worker up)."""
    try:
        return send(*args, **options)
    except OSError as error:
        raise ScatterFailed(f"a scatter to the workers failed: {error}") from error
    except KeyError as error:
        raise ScatterFailed(f"a scatter to the workers failed: worker {error} left the cluster") from error


class ClusterLost(OSError):
    """The run cannot go on on its cluster: the scheduler stopped answering, or workers were lost
    under every attempt of one call. An OSError, so the CLI reports it in one line; `hint` (the
    trainer's resume command) is appended to it."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message + (f"; {self.hint}" if self.hint else "")

    def __reduce__(self):
        return type(self), (self.message, self.hint)


def _connection_failed(error: BaseException) -> bool:
    """Whether `error` is how distributed reports a connection (to a worker or the scheduler) that
    broke or could not be made, or work it dropped with one: a closed comm (CommClosedError, also
    what the scheduler's reply turns into when its broadcast to a dead worker fails), a refused
    or reset connection, a timeout, the bare OSError of a connect that timed out, a scatter that
    missed, futures cancelled, a client that gave up on its scheduler and closed. Not bigtopics'
    own errors, nor a file's (subclasses of OSError)."""
    from distributed.client import ClosedClientError
    from distributed.comm import CommClosedError

    return (isinstance(error, (CommClosedError, ConnectionError, TimeoutError, ScatterFailed, CancelledError,
                               ClosedClientError))
            or type(error) is OSError)


def _scheduler_answers(client, patience: float = SCHEDULER_PATIENCE) -> bool:
    """Whether the client's scheduler answers, given the time Dask's client takes to connect again
    (it tries for its timeout, then closes) and `patience` seconds at most."""
    deadline = time.monotonic() + patience
    while client.status in ("running", "connecting", "newly-created") and time.monotonic() < deadline:
        if client.status == "running":
            with suppress(OSError):  # (a TimeoutError too)
                client.sync(client.scheduler.identity, callback_timeout=max(deadline - time.monotonic(), 1.0))
                return True
        time.sleep(0.2)
    return False


def may_try_again(client, error: BaseException, attempt: int) -> bool:
    """Whether a call to the cluster that failed with `error` at its `attempt`-th try (from 0)
    may be made again: a worker was lost under it (or the scheduler dropped the connection and
    answers again). False for any other error (a task's own). A ClusterLost, raised from
    `error`, when the scheduler no longer answers or the call has had RETRIES tries again."""
    if not _connection_failed(error):
        return False
    scheduler = f" {client.scheduler.address}" if client.scheduler is not None else ""  # (closing forgets it)
    if not _scheduler_answers(client):
        raise ClusterLost(f"lost the Dask cluster: its scheduler{scheduler} stopped answering") from error
    if attempt >= RETRIES:
        raise ClusterLost(f"the cluster lost workers under {RETRIES + 1} tries in a row ({_first_line(error)})") \
            from error
    return True


def retried(client, call, before_again=None):
    """call(), made again (after before_again() if given) while may_try_again says so."""
    for attempt in range(RETRIES + 1):
        try:
            return call()
        except Exception as error:
            if not may_try_again(client, error, attempt):
                raise
            if before_again is not None:
                before_again()


def _first_line(error: BaseException) -> str:
    """What distributed says of an error, in one line (a cancellation's message runs to several)."""
    return next(iter(str(error).splitlines()), "") or type(error).__name__


def infer_parts(client, model, store: Store, ranges: list[tuple[int, int]], settings) -> Iterator[tuple[int, dict]]:
    """`bigtopics infer` on a cluster: (first document, infer_block's result) for each range of
    documents, in the order they finish; the result is infer_block's, whatever the cluster."""
    from . import dask_worker as worker

    parts = [(store, start, stop) for start, stop in ranges]
    for index, result in model_parts(client, model, worker.read_range, parts, worker.infer_with, settings):
        yield ranges[index][0], result


def heldout_parts(client, model, store: Store, batches: list[np.ndarray], scoring: dict) -> list[dict]:
    """heldout.batch_scores of each batch of document numbers, scored on the cluster, in the
    order of the batches (so that their sums are the in-process engine's)."""
    from . import dask_worker as worker

    parts = [(store, doc_numbers) for doc_numbers in batches]
    results = dict(model_parts(client, model, worker.read_numbers, parts, worker.score_with, scoring))
    return [results[i] for i in range(len(batches))]
