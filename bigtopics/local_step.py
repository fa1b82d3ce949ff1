"""The local step: per-document inference for one minibatch with the topics held fixed.

`gibbs_local_step` is a pure function of (the minibatch's documents, a frozen read-only view of
the topic-word statistics restricted to the minibatch's words, per-document seeds) and returns
sparse sufficient statistics. It has no hidden state, so the same call can run on the workers of
a distributed engine that read the store from shared storage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .kernels.alias_gibbs import alias_view, sample_minibatch as alias_sample_minibatch
from .kernels.frozen import freeze_table_rows, index_rows
from .kernels.gibbs import _sample_minibatch
from .kernels.ranges import even_ranges
from .kernels.rng import stream_seeds
from .kernels.sparse_stats import merge_pairs
from .kernels.special import exp_digamma, exp_digamma_array


@dataclass
class Minibatch:
    """Documents of one minibatch: global document numbers and their rows (global word ids)."""

    doc_numbers: np.ndarray  # int64 (n_docs,), position of each document in the store
    indptr: np.ndarray  # int64 (n_docs + 1,)
    words: np.ndarray  # word ids of the entries
    counts: np.ndarray  # counts of the entries
    # computed on first use (token_starts, distinct_words): several steps of a minibatch ask
    _token_starts: np.ndarray | None = field(default=None, repr=False, compare=False)
    _distinct_words: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def n_docs(self) -> int:
        return len(self.doc_numbers)

    @property
    def n_tokens(self) -> int:
        return int(self.counts.sum(dtype=np.int64))

    def token_starts(self) -> np.ndarray:
        """Where each document's tokens start in the batch's token order (entries' words
        repeated by their counts), int64 (n_docs + 1,); computed once."""
        if self._token_starts is None:
            entry_tokens = np.concatenate([[0], np.cumsum(self.counts, dtype=np.int64)])
            self._token_starts = entry_tokens[self.indptr]
        return self._token_starts

    def distinct_words(self) -> np.ndarray:
        """The batch's word ids, each once, ascending (O(entries + largest id), no sort; computed once)."""
        if self._distinct_words is None:
            self._distinct_words = (np.flatnonzero(np.bincount(self.words)).astype(np.int64) if len(self.words)
                                    else np.zeros(0, np.int64))
        return self._distinct_words

    def doc_seeds(self, seed: int, epoch: int) -> np.ndarray:
        """One random stream per document, fixed by (seed, epoch, document number)."""
        return stream_seeds(np.uint64(seed), np.uint64(epoch), self.doc_numbers.astype(np.uint64))


@dataclass
class SparseStats:
    """Minibatch sufficient statistics Nhat[k, w], one entry per distinct (word, topic)."""

    words: np.ndarray  # int64 global word ids
    topics: np.ndarray  # int64
    values: np.ndarray  # float64
    # Gibbs: each document's saved assignments (DocumentTallies.assignments), for exclude_own
    assignments: np.ndarray | None = None


BETA_ESTIMATES = ("mean", "geometric")


