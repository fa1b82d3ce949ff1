"""Learned priors: an asymmetric document-topic alpha_k and a symmetric topic-word eta
(`train --optimize-alpha`, `--optimize-eta`; docs/algorithms.md, "Learned priors").

Both are fitted by Minka's fixed point for the Polya (Dirichlet-multinomial) likelihood of
counts, as MALLET's `--optimize-interval` does (Wallach, Mimno & McCallum 2009; kernels/
dirichlet.py), on the integer counts of a Gibbs sweep, as MALLET's sampling state: every
`optimize_every` minibatches, once `optimize_burn_in` minibatches have passed, the minibatch's
last saved sweep gives each document's topic counts n_dk (the draws for alpha) and each topic's
word counts n_kw over the minibatch (the draws for eta). The fixed point is iterated to
convergence on those counts (MAX_ITERATIONS, TOLERANCE), and the prior moves towards it by the
global step's rate, but no faster than `optimize_passes` (P) passes over the corpus:

    alpha <- (1 - r_t) alpha + r_t alpha*(minibatch),     r_t = min(rho_t, optimize_every |B| / (P D))

and eta alike, so the priors are an exponential average of the minibatches' estimates with a
memory of at least about P passes, where MALLET and tomotopy fit them to every document's
counts. P is 1 for runs of more than one epoch: at the table's own rate (rho_t, whose memory is
a few tens of minibatches on a large corpus) the prior and the still-blurred topics chased each
other over the passes (the fit to counts sampled under blurred topics is a little flatter than
the prior they were sampled with) and alpha_0 ran away. It is 0 (r_t = rho_t) for one epoch,
where alpha has to settle within the pass (docs/design.md, "Learned priors").

The learned alpha keeps at least the sum `min_alpha_sum` m (by default its start's, K alpha): when
the move leaves alpha_0 below m, alpha is scaled up to it, its shape kept. Then, wherever alpha_0
is, no alpha_k stays below MIN_TOPIC_SHARE m / K; m = 0 turns off both. The fit to the training
documents' counts is sparser than new documents need (topics fitted to those documents explain them
with fewer topics than they explain others); over many passes on short documents it fell far below
the prior that scores best on held-out documents, and the alpha_k of topics that no document drew
fell to MIN_PRIOR, where no document draws them again (docs/design.md, "Learned priors").

A variational local step has expected, not integer, document-topic counts, but each
document's q(theta_d) = Dirichlet(gamma_d): there alpha*(minibatch) is the maximum of the bound's
terms in alpha, the Dirichlet fixed point on the minibatch's mean of E[log theta_dk]
(stats.ExpectedLogTheta, kernels/dirichlet.py), moved towards in the same way.
docs/design.md, "Learned priors", has the measurements behind this form. An update depends only
on the priors and that minibatch, so the priors alone are the state a checkpoint keeps, and a
resumed run moves them exactly as the uninterrupted one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels.dirichlet import alpha_fixed_point, dirichlet_fixed_point, eta_fixed_point
from .options import MAX_PRIOR, MIN_PRIOR
from .stats import ExpectedLogTheta, PriorCounts

MAX_ITERATIONS = 50
TOLERANCE = 1e-5
MIN_TOPIC_SHARE = 0.01  # of the floor's mean alpha_k: a topic no document draws any more may come back


def histogram(values: np.ndarray, items: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """The distinct values (of each item, if given: (item, value) pairs) with how many times each
    occurs (float64), ascending."""
    values = np.asarray(values, np.int64)
    if items is None:
        distinct, weights = np.unique(values, return_counts=True)
        return distinct, weights.astype(np.float64)
    span = int(values.max(initial=0)) + 1
    keys, weights = np.unique(np.asarray(items, np.int64) * span + values, return_counts=True)
    return keys // span, keys % span, weights.astype(np.float64)


def alpha_histograms(counts: PriorCounts) -> tuple[np.ndarray, ...]:
    """(topic, count, weight) of the documents' n_dk and (length, weight) of their N_d > 0."""
    n_docs = len(counts.doc_sizes)
    lengths = np.bincount(np.repeat(np.arange(n_docs), counts.doc_sizes), weights=counts.doc_counts, minlength=n_docs)
    return (*histogram(counts.doc_counts, counts.doc_topics), *histogram(lengths[lengths > 0]))


def eta_histograms(counts: PriorCounts, n_topics: int) -> tuple[np.ndarray, ...]:
    """(count, weight) of the topics' n_kw > 0 and (total, weight) of their N_k > 0."""
    totals = np.bincount(counts.word_topic_keys % n_topics, weights=counts.word_topic_counts, minlength=n_topics)
    return (*histogram(counts.word_topic_counts), *histogram(totals[totals > 0]))


def floored(alpha: np.ndarray, min_sum: float) -> np.ndarray:
    """alpha scaled up to sum min_sum if it sums to less (its shape kept), then each alpha_k raised
    to at least MIN_TOPIC_SHARE of the floor's mean, min_sum / K (module docstring)."""
    total = alpha.sum()
    if total < min_sum:
        alpha = np.clip(alpha * (min_sum / total), MIN_PRIOR, MAX_PRIOR)
    return np.maximum(alpha, MIN_TOPIC_SHARE * min_sum / len(alpha))


