"""Minibatch statistics as local steps return them and the global step takes them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .frozen import local_ids
from .kernels.dirichlet import doc_topic_counts
from .kernels.sparse_stats import merge_pairs


@dataclass
class SparseStats:
    """Minibatch sufficient statistics Nhat[k, w], one entry per distinct (word, topic)."""

    words: np.ndarray  # int64 global word ids
    topics: np.ndarray  # int64
    values: np.ndarray  # float64


@dataclass
class PriorCounts:
    """The integer counts of one Gibbs sweep (the last saved one) over some documents, as the
    learned priors read them (priors.py): each document's topic counts n_dk, as doc_sizes[d]
    consecutive (doc_topics, doc_counts) pairs, documents in order; and the counts n_kw summed
    over the documents, one per distinct (word, topic) key = word id * K + topic, ascending."""

    doc_sizes: np.ndarray  # int64
    doc_topics: np.ndarray  # int32
    doc_counts: np.ndarray  # int64
    word_topic_keys: np.ndarray  # int64
    word_topic_counts: np.ndarray  # int64

    @classmethod
    def of_sweep(cls, doc_tokens: np.ndarray, token_words: np.ndarray | None, token_topics: np.ndarray,
                 n_topics: int) -> PriorCounts:
        """From each token's topic (and word id), documents of doc_tokens[d] consecutive tokens;
        the word counts only if token_words is given (else empty)."""
        sizes, topics, counts = doc_topic_counts(np.asarray(doc_tokens, np.int64), token_topics, n_topics)
        keys, word_counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
        if token_words is not None:
            keys, word_counts = np.unique(np.asarray(token_words, np.int64) * n_topics + token_topics,
                                          return_counts=True)
        return cls(sizes, topics, counts, keys, word_counts.astype(np.int64))

    @classmethod
    def merge(cls, parts: list["PriorCounts"]) -> "PriorCounts":
        """The counts of consecutive shards' documents as one."""
        keys, where = np.unique(np.concatenate([p.word_topic_keys for p in parts]), return_inverse=True)
        counts = np.bincount(where, weights=np.concatenate([p.word_topic_counts for p in parts]), minlength=len(keys))
        return cls(*(np.concatenate([getattr(p, name) for p in parts]) for name in ("doc_sizes", "doc_topics",
                                                                                   "doc_counts")),
                   keys, counts.astype(np.int64))

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.doc_sizes, self.doc_topics, self.doc_counts, self.word_topic_keys, self.word_topic_counts


@dataclass
class ExpectedLogTheta:
    """What a variational step gives the learned alpha (priors.py) in place of counts: the sum over
    some documents of E[log theta_dk] = psi(gamma_dk) - psi(sum_k gamma_dk) under each
    document's Dirichlet(gamma_d), summed in document order, and how many documents."""

    sums: np.ndarray  # float64 (K,)
    n_docs: int

    @classmethod
    def of_documents(cls, log_theta: np.ndarray) -> ExpectedLogTheta:
        """From a documents x K array of E[log theta_dk], rows summed in order."""
        sums = np.zeros(log_theta.shape[1])
        for row in log_theta:
            sums += row
        return cls(sums, len(log_theta))

    @classmethod
    def merge(cls, parts: list[ExpectedLogTheta]) -> ExpectedLogTheta:
        """Consecutive shards' documents as one, summed in shard order."""
        sums = parts[0].sums.copy()
        for part in parts[1:]:
            sums += part.sums
        return cls(sums, sum(p.n_docs for p in parts))

    def arrays(self) -> tuple[np.ndarray, ...]:
        return (self.sums,)