@dataclass
class FrozenTopics:
    """An estimate of beta[k, w] for the words of one minibatch, split as smoothing[k] + coef[k, w]
    (kernels/frozen.py): the mean (eta + N[k,w]) / (V eta + N[k]) or the geometric mean
    e^psi(eta + N[k,w]) / e^psi(V eta + N[k]) of q(beta_k) = Dirichlet(eta + N[k]).

    Row r describes word `words[r]`: topics row_topics[row_indptr[r]:row_indptr[r+1]] (those with
    N[k, w] > 0) and their coef; smoothing is dense over topics.
    """

    words: np.ndarray  # int64 global word ids, ascending
    row_indptr: np.ndarray
    row_topics: np.ndarray  # int32
    row_coef: np.ndarray  # float64
    smoothing: np.ndarray  # float64 (K,)
    _view: tuple | None = field(default=None, repr=False, compare=False)
    _alias_view: tuple | None = field(default=None, repr=False, compare=False)

    def kernel_view(self) -> tuple:
        """The tuple the sampler kernels take (kernels/frozen.py, kernels/gibbs.py), built on first use."""
        if self._view is None:
            row_coef_cumsum, *index = index_rows(self.row_indptr, self.row_topics, self.row_coef)
            self._view = self._with_index(row_coef_cumsum, (*index, np.ones(self.n_topics)))
        return self._view

    def _with_index(self, row_coef_cumsum, index) -> tuple:
        return (self.row_indptr, self.row_topics, self.row_coef, row_coef_cumsum,
                self.smoothing, np.cumsum(self.smoothing), *index)

    def alias_view(self) -> tuple:
        """The tuple the alias samplers take (see kernels/alias_gibbs.py), built on first use."""
        if self._alias_view is None:
            self._alias_view = alias_view(self.row_indptr, self.row_topics, self.row_coef, self.smoothing,
                                          self.kernel_view()[6:])
        return self._alias_view

    @classmethod
    def from_table(cls, table, words: np.ndarray, eta: float, estimate: str = "mean") -> "FrozenTopics":
        """Freeze `table` (a TopicWordTable) for the given ascending word ids in one parallel pass
        over its rows (kernels/frozen.py). For the mean estimate the lookups read the table's own
        slots, so the result is valid only until the table next changes, and it holds the whole
        table: to ship a view to another process or machine, build it with from_rows, whose
        index covers the minibatch's words alone."""
        words = table._check_ids(words, table.n_words, "word")
        smoothing, topic_norm = _smoothing(table.topic_totals(), eta, table.n_words, estimate)
        geometric = estimate == "geometric"
        topic_scale = 1.0 / topic_norm if geometric else table.pi / topic_norm
        row_start, row_capacity, row_size, pool_topics, pool_values = table.row_arrays()
        row_indptr, row_topics, row_coef, row_coef_cumsum = freeze_table_rows(
            words, table.pi, float(eta), geometric, topic_scale, row_start, row_capacity, row_size, pool_topics,
            pool_values)
        frozen = cls(words, row_indptr, row_topics, row_coef, smoothing)
        if not geometric:
            index = (row_start[words], row_capacity[words].astype(np.int64), pool_topics, pool_values, topic_scale)
            frozen._view = frozen._with_index(row_coef_cumsum, index)
        return frozen

    @classmethod
    def from_rows(cls, words, row_indptr, row_topics, values, topic_totals, eta, n_words,
                  estimate: str = "mean") -> "FrozenTopics":
        """Freeze CSR rows of N (ascending word ids `words`) given the topic totals N[k]."""
        smoothing, topic_norm = _smoothing(topic_totals, eta, n_words, estimate)
        row_topics = np.asarray(row_topics, np.int32)
        values = np.asarray(values, np.float64)
        if estimate == "geometric":
            values = exp_digamma_array(values + eta) - exp_digamma(float(eta))
        return cls(np.asarray(words, np.int64), np.asarray(row_indptr, np.int64), row_topics,
                   values / topic_norm[row_topics], smoothing)

    @property
    def n_topics(self) -> int:
        return len(self.smoothing)

    def local_ids(self, words: np.ndarray) -> np.ndarray:
        """The row of each of the given word ids (all must be among `self.words`), as int32."""
        return local_ids(self.words, words)


def local_ids(distinct_words: np.ndarray, words: np.ndarray) -> np.ndarray:
    """The position of each of `words` in `distinct_words` (ascending; must hold them all), int32."""
    if len(distinct_words) == 0:
        return np.zeros(len(words), np.int32)
    row_of = np.zeros(int(distinct_words[-1]) + 1, np.int32)
    row_of[distinct_words] = np.arange(len(distinct_words), dtype=np.int32)
    return row_of[words]


