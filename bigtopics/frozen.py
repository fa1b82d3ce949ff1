"""Frozen views of the topics for one minibatch: what a local step reads while the table stays fixed.

`TableRows` is a self-contained copy of the topic-word table's rows for the minibatch's words
(slot for slot, kernels/rows.py) with the topic totals and the scale pi: picklable, small (it
grows with the rows of the minibatch's words, never with K x V), and what an executor ships to
its workers. Exclude-own is a subtraction on it (`without`), never on the live table.

`FrozenTopics` is the estimate of beta the samplers read, split as smoothing[k] + coef[k, w]
(kernels/frozen.py), built from TableRows (`TableRows.freeze`) or from the CSR rows of a model
(`FrozenTopics.from_rows`, `frozen_point_estimates`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .kernels.alias_gibbs import alias_view
from .kernels.frozen import freeze_table_rows, index_rows
from .kernels.rows import copy_segments
from .kernels.special import exp_digamma, exp_digamma_array
from .kernels.table import take_out


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


def frozen_point_estimates(source, words: np.ndarray, eta: float) -> FrozenTopics:
    """The sampler's frozen view of p(w | k) = (eta + N[k, w]) / (V eta + N[k]) for ascending word
    ids `words`.

    `source` is anything with rows(words), topic_totals() and n_words: a Model or the live
    TopicWordTable.
    """
    return FrozenTopics.from_rows(words, *source.rows(np.asarray(words, np.int64)), source.topic_totals(), eta,
                                  source.n_words, estimate="mean")


@dataclass
class TableRows:
    """The table's rows for ascending word ids `words`: row r is the hash segment
    [slot_start[r], slot_start[r] + slot_capacity[r]) of (slot_topics, slot_values), values
    M = N / pi as the table stores them, with row_size[r] entries; topic_sums is Msum (K,), and
    N[k, w] = pi * M, N[k] = pi * Msum[k] (topic_word.py)."""

    words: np.ndarray  # int64
    slot_start: np.ndarray  # int64 (n_rows + 1,)
    slot_capacity: np.ndarray  # int32
    row_size: np.ndarray  # int32
    slot_topics: np.ndarray  # int32
    slot_values: np.ndarray  # float64
    topic_sums: np.ndarray  # float64 (K,)
    pi: float
    n_words: int  # V, the vocabulary's size

    @classmethod
    def from_table(cls, table, words: np.ndarray) -> "TableRows":
        """Copy the rows of `table` (a TopicWordTable) for the given ascending word ids."""
        words = table._check_ids(words, table.n_words, "word")
        row_start, row_capacity, row_size, pool_topics, pool_values = table.row_arrays()
        capacity = row_capacity[words]
        slot_start, slot_topics, slot_values = copy_segments(row_start[words], capacity, pool_topics, pool_values)
        return cls(words, slot_start, capacity, row_size[words], slot_topics, slot_values,
                   table._topic_sums.copy(), float(table.pi), table.n_words)

    @property
    def n_topics(self) -> int:
        return len(self.topic_sums)

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.words, self.slot_start, self.slot_capacity, self.row_size,
                                          self.slot_topics, self.slot_values, self.topic_sums)))

    def topic_totals(self) -> np.ndarray:
        return self.pi * self.topic_sums

    def without(self, own) -> "TableRows":
        """These rows with the statistics `own` taken out, N <- max(N - own, 0) entry by entry and
        the topic totals less what was removed. `own` has distinct (word id, topic) pairs whose
        words are all among these rows' (assignments.SavedAssignments.previous_stats)."""
        values, topic_sums = self.slot_values.copy(), self.topic_sums.copy()
        n_pairs = len(own.words)
        slots, before = np.empty(n_pairs, np.int64), np.empty(n_pairs, np.float64)
        take_out(local_ids(self.words, own.words), own.topics, own.values / self.pi, self.slot_start,
                 self.slot_capacity, self.slot_topics, values, topic_sums, slots, before)
        return TableRows(self.words, self.slot_start, self.slot_capacity, self.row_size, self.slot_topics, values,
                         topic_sums, self.pi, self.n_words)

    def freeze(self, eta: float, estimate: str = "mean") -> FrozenTopics:
        """The estimate of beta for these rows (kernels/frozen.py); for the mean estimate the
        lookups read these rows' own slots."""
        smoothing, topic_norm = _smoothing(self.topic_totals(), eta, self.n_words, estimate)
        geometric = estimate == "geometric"
        topic_scale = 1.0 / topic_norm if geometric else self.pi / topic_norm
        local = np.arange(len(self.words), dtype=np.int64)
        row_indptr, row_topics, row_coef, row_coef_cumsum = freeze_table_rows(
            local, self.pi, float(eta), geometric, topic_scale, self.slot_start, self.slot_capacity, self.row_size,
            self.slot_topics, self.slot_values)
        frozen = FrozenTopics(self.words, row_indptr, row_topics, row_coef, smoothing)
        if not geometric:
            index = (self.slot_start[:-1], self.slot_capacity.astype(np.int64), self.slot_topics, self.slot_values,
                     topic_scale)
            frozen._view = frozen._with_index(row_coef_cumsum, index)
        return frozen

    def subset(self, words: np.ndarray) -> "TableRows":
        """The rows of the given ascending word ids (all among these rows')."""
        rows = local_ids(self.words, words)
        capacity = self.slot_capacity[rows]
        slot_start, slot_topics, slot_values = copy_segments(self.slot_start[rows], capacity, self.slot_topics,
                                                             self.slot_values)
        return TableRows(np.asarray(words, np.int64), slot_start, capacity, self.row_size[rows], slot_topics,
                         slot_values, self.topic_sums, self.pi, self.n_words)
