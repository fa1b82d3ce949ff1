"""The learned alpha's scale for new documents (`train --scale-docs`; docs/design.md, "Learned
priors": why a scale for new documents).

The learned alpha_k are fitted to the training documents' sampled counts, and topics fitted to
those documents explain them with fewer topics than they explain new ones; the floor under the
fit's sum (priors.py) holds it up by a rule of thumb. The shape is the counts', but the sum new
documents need depends on the corpus, K and how long the run has trained. So the model keeps the
training alpha's shape and takes its scale from documents the run keeps out of training: the
factor c that maximises their left-to-right log-likelihood (Wallach et al. 2009, without
resampling),

    c* = argmax_c  sum_d log p(w_d | c alpha, phi),

an estimate of the new documents' marginal likelihood, so c* alpha is the type-II maximum
likelihood prior of that one number with the topics phi fixed. c runs over powers of 2 from
1/8 to 8, and on by doubling (halving) while the best is the largest (smallest) tried, up to
2^10 (2^-10); then over the two factors sqrt 2 either side of the best. Every factor scores the
same documents with the same random streams, so the comparison is between the factors and not
between the draws. The fit runs once, when the run reaches its end. `infer`, `evaluate` and the
exports read c* alpha as the model's alpha.
"""

from __future__ import annotations

import numpy as np

from .heldout import heldout_loglik
from .minibatch import Minibatch
from .options import MAX_PRIOR, MIN_PRIOR

COARSE_STEPS = np.arange(-6, 7, 2)  # factors sqrt(2)^j: 1/8 .. 8, widened while the best is on an edge
MAX_STEPS = 20  # up to 2^10 either way
PARTICLES = 5
SCALE_STREAM = 0x5CA1E  # the draw of the documents, apart from the held-out ones'


def scale_documents(n_docs: int, n_scale: int, seed: int, heldout: np.ndarray) -> np.ndarray:
    """The document numbers kept out to fit the scale: a sample fixed by the seed, none of the
    held-out documents, ascending."""
    if n_scale <= 0:
        return np.zeros(0, np.int64)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, SCALE_STREAM])))
    drawn = rng.choice(n_docs, size=min(n_docs, n_scale + len(heldout)), replace=False)
    return np.sort(drawn[~np.isin(drawn, heldout)][:n_scale]).astype(np.int64)


def scaled_alpha(alpha: np.ndarray, factor: float) -> np.ndarray:
    """factor x alpha within the priors' bounds: the model's alpha, and what each factor is scored with."""
    return np.clip(factor * alpha, MIN_PRIOR, MAX_PRIOR)


def fit_alpha_scale(source, batch: Minibatch, alpha: np.ndarray, eta: float, seed: int, *,
                    particles: int = PARTICLES, n_workers: int = 1) -> tuple[float, dict[float, float]]:
    """(c*, {factor: log-likelihood per token}) of the documents in `batch` under the topics of
    `source` (module docstring). Factors are sqrt(2)^j for whole j, so that each is one number
    however it was reached."""
    scores: dict[int, float] = {}  # by j

    def score(j: int) -> None:
        if j not in scores:
            total, tokens = heldout_loglik(source, batch, alpha=scaled_alpha(alpha, 2.0 ** (j / 2)), eta=eta,
                                           seed=seed, method="left-to-right", particles=particles,
                                           resample=False, n_workers=n_workers)
            scores[j] = total / max(tokens, 1)

    for j in COARSE_STEPS:
        score(int(j))
    best = max(scores, key=scores.get)
    # the likelihood may still rise beyond the factors tried (on topics that share their words the
    # best was 8-16), so a best on the edge moves the edge
    while best in (min(scores), max(scores)) and abs(best) < MAX_STEPS:
        score(best + 2 if best == max(scores) else best - 2)
        best = max(scores, key=scores.get)
    for j in (best - 1, best + 1):
        if abs(j) <= MAX_STEPS:
            score(j)
    best = max(scores, key=scores.get)  # on a tie the earlier scored, so the choice is the same every run
    return 2.0 ** (best / 2), {2.0 ** (j / 2): scores[j] for j in sorted(scores)}
