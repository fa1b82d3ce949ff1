"""The lazy hash-sparse topic-word table against a dense eager reference."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive import EagerTopicWord, OneByOneRows

from bigtopics import topic_word
from bigtopics.topic_word import TopicWordTable

K, V = 20, 300


@pytest.fixture(autouse=True)
def small_pool(monkeypatch):
    """Start the pool tiny so the tests exercise its growth."""
    monkeypatch.setattr(topic_word, "MIN_POOL_SLOTS", 16)


def random_steps(seed, n_steps, n_topics=K, n_words=V):
    """Sparse minibatch statistics: each step a random vocabulary, a few topics per word, unique
    pairs; rho_t = (1 + t)^-0.6 (so rho = 1 first) and scale = D / |B| = 10."""
    rng = np.random.default_rng(seed)
    for t in range(n_steps):
        vocabulary = rng.choice(n_words, size=rng.integers(1, n_words // 3), replace=False)
        pairs = np.unique(np.repeat(vocabulary, 4) * n_topics + rng.integers(0, n_topics, size=4 * len(vocabulary)))
        pairs = rng.permutation(pairs)
        values = rng.integers(1, 9, size=len(pairs)) / 4
        yield pairs // n_topics, pairs % n_topics, values, (1.0 + t) ** -0.6, 10.0


def dense(table: TopicWordTable) -> np.ndarray:
    indptr, topics, values = table.to_csr()
    out = np.zeros((table.n_topics, table.n_words))
    words = np.repeat(np.arange(table.n_words), np.diff(indptr))
    out[topics, words] = values
    assert np.all(values > 0), "stored entries are nonzero"
    for w in range(table.n_words):
        assert np.all(np.diff(topics[indptr[w]:indptr[w + 1]]) > 0), "topics ascend within a row"
    return out


def run_both(steps, table, reference, check_every=1):
    for i, (words, topics, values, rho, scale) in enumerate(steps):
        table.update(words, topics, values, rho, scale)
        reference.update(words, topics, values, rho, scale)
        if i % check_every == 0:
            assert_matches(table, reference)
    assert_matches(table, reference)


def assert_matches(table, reference):
    n = dense(table)
    np.testing.assert_array_equal(n > 0, reference.N > 0)
    np.testing.assert_allclose(n, reference.N, rtol=1e-9)
    np.testing.assert_allclose(table.topic_totals(), reference.N.sum(1), rtol=1e-9)
    assert table.n_entries == np.count_nonzero(reference.N)
    assert table.n_resets == reference.n_resets
    assert table.mass_dropped == pytest.approx(reference.mass_dropped, rel=1e-9)


def new_table(directory=None, drop_below=0.5, reset_below=1e-2):
    table = TopicWordTable(K, V, directory=directory, initial_capacity=2)
    table.drop_below, table.reset_below = drop_below, reset_below
    return table


def test_lazy_table_equals_eager_updates_across_resets_drops_and_growth():
    table = new_table()
    reference = EagerTopicWord(K, V, reset_below=1e-2, drop_below=0.5)
    start_bytes = table.nbytes()
    run_both(random_steps(0, 250), table, reference)
    assert reference.n_resets >= 4 and reference.mass_dropped > 0
    assert table.nbytes() > 20 * start_bytes  # the pool grew many times
    assert np.diff(table.to_csr()[0]).max() > 8  # rows grew well past their initial capacity


def test_keeping_everything_matches_too():
    table = new_table(drop_below=0.0)
    reference = EagerTopicWord(K, V, reset_below=1e-2, drop_below=0.0)
    run_both(random_steps(1, 120), table, reference, check_every=10)
    assert reference.n_resets >= 2 and table.mass_dropped == 0.0


def test_rho_one_replaces_the_table_by_the_scaled_statistics_exactly():
    table = new_table()
    for words, topics, values, rho, scale in random_steps(2, 5):
        table.update(words, topics, values, rho, scale)
    words, topics, values = np.array([7, 3, 7]), np.array([1, 4, 0]), np.array([0.25, 3.0, 1.5])
    table.update(words, topics, values, 1.0, 3.0)
    assert table.pi == 1.0 and table.n_entries == 3
    indptr, got_topics, got_values = table.rows(np.array([7, 3, 5]))
    assert indptr.tolist() == [0, 2, 3, 3]
    assert got_topics.tolist() == [0, 1, 4]
    assert got_values.tolist() == [4.5, 0.75, 9.0]
    assert table.topic_totals().tolist() == [4.5, 0.75, 0, 0, 9.0] + [0.0] * (K - 5)


def test_manual_reset_returns_and_counts_dropped_mass():
    table = new_table()
    table.update([0, 0, 1], [0, 1, 0], [1.0, 2.0, 4.0], 1.0, 1.0)
    table.update([1], [1], [1.0], 0.5, 1.0)  # N: w0 (0.5, 1.0), w1 (2.0, 0.5)
    assert table.reset(drop_below=1.0) == 1.0  # N < 1.0 goes, N = 1.0 stays
    assert table.n_resets == 1 and table.mass_dropped == 1.0 and table.n_entries == 2
    assert table.pi == 1.0
    indptr, topics, values = table.to_csr()
    assert indptr[:3].tolist() == [0, 1, 2] and topics.tolist() == [1, 0] and values.tolist() == [1.0, 2.0]
    assert table.topic_totals()[:2].tolist() == [2.0, 1.0]


def test_reset_recomputes_topic_totals_from_the_entries_without_drift():
    table = TopicWordTable(2, 11)
    values = np.array([1.0] + [1e-16] * 10)
    table.update(np.arange(11), np.zeros(11, np.int64), values, 1.0, 1.0)
    assert table.topic_totals()[0] == 1.0  # running sum: each 1e-16 is lost against 1.0
    table.reset()
    assert table.topic_totals()[0] == math.fsum(values) == 1.000000000000001


def test_rows_of_any_word_order_match_the_whole_table():
    table = new_table()
    for step in random_steps(3, 40):
        table.update(*step)
    full_indptr, full_topics, full_values = table.to_csr()
    words = np.random.default_rng(0).permutation(V)[:77]
    indptr, topics, values = table.rows(words)
    for j, w in enumerate(words):
        lo, hi = full_indptr[w], full_indptr[w + 1]
        assert topics[indptr[j]:indptr[j + 1]].tolist() == full_topics[lo:hi].tolist()
        assert values[indptr[j]:indptr[j + 1]].tolist() == full_values[lo:hi].tolist()
    assert topics.dtype == np.int32 and indptr.dtype == np.int64


def assert_same_state(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key, strict=True)


def test_state_round_trip_continues_bit_identically(tmp_path):
    steps = list(random_steps(4, 160))
    original = new_table()
    for step in steps[:70]:
        original.update(*step)
    assert original.n_resets >= 1 and original.pi < 1
    restored = TopicWordTable.from_state(original.state())
    restored_on_disk = TopicWordTable.from_state(original.state(), directory=tmp_path)
    assert_same_state(restored.state(), original.state())
    for step in steps[70:]:
        for table in (original, restored, restored_on_disk):
            table.update(*step)
    assert original.n_resets >= 3
    assert_same_state(restored.state(), original.state())
    assert_same_state(restored_on_disk.state(), original.state())
    restored_on_disk.close()


def test_memory_mapped_table_behaves_identically(tmp_path):
    in_memory, on_disk = new_table(), new_table(tmp_path / "table")
    for step in random_steps(5, 120):
        in_memory.update(*step)
        on_disk.update(*step)
    assert on_disk.n_resets >= 2
    assert_same_state(on_disk.state(), in_memory.state())
    assert on_disk.nbytes() == in_memory.nbytes()
    # the arrays live in the directory, and growing left no temporary files behind
    names = sorted(p.name for p in (tmp_path / "table").iterdir())
    assert names == ["pool_topics.npy", "pool_values.npy", "row_capacity.npy", "row_size.npy", "row_start.npy"]
    pool = np.load(tmp_path / "table" / "pool_values.npy", mmap_mode="r")
    assert pool.nbytes == in_memory._pool_values.nbytes
    on_disk.close()


def test_memory_grows_with_entries_not_topics_times_words(monkeypatch):
    monkeypatch.setattr(topic_word, "MIN_POOL_SLOTS", 4096)
    n_topics, n_words = 2000, 100_000
    table = TopicWordTable(n_topics, n_words)
    rng = np.random.default_rng(6)
    pairs = rng.choice(n_topics * n_words, size=5000, replace=False)
    table.update(pairs // n_topics, pairs % n_topics, np.ones(5000), 1.0, 1.0)
    assert table.n_entries == 5000
    per_word, per_topic = 16, 8
    assert table.nbytes() < per_word * n_words + per_topic * n_topics + 200 * table.n_entries


def test_outgrown_row_segments_are_reclaimed_between_resets():
    table = new_table(drop_below=0.0, reset_below=0.0)  # never resets
    for step in random_steps(8, 60):
        table.update(*step)
    assert table.n_resets == 0
    # ~40 bytes per entry here; growing the pool instead of reclaiming would take ~77
    assert table.nbytes() / table.n_entries < 55


def test_a_reset_that_drops_most_entries_gives_the_memory_back():
    table = new_table()
    empty_bytes = table.nbytes()
    for step in random_steps(7, 20):
        table.update(*step)
    assert table.nbytes() > 20 * empty_bytes
    table.reset(drop_below=np.inf)
    assert table.n_entries == 0 and table.to_csr()[0][-1] == 0
    assert table.nbytes() == empty_bytes


@pytest.mark.parametrize("bad, message", [
    (dict(rho=0.0), "rho"),
    (dict(rho=1.5), "rho"),
    (dict(scale=-1.0), "scale"),
    (dict(words=[0, V]), "word ids"),
    (dict(topics=[-1, 0]), "topic ids"),
    (dict(values=[1.0, -1.0]), "values"),
    (dict(values=[1.0, np.nan]), "values"),
    (dict(values=[1.0]), "length"),
])
def test_bad_updates_are_refused_with_a_clear_error(bad, message):
    args = dict(words=[0, 1], topics=[0, 0], values=[1.0, 1.0], rho=0.5, scale=1.0) | bad
    table = new_table()
    with pytest.raises(ValueError, match=message):
        table.update(**args)
    assert table.n_entries == 0 and table.pi == 1.0


step_strategy = st.tuples(
    st.sets(st.tuples(st.integers(0, 5), st.integers(0, 9)), min_size=0, max_size=25),  # (word, topic)
    st.sampled_from([1.0, 0.9, 0.5, 0.3, 0.05]),
    st.integers(0, 2**32 - 1),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(step_strategy, min_size=1, max_size=30), st.sampled_from([0.0, 0.3, 2.0]))
def test_property_lazy_equals_eager(steps, drop_below):
    n_topics, n_words = 10, 6
    table = TopicWordTable(n_topics, n_words, initial_capacity=2)
    table.drop_below, table.reset_below = drop_below, 0.1
    reference = EagerTopicWord(n_topics, n_words, reset_below=0.1, drop_below=drop_below)
    for pairs, rho, seed in steps:
        pairs = sorted(pairs)
        words = np.array([w for w, _ in pairs], np.int64)
        topics = np.array([k for _, k in pairs], np.int64)
        values = np.random.default_rng(seed).uniform(0.1, 3.0, size=len(pairs))
        table.update(words, topics, values, rho, 2.0)
        reference.update(words, topics, values, rho, 2.0)
        assert_matches(table, reference)


def table_rows(table: TopicWordTable) -> list[list]:
    """Every row's segment slot by slot: (topic, value) or None."""
    row_start, row_capacity, _, pool_topics, pool_values = table.row_arrays()
    return [[None if pool_topics[s] < 0 else (int(pool_topics[s]), float(pool_values[s]))
             for s in range(row_start[w], row_start[w] + row_capacity[w])] for w in range(table.n_words)]


@pytest.mark.parametrize("grouped", [True, False], ids=["grouped by word", "any order"])
def test_rows_are_slot_for_slot_the_one_by_one_addition(grouped):
    """The global step leaves every entry in the slot, and every topic total at the bits, that
    adding the pairs one by one in array order to linearly probed rows gives (rows growing
    through several capacities within one update, the pool moving them): the layout that
    checkpoints restore and the samplers' running sums follow."""
    table = new_table(reset_below=1e-300)
    reference = OneByOneRows(K, V, table.initial_capacity)
    for words, topics, values, rho, scale in random_steps(seed=7, n_steps=12):
        if grouped:
            order = np.argsort(words, kind="stable")
            words, topics, values = words[order], topics[order], values[order]
        values[::11] = 0.0  # zero values add nothing, not even an entry
        table.update(words, topics, values, rho if rho < 1 else 0.5, scale)
        reference.update(words, topics, values, rho if rho < 1 else 0.5, scale)
        assert table_rows(table) == reference.rows
        assert table.topic_totals().tobytes() == (reference.pi * reference.topic_sums).tobytes()
    assert table.n_entries == sum(entry is not None for row in reference.rows for entry in row)
