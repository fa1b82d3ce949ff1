"""A Dask cluster as executor: the local step of each minibatch runs on the cluster's workers.

A minibatch's documents are cut into shards (plan.MinibatchPlan.shards); for each shard one
task reads its documents from the store on a worker (the documents stay there, as a Dask
future) and reports back the shard's distinct words and tokens. The step's task runs on the
worker holding the shard; the shards' statistics merged in shard order are the minibatch's,
bit for bit as in process (stats.merge_results), wherever the merging happens (below).

Each worker keeps a copy of the topic-word table (dask_tasks.Replica) and the driver keeps the
table itself. The shards' statistics do not come to the driver to be merged: each shard's task
keeps its statistics on its worker, cut into word slices, and answers with where they are; one
task per slice (merge_slice, on a worker the scheduler picks) fetches that slice's pieces from
the workers directly and merges them in shard order. The merged slices, in word order, are the
minibatch's merged statistics bit for bit (stats.split_by_words), whatever the number of slices:
so it is one per worker, and the merging grows with the cluster. The driver gathers the merged
slices for its own table, which takes the step on a thread of its own while the workers go on
(`settle` waits for it before anything reads the table), and each worker's next shard takes them
as its dependencies (Dask moves them from worker to worker) and applies the update to its copy,
so the copies stay the driver's table bit for bit, resets included. A shard's task names the
table version it needs and the last few updates; a worker whose copy is older than those (one
that joined, or a new run on the same cluster) answers NEED_TABLE and is sent the whole table
once. So what goes to a worker per minibatch is the merged update, which grows with the
statistics' nonzeros, never with K x V (10 bytes an entry for counts: StepResult's pickling), and
nothing waits on copying rows out of the table.

A step whose merge is exact (gibbs) gives the same model however a minibatch is cut, so with
shard_docs 0 it is cut into one shard per worker. Any other step's shards are fixed by the
run's settings (`shard_docs`, 0: one shard), never by the cluster's size, since its float sums
depend on the grouping.

Reading the next minibatch's shards is submitted before the current one samples. A task that
fails (a lost worker, a storage hiccup) is retried; a lost worker's documents are read again by
the scheduler from the task that read them.

Whatever the driver asks of the cluster itself (registering the warm-up plugin, scattering,
gathering what it scattered for) goes through `cluster.retried`: a worker that dies under the call, or
a scheduler that drops the connection and takes it up again, makes it try again (RETRIES times);
only a scheduler that stops answering (`may_try_again` tells which) ends the run, as ClusterLost.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Iterator

import numpy as np

from ..assignments import SavedAssignments
from ..cluster import RETRIES, ClusterLost, connect, gathered, retried, scattered
from ..kernels import pieces
from ..memory import format_bytes
from ..plan import MinibatchPlan
from ..stats import SparseStats, StepResult, concatenated, merge_results, slice_bounds
from ..store import Store
from ..topic_word import TopicWordTable
from .base import Executor, StepTask

READ_AHEAD = 2  # minibatches whose reading is submitted ahead of the one sampling
UPDATES_KEPT = 4  # the last global steps a worker's copy of the table can catch up with
WATCH_SECONDS = 10.0  # waiting on the workers, how often to check that none is paused for memory


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
        from . import dask_tasks  # the tasks' functions; importing it needs Dask

        self.on_worker = dask_tasks
        self.client = client
        self.store = store
        self.cache_blocks = window_blocks
        self.warm = warm
        self.owns_client = owns_client  # a cluster this executor started (--cluster local:N) ends with it
        # driver_seconds: submitting the tasks and putting the merged slices together (the
        # serial part the cluster adds besides the global step); wait_seconds: waiting on the
        # workers' results; shard_entries and update_entries: the (word, topic) entries of the
        # shards' statistics and of the merged update
        self.figures = {"bytes_sent": 0, "bytes_received": 0, "wait_seconds": 0.0, "driver_seconds": 0.0,
                        "minibatches": 0, "minibatches_submitted_again": 0, "shard_entries": 0, "update_entries": 0}
        self.outstanding: list = []  # futures submitted and not known to be done
        # the workers' copies of the table: this executor's own (a new run on the same cluster
        # starts afresh), at `version` global steps, with the futures of the last updates
        self.session = uuid.uuid4().hex
        self.store_handle = dask_tasks.StoreHandle(self.session, store.__getstate__())  # opened once per worker
        self.version = 0
        self.updates: deque = deque(maxlen=UPDATES_KEPT)
        self.n_workers, self.workers_asked = 0, -1e9
        self.worker_info: dict = {}  # the scheduler's description of each worker
        self.worker_pause: dict[str, float | bool] = {}  # the fraction of its limit at which Dask pauses it
        self.copy_bytes = 0  # the size of a worker's copy of the table, as last seen
        self.scattered_count = 0
        self.exchanges = 0  # the steps run (and run again) so far: each exchange of statistics has its own name
        self.update_slices: list = []  # the last step's merged slices (futures), until global_step sends them on
        # the driver's table takes each global step on a thread of its own while the workers go on
        # with the next minibatch (the workers' copies never wait on it); `settle` waits for it
        self.table_thread = ThreadPoolExecutor(1, thread_name_prefix="bigtopics-driver-table")
        self.table_step: Future | None = None

    @classmethod
    def from_options(cls, store: Store, *, workers: int, window_blocks: int, cluster: str | None,
                     scheduler: str | None) -> "DaskExecutor":
        """A cluster started (`cluster` "local:N") or joined (`scheduler`) for this run: it ends
        with the executor."""
        return cls(connect(cluster, scheduler), store, window_blocks, owns_client=True)

    # which shards, and reading them
    def _shards(self, plan: MinibatchPlan, task: StepTask) -> list[tuple[int, int]]:
        """The plan's shards (see the module docstring)."""
        if task.shard_docs or not task.step.exact_merge:
            return plan.shards(task.shard_docs)
        return plan.shards(-(-plan.n_docs // max(self._workers(), 1)))

    def _workers(self) -> int:
        """The cluster's workers now (asked of the scheduler at most once a second)."""
        if self.client.status == "running" and time.monotonic() - self.workers_asked > 1.0:
            self.worker_info = self.client.scheduler_info().get("workers", {})
            self.n_workers = len(self.worker_info)
            self.workers_asked = time.monotonic()
            if self.worker_info.keys() - self.worker_pause.keys():
                self.worker_pause.update(retried(self.client, lambda: self.client.run(self.on_worker.pause_fraction)))
        return self.n_workers

    def _watch_workers(self) -> None:
        """(While waiting on the workers) ask the scheduler about them again, and stop if one cannot hold its copy."""
        self.workers_asked = -1e9
        self._check_copies_fit(self.copy_bytes)

    def _check_copies_fit(self, copy_bytes: int) -> None:
        """Refuse to go on (WorkersTooSmall) where a worker's copy of the table, of `copy_bytes`,
        would bring it to the memory at which Dask pauses it: a paused worker runs no task, and
        the run would wait on it forever."""
        self.copy_bytes = copy_bytes
        self._workers()
        refusal = copies_that_do_not_fit(self.worker_info, self.worker_pause, copy_bytes)
        if refusal:
            raise WorkersTooSmall(refusal)

    def _submit_reads(self, plan: MinibatchPlan, task: StepTask) -> ClusterWork:
        work = ClusterWork(plan, self._shards(plan, task), [], [])
        self._read(work)
        return work

    def _read(self, work: ClusterWork) -> None:
        """Submit the tasks reading the work's shards on the workers (again, if the client had to
        connect to the scheduler again, which cancels every future it held)."""
        submit, worker, plan = self.client.submit, self.on_worker, work.plan
        work.batches = [submit(worker.read_shard, self.store_handle, plan.doc_numbers[lo:hi], self.cache_blocks,
                               pure=False, retries=RETRIES) for lo, hi in work.shards]
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
        retried(self.client, lambda: self.client.register_plugin(self.on_worker.WorkerSetup(step)))
        self.warm = False

    def minibatches(self, plans: Iterator[MinibatchPlan], task: StepTask,
                    saved: SavedAssignments | None = None) -> Iterator[ClusterWork]:
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
        self._check_copies_fit(table.nbytes())
        return ReplicaRows(table, self.version, own)

    def run(self, work: ClusterWork, rows: ReplicaRows, task: StepTask) -> StepResult:
        """The step on the minibatch's shards, submitted again if the scheduler forgot data they
        needed: scattered data (`own`, a whole table) has no task to compute it again, so when the
        only worker holding it dies (Dask's memory manager keeps one copy of what no waiting task
        needs, broadcast or not) the scheduler forgets it and cancels the shards waiting on it; and
        a merged slice lost with its worker cannot be merged again once its pieces are gone with
        theirs (PiecesLost). The next attempt sends no past updates: a worker whose copy is behind
        is sent the whole table (NEED_TABLE). A scatter to a worker that has died but is still
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
            own = self._scatter_named(f"own-statistics-{rows.version}", rows.own)
            self.figures["bytes_sent"] += _nbytes(rows.own) * max(self._workers(), 1)
        shards = list(zip(work.shards, work.batches))
        previous = (work.previous_topics if task.step.continues_chains and work.previous_topics is not None
                    else [None] * len(shards))
        self.exchanges += 1  # each attempt's pieces its own: a step run again never reads an older one's
        exchange, bounds = str(self.exchanges), slice_bounds(self.words(work), max(self._workers(), 1))
        updates = list(self.updates)

        def submit(i, table_state=None):
            (lo, hi), batch = shards[i]
            self.figures["bytes_sent"] += seeds[lo:hi].nbytes + (0 if previous[i] is None else previous[i][0].nbytes)
            return self.client.submit(self.on_worker.run_shard, batch, self.session, rows.version, updates, own,
                                      task, seeds[lo:hi], (exchange, i, bounds), table_state, previous[i],
                                      pure=False, retries=RETRIES)

        futures = [submit(i) for i in range(len(shards))]
        self.figures["driver_seconds"] += time.monotonic() - start
        self.outstanding.extend(futures)
        done = self._gather(futures)
        need_table = self.on_worker.NEED_TABLE
        behind = [i for i, result in enumerate(done) if isinstance(result, str) and result == need_table]
        if behind:  # workers without a current copy of the table: send them the whole table once
            holders = self.client.who_has([shards[i][1] for i in behind])
            workers = sorted({w for i in behind for w in holders.get(shards[i][1].key, ())})
            self.settle()  # the whole table at rows.version
            state = self._scatter_named(f"topic-word-table-{rows.version}", rows.table.state(), workers=workers or None)
            self.figures["tables_sent"] = self.figures.get("tables_sent", 0) + len(behind)
            for i, result in zip(behind, self._gather([submit(i, state) for i in behind])):
                done[i] = result
        slices = self._exchange(exchange, [d.address for d in done], len(bounds) + 1, rows.table.n_topics)
        merged_slices = self._gather(slices)
        self.figures["bytes_received"] += sum(d.nbytes for d in done) + sum(s.nbytes for s in merged_slices)
        self.figures["shard_entries"] += sum(d.entries for d in done)
        self.figures["update_entries"] += sum(len(s.words) for s in merged_slices)
        self.figures["minibatches"] += 1
        self.client.cancel(work.batches + work.summaries)  # the documents are no longer needed
        self.update_slices = slices  # what global_step hands the workers' copies
        start = time.monotonic()
        statistics = concatenated(merged_slices)
        # the last sweeps and the priors' counts (no statistics), shard after shard
        rest = merge_results([d.rest for d in done], rows.table.n_topics)
        self.figures["driver_seconds"] += time.monotonic() - start
        return replace(rest, words=statistics.words, topics=statistics.topics, sums=statistics.sums)

    def _exchange(self, exchange: str, holders: list[str], n_slices: int, n_topics: int) -> list:
        """Futures of the minibatch's statistics merged slice by slice on the workers (merge_slice).
        Placed by the scheduler, which spreads tasks without inputs over idle workers (a task bound
        to a worker that died along with every other waits forever, allow_other_workers or not).
        Not retried: a merge fails only when pieces were lost with their worker, which no retry
        brings back (the step is run again, `run`)."""
        return [self.client.submit(self.on_worker.merge_slice, self.session, exchange, s, holders, n_topics,
                                   key=self._key("topic-word-update")) for s in range(n_slices)]

    def global_step(self, table: TopicWordTable, stats: SparseStats, rho: float, scale: float) -> None:
        """The global step on the driver's table, in the background: the workers' copies take the
        same update, the merged slices that `run` left on the workers, before their next shard
        (dask_tasks._table_at), so nothing the next minibatch does waits on the driver's table.
        One step at a time: the previous one had a whole minibatch to finish."""
        self.settle()
        self.table_step = self.table_thread.submit(_take_step, table, stats, rho, scale, pieces.threads())
        self.version += 1
        self.updates.append((self.version, self.update_slices, rho, scale))

    def settle(self) -> None:
        step, self.table_step = self.table_step, None
        if step is not None:
            start = time.monotonic()
            step.result()
            self.figures["settle_seconds"] = self.figures.get("settle_seconds", 0.0) + time.monotonic() - start

    def _key(self, name: str) -> str:
        """A key of this run's own for scattered data: what the dashboard shows (Dask groups keys by
        the name before the numbers), and never the key of another run's data on the same cluster."""
        self.scattered_count += 1
        return f"{name}-{self.scattered_count}-{self.session}"

    def _scatter_named(self, name: str, data, workers=None):
        """`data` scattered to every worker (or to `workers`) under a key of its own (_key)."""
        return _only(scattered(self.client.scatter, {self._key(name): data}, workers=workers, broadcast=True,
                               direct=True))

    def _gather(self, futures: list) -> list:
        """The futures' results; a worker paused for lack of memory ends the wait (WorkersTooSmall)."""
        start = time.monotonic()
        results = gathered(self.client, futures, self._watch_workers, WATCH_SECONDS)
        self.figures["wait_seconds"] += time.monotonic() - start
        return results

    def where(self) -> str:
        link = self.client.dashboard_link if self.client.scheduler_info().get("services", {}).get("dashboard") else ""
        n = self._workers()
        return (f"on the Dask cluster at {self.client.scheduler.address} ({n} worker{'s' if n != 1 else ''})"
                + (f"; its dashboard: {link}" if link else ""))

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
        self.table_thread.shutdown()  # a step under way finishes: the table is never left half-updated
        cluster = self.client.cluster if self.owns_client else None
        if self.owns_client:
            self.client.close()
        if cluster is not None:
            cluster.close()


class WorkersTooSmall(ClusterLost):
    """A worker's memory limit cannot hold its copy of the table (the run stops with its checkpoints)."""


def copies_that_do_not_fit(workers: dict, pauses: dict, copy_bytes: int) -> str:
    """Why the workers (the scheduler's `workers` description: memory_limit, 0 for none, and the
    process's memory in use) cannot hold a copy of `copy_bytes` each, or "". A worker needs the
    memory it uses now and one copy more: it builds its copy from the table's state sent whole,
    and its pool grows by doubling, so for a moment it holds the copy twice. That must stay below
    the fraction of its limit at which Dask pauses it (`pauses`; False: it never pauses)."""
    for address, info in sorted(workers.items()):
        limit, pause = info.get("memory_limit") or 0, pauses.get(address, 0.8)
        if not limit or pause is False:
            continue
        used = info.get("metrics", {}).get("memory") or 0
        needed, allowed = used + copy_bytes, pause * limit
        if needed > allowed:
            return (f"worker {address} cannot hold its copy of the topic-word table: it uses "
                    f"{format_bytes(used)} and needs the copy's {format_bytes(copy_bytes)} more while the copy "
                    f"is built or grows, {format_bytes(needed)} in all, and Dask pauses it at "
                    f"{pause:.0%} of its memory limit of {format_bytes(limit)} ({format_bytes(allowed)}); give the "
                    f"workers more memory (dask worker --memory-limit) or fewer topics, or train in process")
    return ""


def _take_step(table: TopicWordTable, stats: SparseStats, rho: float, scale: float, threads: int) -> None:
    """The global step on the driver's thread for it, on as many threads as the driver's own
    (the count is per calling thread: kernels/pieces.py)."""
    pieces.set_threads(threads)
    table.update(stats.words, stats.topics, stats.values, rho, scale)


def _only(futures: dict):
    """The one future of a scatter of a one-item dict."""
    [future] = futures.values()
    return future


def _nbytes(stats: SparseStats) -> int:
    return stats.words.nbytes + stats.topics.nbytes + stats.values.nbytes
