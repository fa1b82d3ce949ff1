"""Learned priors: an asymmetric document-topic alpha_k and a symmetric topic-word eta
(`train --optimize-alpha`, `--optimize-eta`; docs/algorithms.md, "Learned priors").

Both follow Minka's fixed point for the Polya (Dirichlet-multinomial) likelihood of counts, as
MALLET's `--optimize-interval` does (Wallach, Mimno & McCallum 2009), on the counts of the last
saved Gibbs sweep of each minibatch (integers, as MALLET's sampling state), made stochastic like
the global step (docs/design.md says why this form):

- alpha: each document is one draw, its topic counts n_dk; eta: each topic is one draw, its
  word counts n_kw over the minibatch. The sums of kernels/dirichlet.py are gathered over the
  minibatches since the last update (all sampled with the current priors); every
  `optimize_every` minibatches, once `optimize_burn_in` minibatches have passed, one fixed-point
  step damped by the global step's rho_t moves each prior:

      alpha_k <- (1 - rho_t) alpha_k + rho_t alpha_k num_k / den        (eta alike)

  num_k = sum_d [psi(n_dk + alpha_k) - psi(alpha_k)], den = sum_d [psi(N_d + alpha_0) - psi(alpha_0)].
  The step's expected move is zero where the fixed point of the corpus's counts holds: num_k and
  den are sums over documents, so the minibatches estimate both up to the same factor.

The state (the priors and the sums gathered since the last update) is part of every checkpoint,
so a resumed run moves its priors exactly as the uninterrupted one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels.dirichlet import alpha_sums, eta_sums
from .settings import MAX_PRIOR, MIN_PRIOR
from .stats import PriorCounts

SCALARS = ("eta", "eta_numerator", "eta_denominator", "alpha_denominator", "docs_gathered", "updates")


def damped_step(value, numerator, denominator: float, rho: float):
    """(1 - rho) value + rho value numerator / denominator within [MIN_PRIOR, MAX_PRIOR]; the
    value as it is while nothing has been gathered (denominator 0)."""
    if not denominator > 0.0:
        return value
    return np.clip((1.0 - rho) * value + rho * value * (numerator / denominator), MIN_PRIOR, MAX_PRIOR)


@dataclass
class LearnedPriors:
    """The run's priors as they move (module docstring): alpha (K values) when learned, else
    None for the settings' fixed symmetric alpha; eta; and the sums gathered since the last
    update."""

    alpha: np.ndarray | None
    eta: float
    alpha_numerator: np.ndarray | None = None
    alpha_denominator: float = 0.0
    eta_numerator: float = 0.0
    eta_denominator: float = 0.0
    docs_gathered: int = 0
    updates: int = 0

    @classmethod
    def start(cls, settings) -> "LearnedPriors":
        k = settings.n_topics
        return cls(np.full(k, float(settings.alpha)) if settings.optimize_alpha else None, float(settings.eta),
                   np.zeros(k) if settings.optimize_alpha else None)

    def current_alpha(self, settings):
        """What the kernels take: K values when learned, else the settings' number."""
        return settings.alpha if self.alpha is None else self.alpha

    @staticmethod
    def gathers(settings, step: int) -> bool:
        """Whether minibatch `step` (1, 2, ...) contributes its counts."""
        return (settings.optimize_alpha or settings.optimize_eta) and step > settings.optimize_burn_in

    def gather(self, counts: PriorCounts, n_topics: int, n_words: int) -> None:
        """Add a minibatch's counts (sampled with the current priors) to the sums."""
        if self.alpha is not None:
            numerator, denominator = alpha_sums(counts.doc_sizes, counts.doc_topics, counts.doc_counts, self.alpha)
            self.alpha_numerator += numerator
            self.alpha_denominator += denominator
        totals = np.bincount(counts.word_topic_keys % n_topics, weights=counts.word_topic_counts, minlength=n_topics)
        numerator, denominator = eta_sums(counts.word_topic_counts, totals, n_words, self.eta)
        self.eta_numerator += numerator
        self.eta_denominator += denominator
        self.docs_gathered += len(counts.doc_sizes)

    def after_step(self, settings, step: int, rho: float) -> bool:
        """The update after minibatch `step`, when one is due; returns whether it was taken."""
        if step <= settings.optimize_burn_in or (step - settings.optimize_burn_in) % settings.optimize_every:
            return False
        if settings.optimize_alpha:
            self.alpha = damped_step(self.alpha, self.alpha_numerator, self.alpha_denominator, rho)
            self.alpha_numerator = np.zeros_like(self.alpha)
        if settings.optimize_eta:
            self.eta = float(damped_step(self.eta, self.eta_numerator, self.eta_denominator, rho))
        self.alpha_denominator = self.eta_numerator = self.eta_denominator = 0.0
        self.docs_gathered = 0
        self.updates += 1
        return True

    # -- checkpoints -----------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        return {} if self.alpha is None else {"prior_alpha": self.alpha, "prior_alpha_numerator": self.alpha_numerator}

    def scalars(self) -> dict:
        return {name: getattr(self, name) for name in SCALARS}

    @classmethod
    def from_checkpoint(cls, settings, scalars: dict | None, arrays: dict) -> "LearnedPriors":
        """The priors a checkpoint holds (None: one written before priors could be learned)."""
        if scalars is None:
            return cls.start(settings)
        return cls(arrays.get("prior_alpha"), alpha_numerator=arrays.get("prior_alpha_numerator"), **scalars)

    @staticmethod
    def check(settings, scalars, arrays: dict) -> None:
        """ValueError unless a checkpoint's priors can be this run's."""
        if scalars is None and not (settings.optimize_alpha or settings.optimize_eta):
            return
        if not (isinstance(scalars, dict) and set(scalars) == set(SCALARS)):
            raise ValueError("a manifest without the learned priors")
        if not all(isinstance(scalars[name], float) and np.isfinite(scalars[name]) for name in SCALARS[:4]) or not all(
                type(scalars[name]) is int and scalars[name] >= 0 for name in SCALARS[4:]):
            raise ValueError(f"learned priors of impossible values ({scalars})")
        if not MIN_PRIOR <= scalars["eta"] <= MAX_PRIOR:
            raise ValueError(f"a learned eta out of range ({scalars['eta']!r})")
        k = settings.n_topics
        if settings.optimize_alpha:
            for name in ("prior_alpha", "prior_alpha_numerator"):
                a = arrays.get(name)
                if a is None or a.dtype != np.float64 or a.shape != (k,) or not np.isfinite(a).all():
                    raise ValueError(f"{name} is not {k} finite float64 values")
            if not ((arrays["prior_alpha"] >= MIN_PRIOR) & (arrays["prior_alpha"] <= MAX_PRIOR)).all():
                raise ValueError("a learned alpha out of range")
