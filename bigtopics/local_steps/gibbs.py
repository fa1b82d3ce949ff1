"""The hybrid algorithm's local step: sparse Gibbs sampling of each document with the topics
frozen (Mimno, Hoffman & Blei 2012; docs/algorithms.md, section 1).

Each token's topic is drawn exactly from its conditional word by word across the minibatch's
documents ("word-major", kernels/word_major.py), from the bucket decomposition document by
document ("buckets", kernels/gibbs.py), exactly with alias tables ("alias"), or by
Metropolis-Hastings steps with alias proposals ("mh", kernels/alias_gibbs.py). After `burnin`
sweeps, `samples` sweeps are saved and Nhat[k, w] is the average of their counts. With
exclude-own the word-major sampler continues each document's chain from its previous visit
(--warm-start) instead of initialising it afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..assignments import topic_dtype
from ..frozen import BETA_ESTIMATES, FrozenTopics
from ..kernels.alias_gibbs import sample_minibatch as alias_sample_minibatch
from ..kernels.gibbs import _sample_minibatch
from ..kernels.pieces import document_piece_count
from ..kernels.ranges import even_ranges
from ..kernels.saved import store_last_sweep
from ..kernels.sparse_stats import merge_pairs
from ..kernels.word_major import sample_minibatch as word_major_sample_minibatch
from ..minibatch import Minibatch
from ..options import MAX_SWEEPS, check_integer
from ..stats import PriorCounts, StepResult
from .base import LocalStep, check, option

SAMPLERS = ("word-major", "buckets", "alias", "mh")
# word-major: the fastest exact sampler at every K measured (benchmarks/RESULTS.md, "One epoch at
# K = 100, 1000 and 2000"), and the one that continues chains (--warm-start)
DEFAULT_SAMPLER = "word-major"
# The order in which a document's tokens are first placed: "store" (ascending word id, so the most
# frequent words first) or "rare-first" (the reverse: on a corpus whose topics share their frequent
# words it recovered the topics better with a larger eta; benchmarks/RESULTS.md, "Topics that share
# their frequent words").
INIT_ORDERS = ("store", "rare-first")


@dataclass(frozen=True)
class SamplingDefaults:
    """The batch size and sweeps a run takes when they are not given."""

    batch_size: int
    burnin: int
    samples: int


# The defaults of a single pass and of a run that revisits its documents (exclude_own). A single
# pass: 3 + 3 sweeps, ahead of 2 + 2 at every budget and level with 4 + 4 per second. Revisiting
# documents without their own statistics: 4 + 8 sweeps (eight averaged: ahead of 4 + 4 by
# completion), and minibatches of up to 2048 documents (settings.revisit_batch_size: fewer in a run
# too short for enough updates), which average more of the corpus into each update
# (benchmarks/RESULTS.md, "Choosing the defaults").
ONE_PASS = SamplingDefaults(batch_size=1024, burnin=3, samples=3)
REVISITING = SamplingDefaults(batch_size=2048, burnin=4, samples=8)


@dataclass(frozen=True)
class GibbsStep(LocalStep):
    name = "gibbs"
    summary = "sparse hybrid Gibbs (the core paper's algorithm): sparse in K, the default"
    exact_merge = True

    sampler: str = option("how a topic is drawn: word by word over the minibatch's documents, bucket "
                          "decomposition document by document, alias tables, or Metropolis-Hastings with alias "
                          "proposals  [default: word-major]", choices=SAMPLERS)
    beta_estimate: str = option("the topic-word term of the conditional: the mean (eta + N_kw) / (V eta + N_k) "
                                "or the paper's exp(E[log beta_kw]) (docs/choosing-settings.md)  [default: mean]",
                                choices=BETA_ESTIMATES)
    mh_steps: int = option("mh: Metropolis-Hastings steps per token, alternately word and document proposals "
                           "(--sampler mh only)  [default: 2]")
    init_order: str = option("the order of the sequential initialisation: the store's (most frequent words "
                             "first) or rare-first  [default: store]", choices=INIT_ORDERS)
    burnin: int = option("sweeps discarded per document  [default: 3; 4 with --exclude-own]")
    samples: int = option("sweeps averaged per document  [default: 3; 8 with --exclude-own]")
    warm_start: bool = option(
        "with --exclude-own, start each document's chain on a revisit from its topics of the previous visit (the "
        "saved assignments) instead of a new sequential initialisation (word-major only)  [default: on with "
        "--exclude-own and word-major]",
        flag="--warm-start/--cold-start")
    exclude_own: bool = option(
        "sample each minibatch against the topics without its documents' statistics from their previous visit, "
        "as a collapsed sampler leaves out the document it draws; keeps each document's assignments on disk "
        "(run/assignments/: 2 bytes per token)  [default: on when --epochs is above 1]",
        flag="--exclude-own/--include-own")

    def resolved(self, epochs: int) -> "GibbsStep":
        exclude_own = epochs > 1 if self.exclude_own is None else bool(self.exclude_own)
        defaults = REVISITING if exclude_own else ONE_PASS
        sampler = self.sampler or DEFAULT_SAMPLER
        return replace(self, sampler=sampler, beta_estimate=self.beta_estimate or "mean",
                       # only the mh sampler takes steps; another keeps None, or what was given (refused)
                       mh_steps=2 if self.mh_steps is None and sampler == "mh" else self.mh_steps,
                       init_order=self.init_order or "store",
                       burnin=defaults.burnin if self.burnin is None else self.burnin,
                       samples=defaults.samples if self.samples is None else self.samples, exclude_own=exclude_own,
                       warm_start=(exclude_own and sampler == "word-major") if self.warm_start is None
                       else bool(self.warm_start))

    def validate(self, n_topics: int) -> None:
        check(self.sampler in SAMPLERS,
              f"--sampler: unknown sampler {self.sampler!r}; choose one of {', '.join(SAMPLERS)}")
        check(self.beta_estimate in BETA_ESTIMATES, f"--beta-estimate: unknown estimate of beta "
              f"{self.beta_estimate!r}; choose one of {', '.join(BETA_ESTIMATES)}")
        check(self.init_order in INIT_ORDERS,
              f"--init-order: unknown order {self.init_order!r}; choose one of {', '.join(INIT_ORDERS)}")
        if self.sampler == "mh":
            check_integer(self.mh_steps, "--mh-steps", 1, MAX_SWEEPS)
        else:
            check(self.mh_steps is None, f"--mh-steps applies to --sampler mh, not {self.sampler} (got --mh-steps "
                                         f"{self.mh_steps})")
        check_integer(self.burnin, "--burnin", 0, MAX_SWEEPS)
        check_integer(self.samples, "--samples", 1, MAX_SWEEPS)
        check(isinstance(self.exclude_own, bool), f"exclude_own must be True or False (got {self.exclude_own!r})")
        check(not self.warm_start or self.exclude_own,
              "--warm-start continues each document's chain from its previous visit, which only --exclude-own keeps "
              "(on by default with --epochs above 1; give --exclude-own, or more epochs)")
        check(not self.warm_start or self.sampler == "word-major",
              f"--warm-start: the {self.sampler} sampler starts every chain afresh; use --sampler word-major")

    @property
    def keeps_assignments(self) -> bool:
        return bool(self.exclude_own)

    def default_eta(self) -> float:
        """Gibbs steps on exp(E[log beta]) need eta near 0.5: e^psi(x) is explosive near 0, so a
        small eta lets the first topic that samples a word keep it (Mimno et al. 2012 found 0.4-0.6
        best). With the mean of beta a small eta is right, as in MALLET, tomotopy and gensim."""
        return 0.5 if self.beta_estimate == "geometric" else 0.01

    @property
    def continues_chains(self) -> bool:
        return bool(self.warm_start)

    @property
    def learns_alpha(self) -> bool:
        return True

    @property
    def learns_eta(self) -> bool:
        return self.beta_estimate == "mean"

    @property
    def learns_alpha_by_default(self) -> bool:
        # not mh: its slowly mixing sweeps look less sparse, and the alpha fitted to them grew and
        # cost coherence (benchmarks/RESULTS.md, "Learned priors")
        return self.sampler in ("word-major", "buckets", "alias")

    def describe(self) -> str:
        return f"--local-step gibbs --sampler {self.sampler}"

    def run(self, batch: Minibatch, frozen: FrozenTopics, doc_seeds: np.ndarray, *, alpha: float | np.ndarray,
            n_workers: int, prior_counts: tuple[str, ...] = (), previous_topics: np.ndarray | None = None
            ) -> StepResult:
        tallies = gibbs_sample(batch, frozen, doc_seeds, alpha=alpha, burnin=self.burnin, samples=self.samples,
                               sampler=self.sampler, mh_steps=self.mh_steps, rare_first=self.init_order == "rare-first",
                               n_workers=n_workers, initial=previous_topics)
        words, topics, counts = merge_pairs(tallies.words, tallies.topics, tallies.counts, tallies.starts,
                                            tallies.sizes, len(frozen.words), frozen.n_topics)
        last_sweep = counted = None
        if self.exclude_own or prior_counts:
            token_starts = batch.token_starts()
            last_sweep = np.empty(int(token_starts[-1]), topic_dtype(frozen.n_topics))
            store_last_sweep(tallies.assignments, token_starts, self.samples, last_sweep, token_starts[:-1])
            if prior_counts:
                token_words = np.repeat(batch.words, batch.counts) if "words" in prior_counts else None
                counted = PriorCounts.of_sweep(np.diff(token_starts), token_words, last_sweep, frozen.n_topics)
        return StepResult(frozen.words[words], topics, counts.astype(np.float64), self.samples,
                          last_sweep if self.exclude_own else None, counted)


@dataclass
class DocumentTallies:
    """Per-document Gibbs tallies: document d's (word, topic, count) triples are the segment
    [starts[d], starts[d] + sizes[d]) of words (indices into FrozenTopics.words; word ids when
    they come from assignments.SavedAssignments), topics and
    counts; a count is the number of (token, saved sweep) assignments, so it sums to
    samples * doc_length over a document. assignments[starts[d]: starts[d] + samples * doc_length]
    are the document's saved topics, sweep by sweep, each sweep its tokens in order."""

    words: np.ndarray
    topics: np.ndarray
    counts: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray
    samples: int
    assignments: np.ndarray | None = None


