"""The contract of the thread pool every parallel kernel runs on (kernels/pieces.py)."""

import threading
import time

import numba
import numpy as np
import pytest
from numba import njit

from bigtopics.cores import use_threads
from bigtopics.kernels import pieces


class Recorder:
    """A piece function that notes which thread ran each piece and how many ran at once."""

    def __init__(self, seconds=0.0, slow=None):
        self.seconds = seconds
        self.slow = slow or {}
        self.lock = threading.Lock()
        self.calls = []
        self.running = 0
        self.most_at_once = 0

    def __call__(self, piece, offset):
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(self.slow.get(piece, self.seconds))  # sleeping releases the GIL, as a nogil kernel does
        with self.lock:
            self.running -= 1
            self.calls.append((piece, threading.get_ident()))
        return piece + offset


def finishes(target, seconds=20):
    """Run target() in a thread; whether it returned within `seconds` (else it deadlocked)."""
    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    return not worker.is_alive()


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_every_piece_runs_once_and_results_come_in_piece_order(n_threads):
    recorder = Recorder(seconds=0.002)
    with pieces.threads_set_to(n_threads):
        results = pieces.run(recorder, 25, 100)
    assert results == [100 + piece for piece in range(25)]
    assert sorted(piece for piece, _ in recorder.calls) == list(range(25))


@pytest.mark.parametrize("n_threads", [1, 2, 4])
def test_the_thread_count_is_honoured(n_threads):
    recorder = Recorder(seconds=0.1)  # long enough for every helper to start on a loaded machine
    with pieces.threads_set_to(n_threads):
        pieces.run(recorder, 4 * n_threads, 0)
    assert recorder.most_at_once == n_threads
    assert len({thread for _, thread in recorder.calls}) == n_threads
    if n_threads == 1:
        assert {thread for _, thread in recorder.calls} == {threading.get_ident()}


def test_fewer_pieces_than_threads_use_only_as_many_threads():
    recorder = Recorder(seconds=0.05)
    with pieces.threads_set_to(4):
        assert pieces.run(recorder, 2, 0) == [0, 1]
    assert recorder.most_at_once <= 2


def test_a_slow_piece_holds_back_only_itself():
    """The thread that runs a slow piece takes no other piece while the rest are done by the others."""
    recorder = Recorder(seconds=0.005, slow={0: 0.5})
    with pieces.threads_set_to(2):
        pieces.run(recorder, 16, 0)
    slow_thread = dict(recorder.calls)[0]
    assert [piece for piece, thread in recorder.calls if thread == slow_thread] == [0]


def test_the_error_of_the_first_failing_piece_is_raised_and_the_pool_goes_on():
    def fails(piece):
        if piece in (3, 5):
            raise ValueError(f"piece {piece}")
        return piece

    with pieces.threads_set_to(2):
        for _ in range(3):
            with pytest.raises(ValueError, match="piece 3"):
                pieces.run(fails, 8)
        assert pieces.run(lambda piece: piece * 2, 8) == [2 * piece for piece in range(8)]


def test_nested_runs_do_not_deadlock():
    def outer(piece):
        return sum(pieces.run(lambda inner: piece * 10 + inner, 4))

    results = []
    with pieces.threads_set_to(2):
        assert finishes(lambda: results.append(pieces.run(outer, 6)))
    assert results == [[sum(piece * 10 + inner for inner in range(4)) for piece in range(6)]]


def test_callers_on_several_threads_share_the_pool():
    """Two threads (as the trainer's sampling and the Dask driver's table thread) run at once."""
    results = {}

    def caller(name):
        pieces.set_threads(2)
        results[name] = pieces.run(Recorder(seconds=0.01), 12, len(name))

    threads = [threading.Thread(target=caller, args=(name,), daemon=True) for name in ("a", "bb", "ccc")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert not any(thread.is_alive() for thread in threads)
    assert results == {name: [piece + len(name) for piece in range(12)] for name in ("a", "bb", "ccc")}


def test_the_count_is_per_calling_thread_and_use_threads_sets_it():
    before = pieces.threads()
    with pieces.threads_set_to(1):
        assert use_threads(2) == 2
        assert pieces.threads() == 2
        seen = []
        other = threading.Thread(target=lambda: seen.append(pieces.threads()))
        other.start()
        other.join()
        assert seen == [numba.config.NUMBA_NUM_THREADS]
    assert pieces.threads() == before  # the count as it was before the block
    with pytest.raises(ValueError, match="at least 1"):
        pieces.set_threads(0)


def test_ranges_run_over_bounds():
    @njit(nogil=True)
    def square_range(first, last, values, out):
        for i in range(first, last):
            out[i] = values[i] * values[i]

    values = np.arange(50, dtype=np.float64)
    out = np.zeros(50)
    with pieces.threads_set_to(2):
        pieces.run_ranges(square_range, np.array([0, 7, 7, 30, 50]), values, out)
    np.testing.assert_array_equal(out, values ** 2)


def test_piece_count():
    assert pieces.piece_count(1) == 1
    assert pieces.piece_count(2) == 2 * pieces.PIECES_PER_THREAD
    assert pieces.piece_count(3, 2) == 6 and pieces.document_piece_count(1) == 1
    assert pieces.document_piece_count(2) == 2 * pieces.DOCUMENT_PIECES_PER_THREAD