@dataclass
class StepResult:
    """What a local step returns for some documents: distinct (word id, topic) pairs with the sums
    behind Nhat = sums / divisor, and, for a step that keeps assignments (gibbs with exclude-own),
    each token's topic in its last saved sweep, document after document; and for a step asked
    for them (learned priors, priors.py), the counts of that sweep (PriorCounts), or a
    variational step's E[log theta] (ExpectedLogTheta)."""

    words: np.ndarray  # int64 global word ids, grouped by word in ascending order
    topics: np.ndarray  # int64
    sums: np.ndarray  # float64
    divisor: int = 1
    last_sweep: np.ndarray | None = None
    prior_counts: PriorCounts | ExpectedLogTheta | None = None

    def stats(self) -> SparseStats:
        return SparseStats(self.words, self.topics, self.sums / self.divisor)

    def __reduce__(self):
        """Pickled (as Dask sends it between workers) with each entry's word, topic and sum in
        the narrowest type that holds them exactly, 10 bytes an entry where ids fit 32 and 16 bits
        and sums are counts, and read back as int64, int64, float64: the same values bit for bit."""
        return _from_wire, (narrowed(self.words), narrowed(self.topics), narrowed(self.sums), self.divisor,
                            self.last_sweep, self.prior_counts)

    @property
    def nbytes(self) -> int:
        arrays = (self.words, self.topics, self.sums) + ((self.last_sweep,) if self.last_sweep is not None else ()) \
            + (self.prior_counts.arrays() if self.prior_counts is not None else ())
        return int(sum(a.nbytes for a in arrays))


def narrowed(values: np.ndarray) -> np.ndarray:
    """`values` in the narrowest type that holds every one of them exactly: ids >= 0 as uint16 or
    uint32, floats as float32 where each is one (counts below 2^24 are)."""
    if not len(values):
        return values
    if values.dtype.kind in "iu" and values.min() >= 0:
        top = values.max()
        return values.astype(np.uint16) if top < 2**16 else values.astype(np.uint32) if top < 2**32 else values
    if values.dtype == np.float64:
        single = values.astype(np.float32)
        return single if np.array_equal(single, values) else values
    return values


def _from_wire(words, topics, sums, divisor, last_sweep, prior_counts) -> StepResult:
    return StepResult(words.astype(np.int64, copy=False), topics.astype(np.int64, copy=False),
                      sums.astype(np.float64, copy=False), divisor, last_sweep, prior_counts)


def merge_results(results: list[StepResult], n_topics: int, distinct: np.ndarray | None = None) -> StepResult:
    """The results of consecutive shards of a minibatch as one, summed in shard order: each
    word's topics in the order first met, as one call over the whole minibatch gives them.
    `distinct`: ascending word ids that hold all of the results' (else found here)."""
    if len(results) == 1:
        return results[0]
    words = np.concatenate([r.words for r in results])
    distinct = np.unique(words) if distinct is None else distinct
    sizes = np.array([len(r.words) for r in results], np.int64)
    merged_words, topics, sums = merge_pairs(local_ids(distinct, words), np.concatenate([r.topics for r in results]),
                                             np.concatenate([r.sums for r in results]),
                                             np.cumsum(sizes) - sizes, sizes, len(distinct), n_topics)
    last = [r.last_sweep for r in results]
    counts = [r.prior_counts for r in results]
    return StepResult(distinct[merged_words], topics, sums, results[0].divisor,
                      None if last[0] is None else np.concatenate(last),
                      None if counts[0] is None else type(counts[0]).merge(counts))


def slice_bounds(distinct: np.ndarray, n_slices: int) -> np.ndarray:
    """The first word id of slices 1..n_slices-1 of `distinct` (ascending word ids) cut into
    n_slices parts of (nearly) equal numbers of words: word w is in slice searchsorted(bounds, w,
    "right")."""
    n_slices = max(1, min(int(n_slices), len(distinct)))
    return np.asarray(distinct, np.int64)[[len(distinct) * s // n_slices for s in range(1, n_slices)]]


def split_by_words(result: StepResult, bounds: np.ndarray) -> list[StepResult]:
    """`result`'s (word, topic, sum) entries cut at the word ids `bounds` (slice_bounds): len(bounds)
    + 1 results, each the entries of its words in their order, without last_sweep or prior counts.
    Merging the shards' pieces of one slice (merge_results) gives that slice's words exactly as
    merging the whole shards does, since a word's entries merge by themselves, shard by shard;
    the merged slices concatenated in order are the merged minibatch (concatenated)."""
    cuts = [0, *np.searchsorted(result.words, bounds, "left"), len(result.words)]
    return [StepResult(result.words[lo:hi], result.topics[lo:hi], result.sums[lo:hi], result.divisor)
            for lo, hi in zip(cuts[:-1], cuts[1:])]


def concatenated(slices: list[StepResult]) -> StepResult:
    """Merged slices of a minibatch, in word order, as one result (its statistics only)."""
    return StepResult(*(np.concatenate([getattr(s, name) for s in slices]) for name in ("words", "topics", "sums")),
                      slices[0].divisor)
