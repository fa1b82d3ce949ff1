"""SCVB0's local step (Foulds et al. 2013): stochastic collapsed VB with the topics frozen, dense in K."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..frozen import FrozenTopics
from ..minibatch import Minibatch
from ..options import MAX_SWEEPS, check_integer
from ..stats import StepResult
from .base import LocalStep, option
from .gibbs import ONE_PASS
from .variational import scvb0_local_step


@dataclass(frozen=True)
class SCVB0Step(LocalStep):
    name = "scvb0"
    summary = "SCVB0 (Foulds et al. 2013): stochastic collapsed VB, dense in K"

    # SCVB0 keeps each document's expected counts N_theta only, a point estimate: fitted to them
    # (E[log theta] of Dirichlet(N_theta + alpha), or the Polya fixed point on soft counts) alpha
    # feeds back on itself, a larger alpha smoothing N_theta + alpha, which then fits a larger one
    # and costs held-out likelihood (benchmarks/RESULTS.md, "Learned priors").
    alpha_refusal = ("keeps point estimates of the document-topic counts, to which a fitted alpha feeds back on "
                     "itself, growing and costing held-out likelihood")

    burnin: int = option("burn-in passes per document before the read-out pass  [default: 3]")

    def resolved(self, epochs: int) -> "SCVB0Step":
        return replace(self, burnin=ONE_PASS.burnin if self.burnin is None else self.burnin)

    def validate(self, n_topics: int) -> None:
        check_integer(self.burnin, "--burnin", 0, MAX_SWEEPS)

    def run(self, batch: Minibatch, frozen: FrozenTopics, doc_seeds: np.ndarray, *, alpha: float,
            n_workers: int) -> StepResult:
        stats = scvb0_local_step(batch, frozen, doc_seeds, alpha=alpha, burnin=self.burnin, n_workers=n_workers)
        return StepResult(stats.words, stats.topics, stats.values)