def _smoothing(topic_totals, eta: float, n_words: int, estimate: str) -> tuple[np.ndarray, np.ndarray]:
    """(smoothing, topic_norm) of the estimate (FrozenTopics)."""
    if estimate not in BETA_ESTIMATES:
        raise ValueError(f"unknown estimate of beta {estimate!r}; choose one of {', '.join(BETA_ESTIMATES)}")
    norm = np.asarray(topic_totals, np.float64) + n_words * eta
    if estimate == "geometric":
        norm = exp_digamma_array(norm)
        return exp_digamma(float(eta)) / norm, norm
    return eta / norm, norm


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
    alpha: float,
    burnin: int,
    samples: int,
    sampler: str = "buckets",
    mh_steps: int = 2,
    n_workers: int = 1,
) -> DocumentTallies:
    """Sparse Gibbs sampling of every document of the batch.

    The sampler draws each topic from the four buckets (kernels/gibbs.py), exactly with alias
    tables ("alias") or by mh_steps Metropolis-Hastings steps with alias proposals ("mh"; both in
    kernels/alias_gibbs.py). Documents are split into n_workers contiguous ranges of about equal
    token counts, each sampled by one numba thread; every document has its own random stream and
    its own output slot, so the result does not depend on n_workers.
    """
    if samples < 1:
        raise ValueError("samples must be at least 1")
    if sampler not in ("buckets", "alias", "mh"):
        raise ValueError(f"unknown sampler {sampler!r}")
    if sampler == "mh" and mh_steps < 1:
        raise ValueError("mh_steps must be at least 1")
    local_words = frozen.local_ids(batch.words)
    counts = np.asarray(batch.counts, np.int32)
    token_starts = batch.token_starts()
    doc_tokens = np.diff(token_starts)
    total = int(token_starts[-1])
    worker_bounds = even_ranges(token_starts, n_workers)
    row_lengths = np.diff(frozen.row_indptr)
    out_words = np.empty(total * samples, np.int32)
    out_topics = np.empty(total * samples, np.int32)
    out_counts = np.empty(total * samples, np.int32)
    out_n_pairs = np.zeros(batch.n_docs, np.int64)
    out_saved = np.empty(total * samples, np.int32)
    seeds = np.asarray(doc_seeds, np.uint64)
    max_doc_tokens = int(doc_tokens.max(initial=1))
    if sampler == "buckets":
        _sample_minibatch(
            batch.indptr, local_words, counts, token_starts, seeds, worker_bounds, float(alpha), int(burnin),
            int(samples), max_doc_tokens, int(row_lengths.max(initial=1)), frozen.kernel_view(), out_words,
            out_topics, out_counts, out_n_pairs, out_saved,
        )
    else:
        alias_sample_minibatch(
            batch.indptr, local_words, counts, token_starts, seeds, worker_bounds, float(alpha), int(burnin),
            int(samples), int(mh_steps) if sampler == "mh" else 0, max_doc_tokens, frozen.alias_view(),
            out_words, out_topics, out_counts, out_n_pairs, out_saved,
        )
    return DocumentTallies(out_words, out_topics, out_counts, token_starts[:-1] * samples, out_n_pairs, samples,
                           out_saved)


def gibbs_local_step(
    batch: Minibatch,
    frozen: FrozenTopics,
    doc_seeds: np.ndarray,
    *,
    alpha: float,
    burnin: int,
    samples: int,
    sampler: str = "buckets",
    mh_steps: int = 2,
    n_workers: int = 1,
) -> SparseStats:
    """The hybrid algorithm's local step: Nhat from sparse Gibbs sampling (algorithms.md, 1)."""
    tallies = gibbs_sample(batch, frozen, doc_seeds, alpha=alpha, burnin=burnin, samples=samples,
                           sampler=sampler, mh_steps=mh_steps, n_workers=n_workers)
    words, topics, counts = merge_pairs(tallies.words, tallies.topics, tallies.counts, tallies.starts,
                                        tallies.sizes, len(frozen.words), frozen.n_topics)
    return SparseStats(frozen.words[words], topics, counts / samples, tallies.assignments)
