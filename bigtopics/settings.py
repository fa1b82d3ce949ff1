"""What defines a training run, and the defaults (benchmarks/RESULTS.md, "Choosing the defaults")."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from .local_steps import LOCAL_STEPS, LocalStep
from .local_steps.gibbs import ONE_PASS, REVISITING
from .options import (
    MAX_COUNT,
    MAX_EPOCHS,
    MAX_PRIOR,
    MAX_TAU0,
    MAX_TOPICS,
    MAX_WORKERS,
    MIN_GEOMETRIC_ETA,
    MIN_PRIOR,
    MIN_RESET_BELOW,
    OptionError,
    check_integer,
    check_real,
    check_seed,
    is_real_number,
    parse_interval,
    shown,
)

# The default document-topic prior sums to this over the topics (alpha = 5 / K), as MALLET's. With
# a fixed alpha, documents spread over more topics as K grows (alpha K pseudo-counts against their
# length), which costs both held-out likelihood and sampler time (benchmarks/RESULTS.md,
# "Choosing the defaults").
ALPHA_SUM = 5.0

# A run that revisits its documents (exclude-own) takes minibatches of REVISITING.batch_size
# documents, which average more of the corpus into each update, unless the run would then make
# fewer than MIN_MINIBATCHES updates in all: a short run needs updates more than averages. Never
# fewer than SMALLEST_REVISIT_BATCH documents, the default before (the figures:
# benchmarks/RESULTS.md, "Minibatch size when revisiting"). The visits count the training
# documents (not those held out), bounded by --max-docs.
MIN_MINIBATCHES = 200
SMALLEST_REVISIT_BATCH = 512


def revisit_batch_size(document_visits: int) -> int:
    """The default batch size of a run that revisits its documents and visits this many in all."""
    return max(SMALLEST_REVISIT_BATCH, min(REVISITING.batch_size, document_visits // MIN_MINIBATCHES))


# A run with a learned alpha keeps 1% of its documents out of training to fit the scale of alpha for
# new documents (alpha_scale.py): enough for one number, little of the corpus. Fewer than
# MIN_SCALE_DOCS fit it poorly (a single document can take the factor to the end of its range), and
# below SMALLEST_SCALED_CORPUS documents that many would be more than 2% of the corpus.
MIN_SCALE_DOCS, MAX_SCALE_DOCS = 20, 1000
SCALE_DOC_SHARE = 0.01
SMALLEST_SCALED_CORPUS = 1000


def scale_doc_count(n_docs: int) -> int:
    """How many of n_docs documents a run with a learned alpha keeps out to fit its scale by
    default."""
    if n_docs < SMALLEST_SCALED_CORPUS:
        return 0
    return min(MAX_SCALE_DOCS, max(MIN_SCALE_DOCS, int(n_docs * SCALE_DOC_SHARE)))


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
    optimize_alpha: bool | None = None  # learn an asymmetric alpha_k (priors.py) from alpha; None: where the step can
    optimize_eta: bool = False  # learn eta (priors.py); eta is then its start
    optimize_every: int = 1  # minibatches between two updates of the learned priors
    optimize_burn_in: int = 20  # minibatches before the first update
    optimize_passes: float | None = None  # the priors' fits averaged over at least this many passes (0: at rho_t);
    # None: 1 when training for more than one epoch, else 0 (benchmarks/RESULTS.md, "Learned priors")
    min_alpha_sum: float | None = None  # learned alpha_0 >= this, each alpha_k >= 1% of this / K; None: K alpha
    scale_docs: int | None = None  # documents kept out to fit alpha's scale for new documents (alpha_scale.py);
    # None: scale_doc_count of the documents not held out when alpha is learned, else 0 (settle_scale_docs)
    kappa: float = 0.51  # with tau0 1: ahead of the paper's 0.6 / 64 at every budget (benchmarks/RESULTS.md)
    tau0: float = 1.0
    batch_size: int | None = None  # None: ONE_PASS's; revisiting, settled by settle_batch_size
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
            raise OptionError(f"unknown local step {local_step!r}; choose one of {', '.join(LOCAL_STEPS)}")
        step_class = LOCAL_STEPS[local_step]
        known = {f.name for f in step_class.options()}
        foreign = sorted(k for k, v in options.items() if k not in known and v is not None)
        if foreign:
            owners = {k: [name for name, c in LOCAL_STEPS.items() if k in {f.name for f in c.options()}]
                      for k in foreign}
            raise OptionError("; ".join(
                f"--{k.replace('_', '-')} " + (f"applies to --local-step {' or '.join(owners[k])}, not {local_step}"
                                              if owners[k] else "is not a training option") for k in foreign))
        step = step_class(**{k: v for k, v in options.items() if k in known}).resolved(self.epochs)
        self.step_options = asdict(step)
        if self.optimize_alpha is None:  # on where measured to help (benchmarks/RESULTS.md, "Learned priors")
            self.optimize_alpha = step.learns_alpha_by_default
        if self.optimize_passes is None:
            self.optimize_passes = 1.0 if self.epochs > 1 else 0.0
        if self.alpha is None and is_real_number(self.n_topics) and self.n_topics >= 1:
            self.alpha = ALPHA_SUM / self.n_topics
        if (self.optimize_alpha and self.min_alpha_sum is None and is_real_number(self.alpha)
                and is_real_number(self.n_topics)):
            self.min_alpha_sum = self.n_topics * self.alpha  # docs/design.md, "Learned priors": why a floor
        if self.eta is None:
            self.eta = step.default_eta()
        if self.batch_size is None and not step.keeps_assignments:
            self.batch_size = ONE_PASS.batch_size

    def settle_batch_size(self, n_training_docs: int) -> None:
        """Fill in the batch size of a run that revisits its documents (revisit_batch_size), once
        the documents it trains on are known; a given or settled batch size stays."""
        if self.batch_size is None:
            self.batch_size = revisit_batch_size(self.document_visits(n_training_docs))

    def settle_scale_docs(self, n_docs: int) -> None:
        """Fill in how many of the n_docs documents (those not held out) the run keeps out to fit
        its learned alpha's scale; a given or settled count stays."""
        if self.scale_docs is None:
            self.scale_docs = scale_doc_count(n_docs) if self.optimize_alpha else 0

    def document_visits(self, n_training_docs: int) -> int:
        """How many documents the run visits in all: its epochs over the training documents, or
        --max-docs if fewer."""
        visits = self.epochs * n_training_docs
        return visits if self.max_docs is None else min(visits, self.max_docs)

    @property
    def step(self) -> LocalStep:
        """The local step with its options."""
        return LOCAL_STEPS[self.local_step](**self.step_options)

    @property
    def exclude_own(self) -> bool:
        return self.step.keeps_assignments

    def validate(self) -> None:
        """Every option finite and in range, each failure one line naming the option as the CLI
        spells it; then the local step's options and the intervals."""
        check_integer(self.n_topics, "-k/--topics", 1, MAX_TOPICS, "the number of topics")
        check_real(self.alpha, "--alpha", MIN_PRIOR, MAX_PRIOR,
                   text=f"positive, at least {MIN_PRIOR:g} and at most {MAX_PRIOR:g}")
        check_real(self.eta, "--eta", MIN_PRIOR, MAX_PRIOR,
                   text=f"positive, at least {MIN_PRIOR:g} and at most {MAX_PRIOR:g}")
        check_real(self.kappa, "--kappa", 0.5, 1.0, low_open=True, text="in (0.5, 1] for convergence")
        check_real(self.tau0, "--tau0", 0.0, MAX_TAU0)
        if self.batch_size is not None:  # None: settled when the corpus is known (settle_batch_size)
            check_integer(self.batch_size, "--batch-size", 1, None, "the batch size")
        check_integer(self.shard_docs, "--shard-docs", 0, MAX_COUNT)
        check_integer(self.epochs, "--epochs", 1, MAX_EPOCHS)
        if self.max_docs is not None:
            check_integer(self.max_docs, "--max-docs", 1, MAX_COUNT)
        check_real(self.drop_below, "--drop-below", 0.0, None, text="non-negative")
        check_real(self.reset_below, "--reset-below", MIN_RESET_BELOW, 1.0, high_open=True,
                   text=f"in (0, 1), at least {MIN_RESET_BELOW:g}")
        check_integer(self.workers, "--workers", 0, MAX_WORKERS)
        check_integer(self.window_blocks, "window_blocks", 1, 1 << 16)
        check_integer(self.heldout, "--heldout", 0, MAX_COUNT, "the number of held-out documents")
        check_integer(self.keep_checkpoints, "--keep-checkpoints", 1, 10_000, "the number of checkpoints kept")
        check_seed(self.seed)
        for flag, value in (("--optimize-alpha", self.optimize_alpha), ("--optimize-eta", self.optimize_eta)):
            if not isinstance(value, bool):
                raise OptionError(f"{flag} must be on or off (got {shown(value)})")
        check_integer(self.optimize_every, "--optimize-every", 1, MAX_COUNT, "minibatches between updates")
        check_integer(self.optimize_burn_in, "--optimize-burn-in", 0, MAX_COUNT, "minibatches before the first update")
        check_real(self.optimize_passes, "--optimize-passes", 0.0, MAX_COUNT)
        if self.min_alpha_sum is not None:
            check_real(self.min_alpha_sum, "--min-alpha-sum", 0.0, self.n_topics * MAX_PRIOR)
            if self.min_alpha_sum > 0 and not self.optimize_alpha:
                raise OptionError("--min-alpha-sum applies to a learned alpha (--optimize-alpha)")
        if self.scale_docs is not None:  # None: settled when the corpus is known (settle_scale_docs)
            check_integer(self.scale_docs, "--scale-docs", 0, MAX_COUNT, "the number of documents")
            if self.scale_docs > 0 and not self.optimize_alpha:
                raise OptionError("--scale-docs applies to a learned alpha (--optimize-alpha)")
        step = self.step
        step.validate(self.n_topics)
        if self.optimize_alpha and not step.learns_alpha:
            raise OptionError(f"--optimize-alpha: {step.describe()} {step.alpha_refusal}; use --local-step gibbs, "
                             "vb or lsparse")
        if self.optimize_eta and step.beta_estimate != "mean":
            raise OptionError(f"--optimize-eta: {step.describe()} reads the geometric estimate of beta, which "
                             "underflows as eta falls (below 0.005) and is not the Polya likelihood the update "
                             "maximises; use the mean estimate (--local-step gibbs)")
        if self.optimize_eta and not step.learns_eta:
            raise OptionError(f"--optimize-eta: {step.describe()} has expected topic-word counts, not the integer "
                             "counts of a sweep whose Polya likelihood the update maximises; use --local-step gibbs")
        if step.beta_estimate == "geometric" and self.eta < MIN_GEOMETRIC_ETA:
            raise OptionError(f"--eta must be at least {MIN_GEOMETRIC_ETA:g} with the geometric estimate of beta "
                             f"(--local-step {self.local_step}"
                             + (", --beta-estimate geometric" if "beta_estimate" in self.step_options else "")
                             + f"), whose e^psi(eta) underflows to 0 below that (got {self.eta:g})")
        parse_interval(self.checkpoint_every, flag="--checkpoint-every")
        parse_interval(self.heldout_every, "held-out interval", flag="--heldout-every")


