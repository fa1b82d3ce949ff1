"""The topic-word table's global step on several threads (kernels/table_parallel.py) leaves every
array bit for bit as the serial kernel (kernels/table.py, add_scaled) does."""

import numpy as np
import pytest

from bigtopics import topic_word
from bigtopics.kernels import pieces
from bigtopics.kernels.table import add_scaled
from bigtopics.kernels.table_parallel import APPLIED, NO_ROOM, NOT_GROUPED, add_parallel, growth_slots
from bigtopics.topic_word import TopicWordTable

K, V = 40, 200


@pytest.fixture(autouse=True)
def small_pool(monkeypatch):
    """Start the pool tiny so that updates run out of it (the fallback to add_scaled)."""
    monkeypatch.setattr(topic_word, "MIN_POOL_SLOTS", 16)


@pytest.fixture
def threads():
    """Run the test body on a given number of threads (kernels/pieces.py), then restore the count."""
    before = pieces.threads()
    yield pieces.set_threads
    pieces.set_threads(before)


def grouped_step(rng, n_topics=K, n_words=V):
    """Minibatch statistics as the trainer merges them: unique (word, topic) pairs grouped by word
    in ascending order, topics in any order within a word; a few words take most topics (their
    rows grow through several capacities in one update), some values are zero."""
    vocabulary = np.sort(rng.choice(n_words, size=rng.integers(1, n_words), replace=False))
    per_word = np.minimum(rng.zipf(1.6, size=len(vocabulary)), n_topics)
    words = np.repeat(vocabulary, per_word)
    topics = np.concatenate([rng.permutation(n_topics)[:k] for k in per_word])
    values = rng.integers(0, 9, size=len(words)) / 4  # about one in nine is zero
    return words, topics, values


def raw_arrays(table: TopicWordTable) -> list[np.ndarray]:
    """Everything the global step writes: rows, the pool up to pool_used, topic sums, counters."""
    row_start, row_capacity, row_size, pool_topics, pool_values = table.row_arrays()
    used = table._pool_used
    return [row_start, row_capacity, row_size, pool_topics[:used], pool_values[:used].view(np.int64),
            table._topic_sums.view(np.int64), np.array([used, table.n_entries, len(pool_topics)]),
            np.array([table.pi]).view(np.int64)]


def assert_identical(a: TopicWordTable, b: TopicWordTable):
    for x, y in zip(raw_arrays(a), raw_arrays(b), strict=True):
        assert np.array_equal(x, y)


def filled_table(rng, n_steps):
    table = TopicWordTable(K, V, initial_capacity=2)
    table.reset_below = 1e-300
    for t in range(n_steps):
        table.update(*grouped_step(rng), rho=(1.0 + t) ** -0.6, scale=3.0)
    return table


def copy_table(table: TopicWordTable) -> TopicWordTable:
    twin = TopicWordTable(table.n_topics, table.n_words, initial_capacity=table.initial_capacity)
    for name in ("_row_start", "_row_capacity", "_row_size", "_pool_topics", "_pool_values", "_topic_sums"):
        setattr(twin, name, getattr(table, name).copy())
    for name in ("_pool_used", "n_entries", "pi", "reset_below", "drop_below"):
        setattr(twin, name, getattr(table, name))
    return twin


