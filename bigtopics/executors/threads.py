"""The in-process engine: threads over the documents of each minibatch (kernels/pieces.py).

The minibatch is read and prepared by a read-ahead thread while the previous one samples, and
with exclude-own the statistics its documents added on their previous visit are tallied there
too, off the path from one minibatch's global step to the next one's sampling. The local step
cuts its documents into pieces of about equal work, which the threads take as they come free,
each document with its own random stream, so the result does not depend on the number of
threads. With `workers` 0 (all cores) the threads follow the cores other processes leave free
(free_cores.py), changed between minibatches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..assignments import SavedAssignments, chain_starts, previous_stats
from ..cores import use_threads
from ..free_cores import FreeCoreThreads, own_cpus, read_clocks
from ..frozen import TableRows
from ..kernels.pieces import set_threads
from ..minibatch import Minibatch
from ..plan import MinibatchPlan
from ..reader import DocumentReader, prepared, read_ahead
from ..stats import StepResult, merge_results
from ..store import Store
from .base import Executor, StepTask


@dataclass
class LocalWork:
    plan: MinibatchPlan
    batch: Minibatch
    previous_topics: tuple | None = None  # exclude-own: (its tokens' saved topics, the unvisited mark)
    previous: StepResult | None = None  # exclude-own: previous_stats, when tallied ahead


class LocalThreads(Executor):
    """Runs every local step in this process on `workers` threads (0: all cores, fewer while
    other processes keep some of them busy)."""

    def __init__(self, store: Store, workers: int = 0, window_blocks: int = 16):
        self.reader = DocumentReader(store, cache_blocks=window_blocks)
        self.n_threads = use_threads(workers)
        self.free_cores = None
        if workers == 0 and self.n_threads > 1:
            self.cpus = own_cpus()
            self.free_cores = FreeCoreThreads(self.n_threads, len(self.cpus), read_clocks(self.cpus))

    @classmethod
    def from_options(cls, store: Store, *, workers: int, window_blocks: int, cluster: str | None,
                     scheduler: str | None) -> "LocalThreads":
        return cls(store, workers, window_blocks)

    def minibatches(self, plans: Iterator[MinibatchPlan], task: StepTask,
                    saved: SavedAssignments | None = None) -> Iterator[LocalWork]:
        return read_ahead(self._read(plans, saved))

    def _read(self, plans: Iterator[MinibatchPlan], saved: SavedAssignments | None) -> Iterator[LocalWork]:
        """The work items, each with its previous-visit statistics when `saved` is given and its
        plan is of the first plan's epoch (Executor.minibatches)."""
        epoch = None
        for plan in plans:
            work = LocalWork(plan, prepared(self.reader.read(plan.doc_numbers)))
            epoch = plan.epoch if epoch is None else epoch
            if saved is not None and plan.epoch == epoch:
                work.previous = self._tally_previous(work, saved)
            yield work

    def plan_of(self, work: LocalWork) -> MinibatchPlan:
        return work.plan

    def words(self, work: LocalWork) -> np.ndarray:
        return work.batch.distinct_words()

    def n_tokens(self, work: LocalWork) -> int:
        return work.batch.n_tokens

    def previous_stats(self, work: LocalWork, saved: SavedAssignments) -> StepResult:
        return self._tally_previous(work, saved) if work.previous is None else work.previous

    def _tally_previous(self, work: LocalWork, saved: SavedAssignments) -> StepResult:
        topics = saved.topics_of(work.plan.doc_numbers)
        work.previous_topics = (topics, saved.unvisited)
        return previous_stats(work.batch, topics, saved.unvisited, saved.n_topics)

    def run(self, work: LocalWork, rows: TableRows, task: StepTask) -> StepResult:
        if self.free_cores is not None:  # this thread's kernels (this local step, the global step after it)
            self.n_threads = self.free_cores.observe(read_clocks(self.cpus))
            set_threads(self.n_threads)
        seeds = work.plan.doc_seeds(task.seed)
        shards = work.plan.shards(task.shard_docs)
        frozen = task.freeze(rows)
        previous = None
        if task.step.continues_chains and work.previous_topics is not None:
            previous = chain_starts(*work.previous_topics)
        if len(shards) == 1 or task.step.exact_merge:  # one call: the same sums as shard by shard
            return task.run(work.batch, frozen, seeds, self.n_threads, previous)
        starts = work.batch.token_starts()
        return merge_results([task.run(work.batch.slice(lo, hi), frozen, seeds[lo:hi], self.n_threads,
                                       None if previous is None else previous[starts[lo]:starts[hi]])
                              for lo, hi in shards], rows.n_topics)