def gibbs_sample(
    batch: Minibatch,
    frozen: FrozenTopics,
    doc_seeds: np.ndarray,
    *,
    alpha: float | np.ndarray,
    burnin: int,
    samples: int,
    sampler: str = DEFAULT_SAMPLER,
    mh_steps: int = 2,
    rare_first: bool = False,
    n_workers: int = 1,
    initial: np.ndarray | None = None,
) -> DocumentTallies:
    """Sparse Gibbs sampling of every document of the batch.

    alpha is a number (symmetric) or one per topic (asymmetric; kernels/prior.py). The sampler draws
    each topic word by word ("word-major", kernels/word_major.py), from the buckets
    (kernels/gibbs.py), exactly with alias tables ("alias") or by mh_steps Metropolis-Hastings steps
    with alias proposals ("mh"; both in kernels/alias_gibbs.py). Documents are cut into contiguous
    pieces of about equal token counts, a few per thread (n_workers), which the threads take as they come
    free (kernels/pieces.py); every document has its own random stream and its own output slot, so
    the result does not depend on n_workers.
    With rare_first each document's initialisation places its tokens from the last (rarest word) to
    the first. A document whose tokens have topics in `initial` (int32, the batch's tokens in order,
    -1 for a document without) starts its chain from them and skips the initialisation.
    """
    if samples < 1:
        raise ValueError("samples must be at least 1")
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}")
    if sampler == "mh" and mh_steps < 1:
        raise ValueError("mh_steps must be at least 1")
    local_words = frozen.local_ids(batch.words)
    counts = np.asarray(batch.counts, np.int32)
    token_starts = batch.token_starts()
    doc_tokens = np.diff(token_starts)
    total = int(token_starts[-1])
    worker_bounds = even_ranges(token_starts, document_piece_count(n_workers))
    row_lengths = np.diff(frozen.row_indptr)
    out_words = np.empty(total * samples, np.int32)
    out_topics = np.empty(total * samples, np.int32)
    out_counts = np.empty(total * samples, np.int32)
    out_n_pairs = np.zeros(batch.n_docs, np.int64)
    out_saved = np.empty(total * samples, np.int32)
    seeds = np.asarray(doc_seeds, np.uint64)
    max_doc_tokens = int(doc_tokens.max(initial=1))
    initial = np.zeros(0, np.int32) if initial is None else np.ascontiguousarray(initial, np.int32)
    if len(initial) not in (0, total):
        raise ValueError(f"initial topics for {len(initial)} tokens, the batch has {total}")
    if len(initial) and sampler != "word-major":
        raise ValueError(f"--warm-start: the {sampler} sampler starts every chain afresh; use --sampler word-major")
    if sampler == "buckets":
        view, alpha = frozen.prior_view(alpha)
        _sample_minibatch(
            batch.indptr, local_words, counts, token_starts, seeds, worker_bounds, alpha, int(burnin),
            int(samples), bool(rare_first), max_doc_tokens, int(row_lengths.max(initial=1)), view, out_words,
            out_topics, out_counts, out_n_pairs, out_saved,
        )
    elif sampler == "word-major":
        view, alpha = frozen.prior_view(alpha)
        word_major_sample_minibatch(
            batch.indptr, local_words, counts, token_starts, seeds, worker_bounds, initial, alpha, int(burnin),
            int(samples), bool(rare_first), view, out_words, out_topics, out_counts, out_n_pairs, out_saved,
        )
    else:
        view, alpha = frozen.alias_prior_view(alpha)
        alias_sample_minibatch(
            batch.indptr, local_words, counts, token_starts, seeds, worker_bounds, alpha, int(burnin),
            int(samples), bool(rare_first), int(mh_steps) if sampler == "mh" else 0, max_doc_tokens,
            view, out_words, out_topics, out_counts, out_n_pairs, out_saved,
        )
    return DocumentTallies(out_words, out_topics, out_counts, token_starts[:-1] * samples, out_n_pairs, samples,
                           out_saved)
