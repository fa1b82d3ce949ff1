"""Planning shuffled minibatches (plan.py) and reading their documents (reader.py)."""

import numpy as np
import pytest

from bigtopics.kernels import pieces
from bigtopics.minibatch import gather_rows
from bigtopics.plan import EpochPlan
from bigtopics.reader import DocumentReader, read_ahead, read_documents
from bigtopics.store import StoreWriter, open_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """103 documents; document d holds word d % 7 with count d + 1 (and word 7 once if d is even)."""
    path = tmp_path_factory.mktemp("mb") / "s.zarr"
    rows = [([d % 7] + ([7] if d % 2 == 0 else []), [d + 1] + ([1] if d % 2 == 0 else [])) for d in range(103)]
    rows = [(np.array(w), np.array(c)) for w, c in rows]
    indptr = np.concatenate([[0], np.cumsum([len(w) for w, _ in rows])])
    with StoreWriter(path, docs_per_chunk=10, entries_per_chunk=16) as writer:
        writer.append(indptr, np.concatenate([w for w, _ in rows]), np.concatenate([c for _, c in rows]),
                      [f"d{d}" for d in range(103)])
        writer.commit([f"w{i}" for i in range(8)], np.ones(8), np.ones(8))
    return open_store(path)


def check_rows(batch):
    for i, d in enumerate(batch.doc_numbers):
        lo, hi = batch.indptr[i], batch.indptr[i + 1]
        assert batch.words[lo] == d % 7 and batch.counts[lo] == d + 1
        assert hi - lo == (2 if d % 2 == 0 else 1)


def epoch_plan(store, batch_size, seed, window_blocks=16, exclude=None):
    return EpochPlan(store.n_docs, store.docs_per_block, batch_size, seed, window_blocks, exclude)


def test_every_document_once_per_epoch_in_a_new_order(store):
    plan = epoch_plan(store, batch_size=8, seed=3, window_blocks=3)
    reader = DocumentReader(store, cache_blocks=3)
    orders = []
    for epoch in range(2):
        plans = list(plan.epoch(epoch))
        assert [p.n_docs for p in plans] == [8] * 12 + [7]
        assert [p.index for p in plans] == list(range(13)) and {p.epoch for p in plans} == {epoch}
        assert len(plans) == plan.batches_per_epoch()
        for p in plans:
            batch = reader.read(p.doc_numbers)
            np.testing.assert_array_equal(batch.doc_numbers, p.doc_numbers)
            check_rows(batch)
        order = np.concatenate([p.doc_numbers for p in plans])
        assert sorted(order.tolist()) == list(range(103))
        orders.append(order)
    assert not np.array_equal(orders[0], orders[1])
    again = np.concatenate([p.doc_numbers for p in epoch_plan(store, 8, 3, 3).epoch(0)])
    np.testing.assert_array_equal(again, orders[0])


def test_a_minibatch_draws_its_documents_from_one_window_of_blocks(store):
    """What keeps reading bounded: a minibatch needs the blocks of its window (and of the
    window before, for the documents left over from it), so a small block cache serves it."""
    for p in epoch_plan(store, batch_size=8, seed=1, window_blocks=2).epoch(0):
        assert len(np.unique(p.doc_numbers // store.docs_per_block)) <= 4


@pytest.mark.parametrize("skip", [0, 1, 3, 4, 7, 12, 13])
def test_skipping_gives_the_tail_of_the_same_epoch(store, skip):
    plan = epoch_plan(store, batch_size=8, seed=5, window_blocks=2)
    full = list(plan.epoch(1))
    tail = list(plan.epoch(1, skip=skip))
    assert len(tail) == len(full) - skip
    for a, b in zip(full[skip:], tail):
        assert a.index == b.index
        np.testing.assert_array_equal(a.doc_numbers, b.doc_numbers)


def test_excluded_documents_are_never_served(store):
    exclude = np.array([0, 5, 50, 102])
    plan = epoch_plan(store, batch_size=10, seed=0, exclude=exclude)
    served = np.concatenate([p.doc_numbers for p in plan.epoch(0)])
    assert plan.n_training_docs == 99
    assert sorted(served.tolist()) == sorted(set(range(103)) - set(exclude.tolist()))


@pytest.mark.parametrize("cache_blocks", [1, 2, 16])
def test_the_reader_gives_any_documents_in_any_order_whatever_its_cache(store, cache_blocks):
    reader = DocumentReader(store, cache_blocks=cache_blocks)
    rng = np.random.default_rng(0)
    for _ in range(5):
        docs = rng.choice(store.n_docs, size=17, replace=False)
        batch = reader.read(docs)
        np.testing.assert_array_equal(batch.doc_numbers, docs)
        check_rows(batch)
        alone = read_documents(store, np.sort(docs))
        order = np.argsort(docs)
        for i, j in enumerate(order):
            a = slice(batch.indptr[j], batch.indptr[j + 1])
            b = slice(alone.indptr[i], alone.indptr[i + 1])
            np.testing.assert_array_equal(batch.words[a], alone.words[b])
            np.testing.assert_array_equal(batch.counts[a], alone.counts[b])
    assert len(reader._blocks) <= cache_blocks


def test_plan_shards_cover_the_minibatch_in_order():
    from bigtopics.plan import MinibatchPlan

    plan = MinibatchPlan(0, 0, np.arange(10))
    assert plan.shards(0) == [(0, 10)]
    assert plan.shards(4) == [(0, 4), (4, 8), (8, 10)]
    assert plan.shards(20) == [(0, 10)]


def test_gather_rows():
    indptr = np.array([0, 2, 2, 5])
    indices = np.array([1, 2, 3, 4, 5])
    new_indptr, new_indices, new_data = gather_rows(indptr, indices, indices * 10, np.array([2, 0, 1]))
    assert new_indptr.tolist() == [0, 3, 5, 5]
    assert new_indices.tolist() == [3, 4, 5, 1, 2]
    assert new_data.tolist() == [30, 40, 50, 10, 20]


def test_read_ahead_keeps_order_and_reraises():
    assert list(read_ahead(iter(range(50)), depth=3)) == list(range(50))

    def failing():
        yield 1
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        list(read_ahead(failing()))


def test_read_ahead_runs_its_kernels_on_its_own_thread_only():
    """The producer works beside the consumer's parallel phases: its kernels take no helper."""
    def thread_counts():
        for _ in range(3):
            yield pieces.threads()

    with pieces.threads_set_to(4):
        assert list(read_ahead(thread_counts())) == [1, 1, 1]
        assert pieces.threads() == 4
