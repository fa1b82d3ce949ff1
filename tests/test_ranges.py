"""Work ranges of the parallel drivers (kernels/ranges.py), and that the drivers using them give
the same result on any number of threads."""

import numba
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bigtopics.kernels.ranges import even_ranges
from bigtopics.local_step import FrozenTopics

from . import naive
from .test_frozen import ETA, V, trained_table


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 1000), max_size=40), st.integers(1, 9))
def test_even_ranges_match_the_reference(work, n_ranges):
    work = np.asarray(work, np.int64)
    cumulative = np.concatenate([[0], np.cumsum(work)]).astype(np.int64)
    bounds = even_ranges(cumulative, n_ranges)
    np.testing.assert_array_equal(bounds, naive.even_ranges(work, n_ranges))
    assert (np.diff(bounds) >= 0).all()


def test_skewed_rows_split_by_work_not_by_count():
    """Word rows in frequency order: the first few rows hold most of the work."""
    work = np.concatenate([[1000] * 4, np.ones(996, np.int64)])
    bounds = even_ranges(np.concatenate([[0], np.cumsum(work)]), 2)
    assert bounds.tolist() == [0, 3, 1000]


@pytest.mark.parametrize("estimate", ["mean", "geometric"])
def test_frozen_view_does_not_depend_on_the_number_of_threads(estimate):
    table = trained_table()
    words = np.arange(0, V, 2)
    views, rows = [], []
    before = numba.get_num_threads()
    try:
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(threads)
            views.append(FrozenTopics.from_table(table, words, ETA, estimate))
            rows.append(table.rows(words))
    finally:
        numba.set_num_threads(before)
    for other, other_rows in zip(views[1:], rows[1:]):
        for x, y in zip(views[0].kernel_view(), other.kernel_view()):
            np.testing.assert_array_equal(x, y, strict=True)
        np.testing.assert_array_equal(views[0].alias_view()[3], other.alias_view()[3])
        for x, y in zip(rows[0], other_rows):
            np.testing.assert_array_equal(x, y)