def learning_rate(step: int, tau0: float, kappa: float) -> float:
    """rho_t = (tau0 + t)^-kappa for steps t = 1, 2, ..."""
    return float((tau0 + step) ** -kappa)


def recorded_settings(record: dict, path) -> TrainSettings:
    """The settings of a run as its settings.json (`path`, named in errors) records them: a key
    train does not write or a value out of its range is that file damaged (exit 1), not a mistyped
    option (exit 2)."""
    try:
        settings = _recorded_settings(record)
        settings.validate()
        return settings
    except (TypeError, ValueError) as e:  # OptionError is a ValueError
        raise ValueError(f"{path} is damaged: {e}") from None


def _recorded_settings(record: dict) -> TrainSettings:
    settings = dict(record["settings"])
    settings.setdefault("optimize_alpha", False)  # a run started before priors could be learned keeps its alpha
    settings.setdefault("optimize_passes", 0.0)  # and one started before their rate was capped, its rate
    if settings["optimize_alpha"]:
        settings.setdefault("min_alpha_sum", 0.0)  # and one started before the floor, none
    settings.setdefault("scale_docs", 0)  # and one started before alpha's scale was fitted, its alpha as learned
    if "step_options" not in settings:
        raise ValueError("the run was started by an earlier bigtopics (its settings.json has no step_options); "
                         "start it again with this version")
    step_options = dict(settings["step_options"])
    if settings.get("local_step", "gibbs") == "gibbs" and step_options.get("sampler") != "mh":
        # a run started when every gibbs sampler recorded --mh-steps' default, which only mh takes
        step_options.pop("mh_steps", None)
    return TrainSettings(**{**settings, "step_options": step_options})