def kernel_arguments(table: TopicWordTable):
    return (table._row_start, table._row_capacity, table._row_size, table._pool_topics, table._pool_values,
            table._pool_used, table._topic_sums, table.initial_capacity)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_parallel_kernel_writes_what_the_serial_kernel_writes(threads, n_threads):
    """On random tables (empty rows, full rows, garbage and stale bytes in the pool's free part)
    and random grouped updates, add_parallel either applies the update leaving every array as
    add_scaled does, or, when the pool lacks room, changes nothing (add_scaled then stops there
    as before)."""
    threads(n_threads)
    rng = np.random.default_rng(n_threads)
    outcomes = []
    for trial in range(40):
        table = filled_table(rng, n_steps=trial % 5)
        if trial % 7 == 3:
            table._clear()  # rho = 1: rows emptied, the pool's old bytes left behind
        if trial % 3 == 0:  # a pool with room to spare
            table._ensure_pool(4 * len(table._pool_topics))
        words, topics, values = grouped_step(rng)
        if trial % 4 == 1:  # mostly entries the table holds: the bound overshoots, the exact count decides
            indptr, held_topics, _ = table.to_csr()
            held_words = np.repeat(np.arange(V), np.diff(indptr))
            extra = rng.random(len(words)) < 0.05
            pairs = np.unique(np.concatenate([held_words * K + held_topics, words[extra] * K + topics[extra]]))
            words, topics, values = pairs // K, pairs % K, rng.integers(0, 9, size=len(pairs)) / 4
        coef = float(rng.uniform(0.5, 4.0))
        bound = sum(growth_slots(table._row_size[w], table._row_capacity[w], np.count_nonzero(values[words == w]), 2)
                    for w in np.unique(words))
        bound_fits = table._pool_used + bound <= len(table._pool_topics)
        serial, parallel, before = table, copy_table(table), copy_table(table)
        first, serial_used, serial_inserted, _ = add_scaled(words, topics, values, 0, coef,
                                                            *kernel_arguments(serial)[:-1], serial.initial_capacity)
        outcome, used, inserted = add_parallel(words, topics, values, coef, *kernel_arguments(parallel))
        outcomes.append((outcome, bound_fits))
        if first < len(words):  # add_scaled ran out of pool
            assert outcome == NO_ROOM
            assert_identical(parallel, before)
            continue
        assert outcome == APPLIED
        serial._pool_used, serial.n_entries = serial_used, serial.n_entries + serial_inserted
        parallel._pool_used, parallel.n_entries = used, parallel.n_entries + inserted
        assert_identical(serial, parallel)
    # applied within the bound, applied by the exact count, no room
    assert set(outcomes) == {(APPLIED, True), (APPLIED, False), (NO_ROOM, False)}


def test_growth_slots_is_the_serial_loops_relocations():
    """growth_slots (the pool a row's relocations take while entries are inserted one by one)
    against the loop it summarizes, for every small size, capacity and number of inserts."""
    for min_capacity in (2, 4, 16):
        for capacity in [0] + [min_capacity << s for s in range(5)]:
            for size in range(0 if capacity == 0 else 1, int(0.7 * capacity) + 1):
                for n_new in range(70):
                    slots, s, c = 0, size, capacity
                    for _ in range(n_new):
                        s += 1
                        if s > 0.7 * c:
                            c = min_capacity
                            while s > 0.7 * c:
                                c *= 2
                            slots += c
                    assert growth_slots(size, capacity, n_new, min_capacity) == slots


def test_words_out_of_order_are_left_to_the_serial_kernel(threads):
    threads(2)
    table = filled_table(np.random.default_rng(5), n_steps=2)
    before = copy_table(table)
    words, topics, values = grouped_step(np.random.default_rng(6))
    for shuffled in (words[::-1], np.roll(words, len(words) // 2)):
        outcome, _, _ = add_parallel(shuffled.copy(), topics, values, 1.5, *kernel_arguments(table))
        assert outcome == NOT_GROUPED
        assert_identical(table, before)


def test_table_updates_on_two_threads_equal_one_thread_bit_for_bit(threads, monkeypatch, tmp_path):
    """Whole training-like sequences through TopicWordTable.update: the first step and a later one
    with rho = 1 (clears), resets that drop entries, a pool that starts tiny and must grow (the
    update then falls back to add_scaled, which compacts or grows and carries on): the table on
    two threads, memory-mapped, stays identical to the table on one after every step."""
    monkeypatch.setattr(topic_word, "PARALLEL_MIN_ENTRIES", 0)
    outcomes = []

    def recorded(*arguments):  # the real kernel; its outcomes are kept
        result = add_parallel(*arguments)
        outcomes.append(result[0])
        return result

    monkeypatch.setattr(topic_word, "add_parallel", recorded)
    rng = np.random.default_rng(11)
    one, two = TopicWordTable(K, V, initial_capacity=4), TopicWordTable(K, V, tmp_path, initial_capacity=4)
    for table in (one, two):
        table.reset_below, table.drop_below = 0.2, 0.3
    for t in range(30):
        words, topics, values = grouped_step(rng)
        rho = 1.0 if t in (0, 17) else (1.0 + t) ** -0.6
        for n_threads, table in ((1, one), (2, two)):
            threads(n_threads)
            table.update(words, topics, values, rho, 3.0)
        assert_identical(one, two)
    assert one.n_resets > 1 and len(one._pool_topics) > 16
    assert set(outcomes) == {APPLIED, NO_ROOM}
