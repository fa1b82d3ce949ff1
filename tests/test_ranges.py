"""Work ranges of the parallel drivers (kernels/ranges.py), and that the passes over word rows
give the same result on any number of threads."""

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bigtopics.frozen import FrozenTopics, TableRows
from bigtopics.kernels import pieces
from bigtopics.kernels.ranges import even_ranges

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


def test_no_ranges_is_an_error():
    with pytest.raises(ValueError, match="at least 1"):
        even_ranges(np.arange(5, dtype=np.int64), 0)


def test_skewed_rows_split_by_work_not_by_count():
    """Word rows in frequency order: the first few rows hold most of the work."""
    work = np.concatenate([[1000] * 4, np.ones(996, np.int64)])
    bounds = even_ranges(np.concatenate([[0], np.cumsum(work)]), 2)
    assert bounds.tolist() == [0, 3, 1000]


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 threads to compare")
@pytest.mark.parametrize("estimate", ["mean", "geometric"])
def test_row_passes_do_not_depend_on_the_number_of_threads(estimate):
    """Freezing the table (freeze_table_rows), indexing CSR rows (index_rows), alias tables per row
    (row_alias_tables) and gathering rows (gather_rows), on 1 thread and on all."""
    table = trained_table()
    words = np.arange(0, V, 2)
    results = []
    before = pieces.threads()
    try:
        for threads in (1, numba.config.NUMBA_NUM_THREADS):
            pieces.set_threads(threads)
            frozen = TableRows.from_table(table, words).freeze(ETA, estimate)
            rows = table.rows(words)
            from_rows = FrozenTopics.from_rows(words, *rows, table.topic_totals(), ETA, V, estimate)
            results.append((*frozen.kernel_view(), *frozen.alias_view(), *rows, *from_rows.kernel_view()))
    finally:
        pieces.set_threads(before)
    one, many = results
    assert len(one) == len(many)
    for x, y in zip(one, many):
        np.testing.assert_array_equal(x, y, strict=not np.isscalar(x))
