"""The executor's interface: where the local step of each minibatch runs.

The trainer keeps the topic-word table, applies the global step and checkpoints; an executor
is handed minibatch plans (plan.py: document numbers, epoch) and, for each, the table rows the
minibatch needs, and returns the minibatch's statistics merged in document order
(stats.StepResult). One minibatch goes through

    work = next(executor.minibatches(plans, task, saved))   reading starts, ahead of the sampler
    executor.words(work)                         the minibatch's distinct word ids
    executor.n_tokens(work)                      and its number of tokens
    executor.previous_stats(work, saved)         exclude-own: what its documents added last visit
    rows = executor.rows(work, table, own)       the rows it reads (less its own statistics)
    executor.run(work, rows, task)               the local step on the frozen rows
    executor.global_step(table, stats, ...)      the table moves on
    executor.settle()                            before anything else reads the table

and the same plans, table and task give the same result, bit for bit, on every executor. The
global step goes through the executor so that an executor that keeps copies of the table
(executors/dask.py) can move them on with it. Executors register in executors/__init__.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..assignments import SavedAssignments
from ..frozen import FrozenTopics, ReusedArrays, TableRows
from ..local_steps import LocalStep
from ..minibatch import Minibatch
from ..plan import MinibatchPlan
from ..stats import SparseStats, StepResult
from ..topic_word import TopicWordTable


@dataclass(frozen=True)
class StepTask:
    """What every shard of a run's local steps needs besides its documents and rows: picklable
    and small. Learned priors (priors.py) change alpha and eta between minibatches, and ask
    for parts of the counts of a sweep (`prior_counts`: "documents", "words") for an update."""

    step: LocalStep
    alpha: float | np.ndarray
    eta: float
    seed: int
    shard_docs: int = 0
    prior_counts: tuple[str, ...] = ()

    def freeze(self, rows: TableRows) -> FrozenTopics:
        return rows.freeze(self.eta, self.step.beta_estimate)

    def run(self, batch: Minibatch, frozen: FrozenTopics, doc_seeds: np.ndarray, n_workers: int,
            previous_topics: np.ndarray | None = None) -> StepResult:
        """The local step on `batch` with the topics `frozen` (and, for a step that continues its
        chains, the batch's topics of the previous visit)."""
        options = {}
        if self.prior_counts:
            options["prior_counts"] = self.prior_counts
        if self.step.continues_chains and previous_topics is not None:
            options["previous_topics"] = previous_topics
        return self.step.run(batch, frozen, doc_seeds, alpha=self.alpha, n_workers=n_workers, **options)


class Executor(ABC):
    """Runs local steps (see the module docstring)."""

    @classmethod
    @abstractmethod
    def from_options(cls, store, *, workers: int, window_blocks: int, cluster: str | None,
                     scheduler: str | None) -> "Executor":
        """The executor for a run's options (`make_executor` picks the class by them)."""

    @abstractmethod
    def minibatches(self, plans: Iterator[MinibatchPlan], task: StepTask,
                    saved: SavedAssignments | None = None) -> Iterator:
        """Work items for the plans, in order, for `task`'s step; reading may run ahead. Given
        the run's `saved` assignments (exclude-own), the executor may also compute the plans'
        `previous_stats` ahead, for plans of the epoch of the first: one epoch's plans visit each
        document once (plan.py), so the saved topics a plan reads ahead are not recorded again
        before it runs."""

    @abstractmethod
    def plan_of(self, work) -> MinibatchPlan:
        """The plan a work item was made from."""

    @abstractmethod
    def words(self, work) -> np.ndarray:
        """The distinct word ids of the work's documents, ascending."""

    @abstractmethod
    def n_tokens(self, work) -> int:
        """The number of tokens of the work's documents."""

    @abstractmethod
    def previous_stats(self, work, saved: SavedAssignments) -> StepResult:
        """The statistics the work's documents added on their previous visit (assignments.previous_stats)."""

    def rows(self, work, table: TopicWordTable, own: SparseStats | None = None, buffers: ReusedArrays | None = None):
        """What `run` reads for the work: the table's rows for its words, less `own` (the
        statistics its documents added on their previous visit, exclude-own) if given; what is
        derived from them goes into `buffers` (TableRows)."""
        rows = TableRows.from_table(table, self.words(work), buffers)
        return rows if own is None else rows.without(own)

    @abstractmethod
    def run(self, work, rows, task: StepTask) -> StepResult:
        """The local step on the work's documents with the topics frozen from `rows` (as
        `self.rows` made them), merged in document order."""

    def global_step(self, table: TopicWordTable, stats: SparseStats, rho: float, scale: float) -> None:
        """The global step on the table (TopicWordTable.update) after a minibatch. An executor
        may take it in the background: the table is read only after `settle`."""
        table.update(stats.words, stats.topics, stats.values, rho, scale)

    def settle(self) -> None:
        """Wait until the table has taken every global step handed to `global_step` (raising
        what one of them raised)."""

    def where(self) -> str:
        """Where the local steps run, for the line a command prints as it starts ("" in process)."""
        return ""

    def metrics(self) -> dict:
        """Figures for the progress line and the metrics log (a cluster's workers, bytes, waits)."""
        return {}

    def close(self) -> None:
        """Release what the executor holds (threads, a cluster)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
