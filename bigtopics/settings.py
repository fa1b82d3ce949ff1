"""What defines a training run, and the defaults (benchmarks/RESULTS.md, "Choosing the defaults")."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .local_step import BETA_ESTIMATES

LOCAL_STEPS = ("gibbs", "vb", "lsparse", "scvb0")
SAMPLERS = ("buckets", "alias", "mh")
# The default document-topic prior sums to this over the topics (alpha = 5 / K), as MALLET's. With
# a fixed alpha, documents spread over more topics as K grows (alpha K pseudo-counts against their
# length), which costs both held-out likelihood and sampler time (benchmarks/RESULTS.md, choosing
# the defaults).
ALPHA_SUM = 5.0
# (batch_size, burnin, samples) when not given, by exclude_own (benchmarks/RESULTS.md, "Choosing
# the defaults"). A single pass: 1024 documents and 3 + 3 sweeps, ahead of 2 + 2 at every budget
# and level with 4 + 4 per second. Revisiting documents without their own statistics, 4 + 4
# sweeps and 512 documents reach a given score sooner and end better at K = 100 and 1000.
SAMPLING_DEFAULTS = {False: (1024, 3, 3), True: (512, 4, 4)}
# Rough bytes per stored table entry (topic, value, hash slack) for the up-front disk check.
@dataclass
class TrainSettings:
    """Everything that defines a training run (defaults follow the paper's findings)."""

    n_topics: int
    alpha: float | None = None  # None: ALPHA_SUM / K, MALLET's convention (default_alpha)
    eta: float | None = None  # None: 0.5 for the paper's geometric Gibbs step, else 0.01 (default_eta)
    kappa: float = 0.51  # with tau0 1: ahead of the paper's 0.6 / 64 at every budget (benchmarks/RESULTS.md)
    tau0: float = 1.0
    batch_size: int | None = None  # None: from SAMPLING_DEFAULTS
    burnin: int | None = None  # None: from SAMPLING_DEFAULTS (scvb0: passes per document)
    samples: int | None = None
    local_step: str = "gibbs"  # gibbs | vb | lsparse | scvb0 (algorithms.md sections 1-4)
    sampler: str = "buckets"  # the Gibbs draw: buckets | alias | mh (kernels/gibbs.py, kernels/alias_gibbs.py)
    beta_estimate: str = "mean"  # gibbs: beta in the conditional, mean | geometric (kernels/frozen.py; README)
    mh_steps: int = 2  # mh: Metropolis-Hastings steps per token (alternately word and document proposals)
    top_l: int = 8  # lsparse: responsibilities kept per token
    vb_iterations: int = 100  # vb, lsparse: cap on the per-document fixed-point iterations
    seed: int = 0
    epochs: int = 1
    max_docs: int | None = None
    drop_below: float = 0.01
    reset_below: float = 1e-4
    workers: int = 0  # 0: all cores
    window_blocks: int = 16
    # gibbs: sample each minibatch against the topics without its documents' statistics from their
    # previous visit (assignments.py); None: on when the run makes more than one epoch
    exclude_own: bool | None = None
    heldout: int = 0  # documents held out of training and scored as it goes
    heldout_every: str = "5m"  # how often to score them (minibatches or a duration)
    checkpoint_every: str = "30m"  # minibatches ("200") or a duration ("30m", "2h", "90s")
    keep_checkpoints: int = 3

    # What a resumed run may change; everything else defines the model and must stay.
    CHANGEABLE = ("epochs", "max_docs", "workers", "checkpoint_every", "keep_checkpoints", "heldout_every")

    def __post_init__(self):
        if self.alpha is None and self.n_topics >= 1:
            self.alpha = ALPHA_SUM / self.n_topics
        if self.eta is None:
            self.eta = default_eta(self.local_step, self.beta_estimate)
        if self.exclude_own is None:
            self.exclude_own = self.local_step == "gibbs" and self.epochs > 1
        batch_size, burnin, samples = SAMPLING_DEFAULTS[bool(self.exclude_own)]
        self.batch_size = batch_size if self.batch_size is None else self.batch_size
        self.burnin = burnin if self.burnin is None else self.burnin
        self.samples = samples if self.samples is None else self.samples

    def validate(self) -> None:
        checks = [
            (self.n_topics >= 1, f"the number of topics must be at least 1 (got {self.n_topics})"),
            (self.alpha is not None and self.alpha > 0, f"alpha must be positive (got {self.alpha})"),
            (self.eta > 0, f"eta must be positive (got {self.eta})"),
            (0.5 < self.kappa <= 1, f"kappa must be in (0.5, 1] for convergence (got {self.kappa})"),
            (self.tau0 >= 0, f"tau0 must be non-negative (got {self.tau0})"),
            (self.batch_size >= 1, f"the batch size must be at least 1 (got {self.batch_size})"),
            (self.burnin >= 0, f"burnin must be non-negative (got {self.burnin})"),
            (self.samples >= 1, f"samples must be at least 1 (got {self.samples})"),
            (self.local_step in LOCAL_STEPS,
             f"unknown local step {self.local_step!r}; choose one of {', '.join(LOCAL_STEPS)}"),
            (self.sampler in SAMPLERS, f"unknown sampler {self.sampler!r}; choose one of {', '.join(SAMPLERS)}"),
            (self.beta_estimate in BETA_ESTIMATES,
             f"unknown estimate of beta {self.beta_estimate!r}; choose one of {', '.join(BETA_ESTIMATES)}"),
            (not self.exclude_own or self.local_step == "gibbs",
             f"exclude-own needs the gibbs local step (got {self.local_step!r})"),
            (self.mh_steps >= 1, f"mh-steps must be at least 1 (got {self.mh_steps})"),
            (self.top_l >= 1, f"top-l must be at least 1 (got {self.top_l}); more than K means dense"),
            (self.vb_iterations >= 1, "vb-iterations must be at least 1"),
            (self.epochs >= 1, f"epochs must be at least 1 (got {self.epochs})"),
            (self.max_docs is None or self.max_docs >= 1, "max-docs must be at least 1"),
            (self.drop_below >= 0, "the drop threshold must be non-negative"),
            (0 < self.reset_below < 1, "reset-below must be in (0, 1)"),
            (self.workers >= 0, "workers must be non-negative"),
            (self.keep_checkpoints >= 1, "keep at least one checkpoint"),
            (self.heldout >= 0, "the number of held-out documents must be non-negative"),
            (0 <= self.seed < 2**63, f"the seed must be an integer in [0, 2**63) (got {self.seed})"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        parse_interval(self.checkpoint_every)
        parse_interval(self.heldout_every, "held-out interval")

    @property
    def n_workers(self) -> int:
        return self.workers or os.cpu_count() or 1


def default_eta(local_step: str, beta_estimate: str) -> float:
    """The topic-word prior when none is given. Gibbs steps on exp(E[log beta]) need eta near 0.5:
    e^psi(x) is explosive near 0, so a small eta lets the first topic that samples a word keep it
    (Mimno et al. 2012 found 0.4-0.6 best). With the mean of beta, a small eta is right, as in
    MALLET, tomotopy and gensim: eta = 0.5 puts V/2 pseudo-counts in every topic, which swamps
    the topics of a small corpus (benchmarks/RESULTS.md, choosing the defaults)."""
    return 0.5 if local_step == "gibbs" and beta_estimate == "geometric" else 0.01


def parse_interval(text: str, what: str = "checkpoint interval") -> tuple[int | None, float | None]:
    """'200' -> (200 minibatches, None); '30m', '2h', '90s' -> (None, seconds)."""
    text = str(text).strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if text and text[-1] in units:
            seconds = float(text[:-1]) * units[text[-1]]
            if seconds > 0:
                return None, seconds
        elif int(text) > 0:
            return int(text), None
    except ValueError:
        pass
    raise ValueError(f"{what} {text!r}: give a number of minibatches (200) or a duration (30m, 2h)")


def learning_rate(step: int, tau0: float, kappa: float) -> float:
    """rho_t = (tau0 + t)^-kappa for steps t = 1, 2, ..."""
    return float((tau0 + step) ** -kappa)


def recorded_settings(record: dict) -> TrainSettings:
    """The settings of a run as settings.json records them; a run from before exclude_own
    existed trained without it."""
    return TrainSettings(**{"exclude_own": False, **record["settings"]})


