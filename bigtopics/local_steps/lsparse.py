"""L-sparse variational local step (Hughes & Sudderth): Online VB keeping the top L topics per
document-word."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..frozen import FrozenTopics
from ..minibatch import Minibatch
from ..options import MAX_SWEEPS, MAX_TOPICS, check_integer
from ..stats import StepResult
from .base import LocalStep, option
from .variational import log_theta_for, lsparse_local_step, step_result
from .vb import VB_ITERATIONS


@dataclass(frozen=True)
class LSparseStep(LocalStep):
    name = "lsparse"
    summary = "L-sparse VB (Hughes & Sudderth): top-L responsibilities per token, sparse in K"

    top_l: int = option("responsibilities kept per token (more than K means dense)  [default: 8]")
    vb_iterations: int = option(f"most fixed-point iterations per document  [default: {VB_ITERATIONS}]")

    def resolved(self, epochs: int) -> "LSparseStep":
        return replace(self, top_l=8 if self.top_l is None else self.top_l,
                       vb_iterations=VB_ITERATIONS if self.vb_iterations is None else self.vb_iterations)

    def validate(self, n_topics: int) -> None:
        check_integer(self.top_l, "--top-l", 1, MAX_TOPICS)  # more than K means dense
        check_integer(self.vb_iterations, "--vb-iterations", 1, MAX_SWEEPS)

    @property
    def beta_estimate(self) -> str:
        return "geometric"

    @property
    def learns_alpha(self) -> bool:
        return True  # from E[log theta] (stats.ExpectedLogTheta)

    def run(self, batch: Minibatch, frozen: FrozenTopics, doc_seeds: np.ndarray, *, alpha: float | np.ndarray,
            n_workers: int, prior_counts: tuple[str, ...] = ()) -> StepResult:
        log_theta = log_theta_for(batch, frozen, prior_counts)
        stats = lsparse_local_step(batch, frozen, doc_seeds, alpha=alpha, top_l=min(self.top_l, frozen.n_topics),
                                   max_iterations=self.vb_iterations, n_workers=n_workers, log_theta=log_theta)
        return step_result(stats, log_theta)
