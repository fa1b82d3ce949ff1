"""SCVB0's local step (Foulds et al. 2013): stochastic collapsed VB with the topics frozen, dense in K."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..frozen import FrozenTopics
from ..minibatch import Minibatch
from ..stats import StepResult
from .base import LocalStep, option
from .gibbs import SAMPLING_DEFAULTS
from .variational import log_theta_for, step_result, scvb0_local_step


@dataclass(frozen=True)
class SCVB0Step(LocalStep):
    name = "scvb0"
    summary = "SCVB0 (Foulds et al. 2013): stochastic collapsed VB, dense in K"

    burnin: int = option("burn-in passes per document before the read-out pass  [default: 3]")

    def resolved(self, epochs: int) -> "SCVB0Step":
        return replace(self, burnin=SAMPLING_DEFAULTS[False][1] if self.burnin is None else self.burnin)

    def validate(self, n_topics: int) -> None:
        from ..settings import MAX_SWEEPS, check_integer

        check_integer(self.burnin, "--burnin", 0, MAX_SWEEPS)

    @property
    def learns_alpha(self) -> bool:
        return True  # from E[log theta] (stats.ExpectedLogTheta)

    def run(self, batch: Minibatch, frozen: FrozenTopics, doc_seeds: np.ndarray, *, alpha: float | np.ndarray,
            n_workers: int, prior_counts: tuple[str, ...] = ()) -> StepResult:
        log_theta = log_theta_for(batch, frozen, prior_counts)
        stats = scvb0_local_step(batch, frozen, doc_seeds, alpha=alpha, burnin=self.burnin, n_workers=n_workers,
                                 log_theta=log_theta)
        return step_result(stats, log_theta)
