"""Online VB's local step (Hoffman, Blei & Bach 2010): dense in K, the O(K) reference."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..frozen import FrozenTopics
from ..minibatch import Minibatch
from ..options import MAX_SWEEPS, check_integer
from ..stats import StepResult
from .base import LocalStep, option
from .variational import log_theta_for, step_result, vb_local_step

VB_ITERATIONS = 100


@dataclass(frozen=True)
class VBStep(LocalStep):
    name = "vb"
    summary = "Online VB (Hoffman et al. 2010): dense in K, the reference for small K"

    vb_iterations: int = option(f"most fixed-point iterations per document  [default: {VB_ITERATIONS}]")

    def resolved(self, epochs: int) -> "VBStep":
        return replace(self, vb_iterations=VB_ITERATIONS if self.vb_iterations is None else self.vb_iterations)

    def validate(self, n_topics: int) -> None:
        check_integer(self.vb_iterations, "--vb-iterations", 1, MAX_SWEEPS)

    @property
    def beta_estimate(self) -> str:
        return "geometric"  # Online VB reads exp(E[log beta]), as its paper

    @property
    def learns_alpha(self) -> bool:
        return True  # from E[log theta] (stats.ExpectedLogTheta)

    def run(self, batch: Minibatch, frozen: FrozenTopics, doc_seeds: np.ndarray, *, alpha: float | np.ndarray,
            n_workers: int, prior_counts: tuple[str, ...] = ()) -> StepResult:
        log_theta = log_theta_for(batch, frozen, prior_counts)
        stats = vb_local_step(batch, frozen, doc_seeds, alpha=alpha, max_iterations=self.vb_iterations,
                              n_workers=n_workers, log_theta=log_theta)
        return step_result(stats, log_theta)
