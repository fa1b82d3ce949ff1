"""What defines a training run, and the defaults (benchmarks/RESULTS.md, "Choosing the defaults")."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from .local_steps import LOCAL_STEPS, LocalStep
from .local_steps.gibbs import SAMPLING_DEFAULTS

# The default document-topic prior sums to this over the topics (alpha = 5 / K), as MALLET's. With
# a fixed alpha, documents spread over more topics as K grows (alpha K pseudo-counts against their
# length), which costs both held-out likelihood and sampler time (benchmarks/RESULTS.md, choosing
# the defaults).
ALPHA_SUM = 5.0
# Rough bytes per stored table entry (topic, value, hash slack) for the up-front disk check.
@dataclass(init=False)
class TrainSettings:
    """Everything that defines a training run (defaults follow the paper's findings).

    The local step's own options (sampler, burnin, top_l, ...; local_steps/) are given as keyword
    arguments beside the others and kept, defaults filled in, in `step_options`; an option of
    another step is an error.
    """

    n_topics: int
    local_step: str = "gibbs"  # a name in local_steps.LOCAL_STEPS
    step_options: dict = field(default_factory=dict)
    alpha: float | None = None  # None: ALPHA_SUM / K, MALLET's convention
    eta: float | None = None  # None: the local step's default_eta
    kappa: float = 0.51  # with tau0 1: ahead of the paper's 0.6 / 64 at every budget (benchmarks/RESULTS.md)
    tau0: float = 1.0
    batch_size: int | None = None  # None: from SAMPLING_DEFAULTS (local_steps/gibbs.py)
    shard_docs: int = 0  # documents per shard of a minibatch for executors that spread one (plan.py); 0: one shard
    seed: int = 0
    epochs: int = 1
    max_docs: int | None = None
    drop_below: float = 0.01
    reset_below: float = 1e-4
    workers: int = 0  # threads of the in-process engine; 0: all cores
    window_blocks: int = 16
    heldout: int = 0  # documents held out of training and scored as it goes
    heldout_every: str = "5m"  # how often to score them (minibatches or a duration)
    checkpoint_every: str = "30m"  # minibatches ("200") or a duration ("30m", "2h", "90s")
    keep_checkpoints: int = 3

    # What a resumed run may change; everything else defines the model and must stay.
    CHANGEABLE = ("epochs", "max_docs", "workers", "checkpoint_every", "keep_checkpoints", "heldout_every")

    def __init__(self, n_topics: int, *, local_step: str = "gibbs", step_options: dict | None = None, **given):
        names = {f.name for f in fields(self)}
        own = {k: v for k, v in given.items() if k in names}
        options = {**(step_options or {}), **{k: v for k, v in given.items() if k not in names}}
        for f in fields(self):
            if f.name not in ("n_topics", "local_step", "step_options"):
                setattr(self, f.name, own.get(f.name, f.default))
        self.n_topics, self.local_step = n_topics, local_step
        if local_step not in LOCAL_STEPS:
            raise ValueError(f"unknown local step {local_step!r}; choose one of {', '.join(LOCAL_STEPS)}")
        step_class = LOCAL_STEPS[local_step]
        known = {f.name for f in step_class.options()}
        foreign = sorted(k for k, v in options.items() if k not in known and v is not None)
        if foreign:
            owners = {k: [name for name, c in LOCAL_STEPS.items() if k in {f.name for f in c.options()}]
                      for k in foreign}
            raise ValueError("; ".join(
                f"--{k.replace('_', '-')} " + (f"applies to --local-step {' or '.join(owners[k])}, not {local_step}"
                                              if owners[k] else "is not a training option") for k in foreign))
        step = step_class(**{k: v for k, v in options.items() if k in known}).resolved(self.epochs)
        self.step_options = asdict(step)
        if self.alpha is None and self.n_topics >= 1:
            self.alpha = ALPHA_SUM / self.n_topics
        if self.eta is None:
            self.eta = step.default_eta()
        if self.batch_size is None:
            self.batch_size = SAMPLING_DEFAULTS[step.keeps_assignments][0]

    @property
    def step(self) -> LocalStep:
        """The local step with its options."""
        return LOCAL_STEPS[self.local_step](**self.step_options)

    @property
    def exclude_own(self) -> bool:
        return self.step.keeps_assignments

    def validate(self) -> None:
        checks = [
            (self.n_topics >= 1, f"the number of topics must be at least 1 (got {self.n_topics})"),
            (self.alpha is not None and self.alpha > 0, f"alpha must be positive (got {self.alpha})"),
            (self.eta > 0, f"eta must be positive (got {self.eta})"),
            (0.5 < self.kappa <= 1, f"kappa must be in (0.5, 1] for convergence (got {self.kappa})"),
            (self.tau0 >= 0, f"tau0 must be non-negative (got {self.tau0})"),
            (self.batch_size >= 1, f"the batch size must be at least 1 (got {self.batch_size})"),
            (self.shard_docs >= 0, f"shard-docs must be non-negative (got {self.shard_docs})"),
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
        self.step.validate(self.n_topics)
        parse_interval(self.checkpoint_every)
        parse_interval(self.heldout_every, "held-out interval")


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
    """The settings of a run as settings.json records them."""
    settings = dict(record["settings"])
    if "step_options" not in settings:
        raise ValueError("the run was started by an earlier bigtopics (its settings.json has no step_options); "
                         "start it again with this version")
    return TrainSettings(**settings)
