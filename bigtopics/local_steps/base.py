"""The local step's interface: per-document inference for some documents with the topics frozen.

A local step is a frozen dataclass whose fields are its own options (their metadata carries the
CLI help); `run` is a pure function of (documents, frozen topics, per-document seeds, alpha)
that returns the sums behind the minibatch statistics Nhat. It holds no state and survives a
pickle round trip, so an executor may run it in this process or on any worker of a cluster.
Steps register in local_steps/__init__.py.

Statistics of several shards of a minibatch merge in document order (stats.merge_results). A
step whose sums are integer counts (`exact_merge`) gives the same statistics however the
minibatch is split; float sums depend on the grouping, so their shards are fixed by the run's
settings.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..frozen import FrozenTopics
from ..minibatch import Minibatch
from ..options import OptionError
from ..stats import StepResult


def option(help: str, **extra) -> dataclasses.Field:
    """A step option: a dataclass field with its CLI help (and `choices`, or `flag` for booleans)."""
    return dataclasses.field(default=extra.pop("default", None), metadata={"help": help, **extra})


@dataclass(frozen=True)
class LocalStep(ABC):
    """One local step with its options (see the module docstring)."""

    name: ClassVar[str]
    summary: ClassVar[str]  # one line for the CLI's help and the README's table
    exact_merge: ClassVar[bool] = False
    # why --optimize-alpha is refused, for a step that does not learn alpha (settings.py)
    alpha_refusal: ClassVar[str] = "does not return the document-topic statistics the update needs"

    @classmethod
    def options(cls) -> tuple[dataclasses.Field, ...]:
        return dataclasses.fields(cls)

    def resolved(self, epochs: int) -> "LocalStep":
        """This step with every option left at None given its default (some depend on the run)."""
        return self

    def validate(self, n_topics: int) -> None:
        """Raise ValueError naming an option whose value cannot work."""

    @property
    def beta_estimate(self) -> str:
        """The estimate of beta the step reads: mean or geometric (frozen.py)."""
        return "mean"

    @property
    def keeps_assignments(self) -> bool:
        """Whether each document's assignments are kept between visits (exclude-own)."""
        return False

    def default_eta(self) -> float:
        return 0.01

    @property
    def continues_chains(self) -> bool:
        """Whether the step's `run` takes `previous_topics` (each token's topic from its document's
        previous visit, int32, -1 for a document not visited yet; assignments.chain_starts), to
        start each document's chain there."""
        return False

    @property
    def learns_alpha(self) -> bool:
        """Whether the step's `run` takes `prior_counts` (the parts wanted: "documents", "words"),
        to return what an update of the learned alpha reads (StepResult.prior_counts: the counts
        of a sweep, or a variational step's E[log theta]), and an asymmetric alpha (one value per
        topic), as learning alpha needs (priors.py)."""
        return False

    @property
    def learns_eta(self) -> bool:
        """Whether the step returns the integer topic-word counts of a sweep (the "words" part of
        prior_counts) and reads the mean estimate of beta, as learning eta needs (priors.py)."""
        return False

    @property
    def learns_alpha_by_default(self) -> bool:
        """Whether --optimize-alpha is on unless turned off (benchmarks/RESULTS.md, "Learned priors")."""
        return False

    def describe(self) -> str:
        """The step as the CLI selects it, for messages."""
        return f"--local-step {self.name}"

    @abstractmethod
    def run(self, batch: Minibatch, frozen: FrozenTopics, doc_seeds: np.ndarray, *, alpha: float,
            n_workers: int) -> StepResult:
        """The step on `batch` with the topics `frozen` (which holds every word of the batch)."""


def check(ok: bool, message: str) -> None:
    """An option's check: a failure is a usage error (OptionError, exit status 2), like a number out
    of its range."""
    if not ok:
        raise OptionError(message)
