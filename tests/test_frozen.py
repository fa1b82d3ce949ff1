"""The frozen view (kernels/frozen.py): built from the table in one pass, or from CSR rows."""

import numpy as np
import pytest
from numba import njit

from bigtopics import topic_word
from bigtopics.frozen import FrozenTopics, TableRows
from bigtopics.kernels.frozen import lookup
from bigtopics.topic_word import TopicWordTable

from . import naive
from .test_topic_word import random_steps

K, V, ETA = 20, 300, 0.4


@pytest.fixture(autouse=True)
def small_pool(monkeypatch):
    monkeypatch.setattr(topic_word, "MIN_POOL_SLOTS", 16)


def trained_table(n_steps=60, seed=8) -> TopicWordTable:
    table = TopicWordTable(K, V)
    table.reset_below, table.drop_below = 1e-3, 0.05  # resets (with drops and compaction) happen
    for step in random_steps(seed, n_steps, K, V):
        table.update(*step)
    assert table.n_resets >= 1
    return table


@njit
def lookup_all(view, n_rows, n_topics):
    out = np.empty((n_rows, n_topics))
    for r in range(n_rows):
        for k in range(n_topics):
            out[r, k] = lookup(view[6:], r, k)
    return out


def row_dicts(frozen: FrozenTopics) -> list[dict]:
    return [dict(zip(frozen.row_topics[lo:hi].tolist(), frozen.row_coef[lo:hi].tolist()))
            for lo, hi in zip(frozen.row_indptr[:-1], frozen.row_indptr[1:])]


def check_view(frozen: FrozenTopics):
    """Running sums restart per row, and a lookup finds each row topic's coef, else 0."""
    view = frozen.kernel_view()
    indptr, topics, coef, cumsum = view[:4]
    for lo, hi in zip(indptr[:-1], indptr[1:]):
        np.testing.assert_allclose(cumsum[lo:hi], np.cumsum(coef[lo:hi]), rtol=1e-13)
    found = lookup_all(view, len(frozen.words), frozen.n_topics)
    for r, (lo, hi) in enumerate(zip(indptr[:-1], indptr[1:])):
        expected = np.zeros(frozen.n_topics)
        expected[topics[lo:hi]] = coef[lo:hi]
        np.testing.assert_array_equal(found[r], expected)


ESTIMATES = ["mean", "geometric"]


@pytest.mark.parametrize("estimate", ESTIMATES)
def test_view_from_the_table_equals_the_view_from_its_rows(estimate):
    table = trained_table()
    words = np.flatnonzero(np.random.default_rng(0).random(V) < 0.4)  # with some empty rows
    from_table = TableRows.from_table(table, words).freeze(ETA, estimate)
    from_rows = FrozenTopics.from_rows(words, *table.rows(words), table.topic_totals(), ETA, V, estimate)
    np.testing.assert_allclose(from_table.smoothing, from_rows.smoothing, rtol=1e-14)
    np.testing.assert_array_equal(from_table.row_indptr, from_rows.row_indptr)
    for got, expected in zip(row_dicts(from_table), row_dicts(from_rows)):
        assert got.keys() == expected.keys()
        np.testing.assert_allclose(list(got.values()), [expected[k] for k in got], rtol=1e-12)
    check_view(from_table)
    check_view(from_rows)


@pytest.mark.parametrize("estimate", ESTIMATES)
def test_view_is_the_estimate_of_beta_of_the_dense_table(estimate):
    table = trained_table()
    words = np.arange(V)
    frozen = TableRows.from_table(table, words).freeze(ETA, estimate)
    dense = np.zeros((K, V))
    indptr, topics, values = table.to_csr()
    dense[topics, np.repeat(words, np.diff(indptr))] = values
    rebuilt = np.repeat(frozen.smoothing[:, None], V, axis=1)
    for w in range(V):
        lo, hi = frozen.row_indptr[w], frozen.row_indptr[w + 1]
        rebuilt[frozen.row_topics[lo:hi], w] += frozen.row_coef[lo:hi]
    np.testing.assert_allclose(rebuilt, naive.beta_estimate(dense, ETA, estimate), rtol=1e-11)


@pytest.mark.parametrize("estimate", ESTIMATES)
def test_a_restored_table_freezes_to_the_identical_view(estimate):
    """Checkpoints keep the rows' layout, so a resumed run samples exactly as before. (The mean
    estimate's index is the table's pool, whose garbage a restore compacts: compare lookups.)"""
    table = trained_table()
    restored = TopicWordTable.from_state(table.state())
    words = np.arange(0, V, 3)
    a = TableRows.from_table(table, words).freeze(ETA, estimate).kernel_view()
    b = TableRows.from_table(restored, words).freeze(ETA, estimate).kernel_view()
    for x, y in zip(a[:6], b[:6]):
        np.testing.assert_array_equal(x, y, strict=True)
    np.testing.assert_array_equal(lookup_all(a, len(words), K), lookup_all(b, len(words), K), strict=True)
    if estimate == "geometric":
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y, strict=True)
