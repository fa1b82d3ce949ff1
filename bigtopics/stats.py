"""Minibatch statistics as local steps return them and the global step takes them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .frozen import local_ids
from .kernels.sparse_stats import merge_pairs


@dataclass
class SparseStats:
    """Minibatch sufficient statistics Nhat[k, w], one entry per distinct (word, topic)."""

    words: np.ndarray  # int64 global word ids
    topics: np.ndarray  # int64
    values: np.ndarray  # float64


@dataclass
class StepResult:
    """What a local step returns for some documents: distinct (word id, topic) pairs with the sums
    behind Nhat = sums / divisor, and, for a step that keeps assignments (gibbs with exclude-own),
    each token's topic in its last saved sweep, document after document."""

    words: np.ndarray  # int64 global word ids, grouped by word in ascending order
    topics: np.ndarray  # int64
    sums: np.ndarray  # float64
    divisor: int = 1
    last_sweep: np.ndarray | None = None

    def stats(self) -> SparseStats:
        return SparseStats(self.words, self.topics, self.sums / self.divisor)

    @property
    def nbytes(self) -> int:
        arrays = (self.words, self.topics, self.sums) + ((self.last_sweep,) if self.last_sweep is not None else ())
        return int(sum(a.nbytes for a in arrays))


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
    return StepResult(distinct[merged_words], topics, sums, results[0].divisor,
                      None if last[0] is None else np.concatenate(last))
