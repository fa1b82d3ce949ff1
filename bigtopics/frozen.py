"""Frozen views of the topics for one minibatch: what a local step reads while the table stays fixed.

`TableRows` is the topic-word table's rows for the minibatch's words with the topic totals and
the scale pi: a view of the table's pool (the driver's table in process, a worker's copy of it
on a cluster). Exclude-own is a subtraction on a copy of the rows (`without`), never on the
live table.

`FrozenTopics` is the estimate of beta the samplers read, split as smoothing[k] + coef[k, w]
(kernels/frozen.py), built from TableRows (`TableRows.freeze`) or from the CSR rows of a model
(`FrozenTopics.from_rows`, `frozen_point_estimates`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .kernels.alias_gibbs import alias_view
from .kernels.frozen import freeze_table_rows, index_rows
from .kernels.prior import weighted_row_cumsum
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

    def prior_view(self, alpha) -> tuple[tuple, float | np.ndarray]:
        """(view, alpha) as the sampler and evaluator kernels take them (kernels/prior.py): a
        symmetric alpha (a number) with the kernel view as it is, an asymmetric one (K numbers)
        as a float64 array with the view's running sums weighted by alpha_k."""
        view = self.kernel_view()
        if np.ndim(alpha) == 0:
            return view, float(alpha)
        alpha = self.asymmetric_prior(alpha)
        weighted_rows = weighted_row_cumsum(self.row_indptr, self.row_topics, self.row_coef, alpha)
        return (*view[:3], weighted_rows, view[4], np.cumsum(alpha * self.smoothing), *view[6:]), alpha

    def _with_index(self, row_coef_cumsum, index) -> tuple:
        return (self.row_indptr, self.row_topics, self.row_coef, row_coef_cumsum,
                self.smoothing, np.cumsum(self.smoothing), *index)

    def alias_view(self) -> tuple:
        """The tuple the alias samplers take (see kernels/alias_gibbs.py), built on first use."""
        if self._alias_view is None:
            self._alias_view = alias_view(self.row_indptr, self.row_topics, self.row_coef, self.smoothing,
                                          self.kernel_view()[6:])
        return self._alias_view

    def alias_prior_view(self, alpha) -> tuple[tuple, float | np.ndarray]:
        """(view, alpha) as the alias samplers take them: a symmetric alpha (a number) with
        alias_view, an asymmetric one (K numbers) as a float64 array with tables weighted by alpha_k."""
        if np.ndim(alpha) == 0:
            return self.alias_view(), float(alpha)
        alpha = self.asymmetric_prior(alpha)
        return alias_view(self.row_indptr, self.row_topics, self.row_coef, self.smoothing, self.kernel_view()[6:],
                          alpha), alpha

    def asymmetric_prior(self, alpha) -> np.ndarray:
        """K numbers alpha_k as the kernels take them (float64, contiguous), checked."""
        alpha = np.ascontiguousarray(alpha, np.float64)
        if alpha.shape != (self.n_topics,):
            raise ValueError(f"an asymmetric alpha needs {self.n_topics} values, one per topic (got {alpha.shape})")
        return alpha

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
    [row_start[r], row_start[r] + row_capacity[r]) of (pool_topics, pool_values), values M = N / pi
    as the table stores them, with row_size[r] entries; topic_sums is Msum (K,), and N[k, w] = pi * M,
    N[k] = pi * Msum[k] (topic_word.py).

    `from_table` and `subset` are views that share the pool they read (no copy, valid until the
    table next changes); `without` copies the rows it changes. Arrays derived from the rows (that
    copy, the frozen view) go into `buffers` if given, valid until the next minibatch uses them."""

    words: np.ndarray  # int64
    row_start: np.ndarray  # int64
    row_capacity: np.ndarray  # int32
    row_size: np.ndarray  # int32
    pool_topics: np.ndarray  # int32
    pool_values: np.ndarray  # float64
    topic_sums: np.ndarray  # float64 (K,)
    pi: float
    n_words: int  # V, the vocabulary's size
    buffers: "ReusedArrays | None" = None

    @classmethod
    def from_table(cls, table, words: np.ndarray, buffers: "ReusedArrays | None" = None) -> "TableRows":
        """The rows of `table` (a TopicWordTable) for the given ascending word ids, as a view."""
        words = table._check_ids(words, table.n_words, "word")
        row_start, row_capacity, row_size, pool_topics, pool_values = table.row_arrays()
        return cls(words, row_start[words], row_capacity[words], row_size[words], pool_topics, pool_values,
                   table._topic_sums.copy(), float(table.pi), table.n_words, buffers)

    @property
    def n_topics(self) -> int:
        return len(self.topic_sums)

    def subset(self, words: np.ndarray) -> "TableRows":
        """The rows of the given ascending word ids (all among these rows'), as a view."""
        rows = local_ids(self.words, words)
        return TableRows(np.asarray(words, np.int64), self.row_start[rows], self.row_capacity[rows],
                         self.row_size[rows], self.pool_topics, self.pool_values, self.topic_sums, self.pi,
                         self.n_words, self.buffers)

    def copy(self) -> "TableRows":
        """These rows in a pool of their own, back to back."""
        start = np.zeros(len(self.words) + 1, np.int64)
        np.cumsum(self.row_capacity, out=start[1:])
        n_slots = int(start[-1])
        topics, values = _take(self.buffers, "slot_topics", np.int32, n_slots), _take(self.buffers, "slot_values",
                                                                                       np.float64, n_slots)
        copy_segments(self.row_start, self.row_capacity, self.pool_topics, self.pool_values, start, topics, values)
        return TableRows(self.words, start[:-1], self.row_capacity, self.row_size, topics, values,
                         self.topic_sums.copy(), self.pi, self.n_words, self.buffers)

    def without(self, own) -> "TableRows":
        """A copy of these rows with the statistics `own` taken out, N <- max(N - own, 0) entry by
        entry and the topic totals less what was removed. `own` has distinct (word id, topic)
        pairs whose words are all among these rows' (assignments.previous_stats)."""
        rows = self.copy()
        n_pairs = len(own.words)
        slots, before = np.empty(n_pairs, np.int64), np.empty(n_pairs, np.float64)
        take_out(local_ids(rows.words, own.words), own.topics, own.values / rows.pi, rows.row_start,
                 rows.row_capacity, rows.pool_topics, rows.pool_values, rows.topic_sums, slots, before)
        return rows

    def topic_totals(self) -> np.ndarray:
        return self.pi * self.topic_sums

    def freeze(self, eta: float, estimate: str = "mean") -> FrozenTopics:
        """The estimate of beta for these rows (kernels/frozen.py); for the mean estimate the
        lookups read these rows' own slots."""
        smoothing, topic_norm = _smoothing(self.topic_totals(), eta, self.n_words, estimate)
        geometric = estimate == "geometric"
        topic_scale = 1.0 / topic_norm if geometric else self.pi / topic_norm
        local = np.arange(len(self.words), dtype=np.int64)
        n_entries = int(self.row_size.sum(dtype=np.int64))
        row_topics = _take(self.buffers, "row_topics", np.int32, n_entries)
        row_coef = _take(self.buffers, "row_coef", np.float64, n_entries)
        row_coef_cumsum = _take(self.buffers, "row_coef_cumsum", np.float64, n_entries)
        row_indptr = freeze_table_rows(local, self.pi, float(eta), geometric, topic_scale, self.row_start,
                                       self.row_capacity, self.row_size, self.pool_topics, self.pool_values,
                                       row_topics, row_coef, row_coef_cumsum)
        frozen = FrozenTopics(self.words, row_indptr, row_topics, row_coef, smoothing)
        if not geometric:
            index = (self.row_start, self.row_capacity.astype(np.int64), self.pool_topics, self.pool_values,
                     topic_scale)
            frozen._view = frozen._with_index(row_coef_cumsum, index)
        return frozen


class ReusedArrays:
    """Arrays kept from one minibatch to the next, by name, for what TableRows derives from the
    rows: a fresh array of a table's size every minibatch costs more in page faults than filling
    it. An array taken is valid until the same name is taken again."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def take(self, name: str, dtype, n: int) -> np.ndarray:
        array = self.arrays.get(name)
        if array is None or len(array) < n or array.dtype != dtype:
            array = self.arrays[name] = np.empty(n + n // 4, dtype)
        return array[:n]


def _take(buffers: ReusedArrays | None, name: str, dtype, n: int) -> np.ndarray:
    return np.empty(n, dtype) if buffers is None else buffers.take(name, dtype, n)
