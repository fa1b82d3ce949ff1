"""Streaming shuffled minibatches out of a store."""

import numpy as np
import pytest

from bigtopics.minibatches import MinibatchStream, gather_rows, read_ahead
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


def test_every_document_once_per_epoch_in_a_new_order(store):
    stream = MinibatchStream(store, batch_size=8, seed=3, window_blocks=3)
    orders = []
    for epoch in range(2):
        batches = list(stream.epoch(epoch))
        assert [b.n_docs for b in batches] == [8] * 12 + [7]
        assert len(batches) == stream.batches_per_epoch()
        for b in batches:
            check_rows(b)
        order = np.concatenate([b.doc_numbers for b in batches])
        assert sorted(order.tolist()) == list(range(103))
        orders.append(order)
    assert not np.array_equal(orders[0], orders[1])
    again = np.concatenate([b.doc_numbers for b in MinibatchStream(store, 8, 3, 3).epoch(0)])
    np.testing.assert_array_equal(again, orders[0])


@pytest.mark.parametrize("skip", [0, 1, 3, 4, 7, 12, 13])
def test_skipping_gives_the_tail_of_the_same_epoch(store, skip):
    stream = MinibatchStream(store, batch_size=8, seed=5, window_blocks=2)
    full = list(stream.epoch(1))
    tail = list(stream.epoch(1, skip=skip))
    assert len(tail) == len(full) - skip
    for a, b in zip(full[skip:], tail):
        np.testing.assert_array_equal(a.doc_numbers, b.doc_numbers)
        np.testing.assert_array_equal(a.words, b.words)
        np.testing.assert_array_equal(a.counts, b.counts)


def test_excluded_documents_are_never_served(store):
    exclude = np.array([0, 5, 50, 102])
    stream = MinibatchStream(store, batch_size=10, seed=0, exclude=exclude)
    served = np.concatenate([b.doc_numbers for b in stream.epoch(0)])
    assert stream.n_training_docs == 99
    assert sorted(served.tolist()) == sorted(set(range(103)) - set(exclude.tolist()))


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