@dataclass
class LearnedPriors:
    """The run's priors as they move (module docstring): alpha (K values) when learned, else None
    for the settings' fixed symmetric alpha; eta; the number of updates taken."""

    alpha: np.ndarray | None
    eta: float
    updates: int = 0

    @classmethod
    def start(cls, settings) -> LearnedPriors:
        return cls(np.full(settings.n_topics, float(settings.alpha)) if settings.optimize_alpha else None,
                   float(settings.eta))

    def current_alpha(self, settings):
        """What the kernels take: K values once learned, else (before the first update too) the
        settings' number, so that a run shorter than its burn-in is the run without learning."""
        return settings.alpha if self.alpha is None or self.updates == 0 else self.alpha

    @staticmethod
    def updates_after(settings, step: int) -> bool:
        """Whether the priors move after minibatch `step` (1, 2, ...), from its counts."""
        return (settings.optimize_alpha or settings.optimize_eta) and step > settings.optimize_burn_in and (
            step - settings.optimize_burn_in) % settings.optimize_every == 0

    @staticmethod
    def counts_needed(settings) -> tuple[str, ...]:
        """The parts of a sweep's counts (stats.PriorCounts) an update reads: "documents" always
        (cheap), "words" for eta."""
        return ("documents", "words") if settings.optimize_eta else ("documents",)

    @staticmethod
    def rate(settings, rho: float, batch_docs: int, corpus_docs: int) -> float:
        """The rate a minibatch's estimate moves the priors by: the global step's rho_t, at most
        the share of `optimize_passes` passes sampled since the last update (module docstring)."""
        if settings.optimize_passes == 0:
            return rho
        return min(rho, settings.optimize_every * batch_docs / (settings.optimize_passes * corpus_docs))

    def update(self, settings, counts: PriorCounts | ExpectedLogTheta, n_words: int, rho: float) -> None:
        """Move the priors towards the fixed point of a minibatch's counts (or E[log theta]) by
        rho (the rate(); tests pass their own)."""
        if settings.optimize_alpha and isinstance(counts, ExpectedLogTheta):
            target = dirichlet_fixed_point(counts.sums / max(counts.n_docs, 1), self.alpha, MIN_PRIOR, MAX_PRIOR,
                                           MAX_ITERATIONS, TOLERANCE)
            self.alpha = np.clip((1.0 - rho) * self.alpha + rho * target, MIN_PRIOR, MAX_PRIOR)
        elif settings.optimize_alpha:
            target = alpha_fixed_point(*alpha_histograms(counts), self.alpha, MIN_PRIOR, MAX_PRIOR, MAX_ITERATIONS,
                                       TOLERANCE)
            self.alpha = np.clip((1.0 - rho) * self.alpha + rho * target, MIN_PRIOR, MAX_PRIOR)
        if settings.optimize_alpha and settings.min_alpha_sum:
            self.alpha = floored(self.alpha, settings.min_alpha_sum)
        if settings.optimize_eta:
            target = eta_fixed_point(*eta_histograms(counts, settings.n_topics), n_words, self.eta, MIN_PRIOR,
                                     MAX_PRIOR, MAX_ITERATIONS, TOLERANCE)
            self.eta = float(min(max((1.0 - rho) * self.eta + rho * target, MIN_PRIOR), MAX_PRIOR))
        self.updates += 1

    # -- checkpoints -----------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        return {} if self.alpha is None else {"prior_alpha": self.alpha}

    def scalars(self) -> dict:
        return {"eta": self.eta, "updates": self.updates}

    @classmethod
    def from_checkpoint(cls, settings, scalars: dict | None, arrays: dict) -> LearnedPriors:
        """The priors a checkpoint holds (None: one written before priors could be learned)."""
        if scalars is None:
            return cls.start(settings)
        return cls(arrays.get("prior_alpha"), scalars["eta"], scalars["updates"])

    @staticmethod
    def check(settings, scalars, arrays: dict) -> None:
        """ValueError unless a checkpoint's priors can be this run's."""
        if scalars is None and not (settings.optimize_alpha or settings.optimize_eta):
            return
        if not (isinstance(scalars, dict) and set(scalars) == {"eta", "updates"} and isinstance(scalars["eta"], float)
                and MIN_PRIOR <= scalars["eta"] <= MAX_PRIOR and type(scalars["updates"]) is int
                and scalars["updates"] >= 0):
            raise ValueError(f"learned priors of impossible values ({scalars})")
        if settings.optimize_alpha:
            a = arrays.get("prior_alpha")
            if a is None or a.dtype != np.float64 or a.shape != (settings.n_topics,) or not (
                    (a >= MIN_PRIOR) & (a <= MAX_PRIOR)).all():
                raise ValueError(f"the learned alpha is not {settings.n_topics} float64 values in range")
