"""Work in pieces that threads take as they come free: the one mechanism every parallel kernel uses.

A parallel kernel is a per-piece function, compiled njit(cache=True, nogil=True): serial, so
numba caches it (numba cannot safely cache parallel functions, so each process compiled every
parallel driver anew, about 29 s of a core for `bigtopics train`), and free of the GIL while it
runs, so plain Python threads run the pieces truly in parallel. `run` calls it for pieces
0 .. n_pieces - 1: the calling thread and up to threads() - 1 helpers each take the next piece
not yet taken until none is left. The work is cut into more pieces than threads (piece_count),
so a thread that loses its core to another process holds the others back by at most its current
piece, not by a static share of the whole phase.

Which thread runs which piece, and when, varies from run to run; what a piece writes does not:
every kernel writes each piece's output at offsets fixed by the data (a document's slot, a
word's row), and `run` returns the pieces' results in piece order, so a kernel that reduces them
combines them in that order. The model is the same on any number of threads and under any load.

The thread count is per calling thread (set_threads; a new thread starts at numba's default
count, NUMBA_NUM_THREADS), as numba's own is: a Dask worker's task threads and the driver's table
thread each set theirs. The helpers are one process-wide set of daemon threads, started as
first needed. A call from inside a piece (nested) runs its pieces inline on that thread. Callers
that run at the same time (the trainer's table thread beside its sampling) share the helpers; each
caller works through its own pieces too, so it finishes even if no helper is free.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from contextlib import contextmanager

import numba

# Pieces per thread: more balance the load when a thread is slowed (each piece is a bound on the
# wait for a slow thread), fewer cost less per-piece overhead (a call from Python, its scratch)
PIECES_PER_THREAD = 4
# The samplers' pieces of documents: each piece sets up the rows of its words once per sweep (the
# word-major sampler spreads each row), work that more, smaller pieces repeat; measured in
# benchmarks/RESULTS.md, "Pieces on a thread pool"
DOCUMENT_PIECES_PER_THREAD = 1

_local = threading.local()
_tasks: queue.SimpleQueue = queue.SimpleQueue()
_helpers: list[threading.Thread] = []
_helpers_lock = threading.Lock()


def set_threads(n: int) -> None:
    """Run this thread's parallel kernels on n threads (itself and n - 1 helpers)."""
    if n < 1:
        raise ValueError(f"the number of threads must be at least 1 (got {n})")
    _local.threads = int(n)


@contextmanager
def threads_set_to(n: int):
    """set_threads(n) for the `with` block, then this thread's count as it was."""
    before = threads()
    set_threads(n)
    try:
        yield
    finally:
        set_threads(before)


def threads() -> int:
    """The threads this thread's parallel kernels run on (set_threads; numba's default count)."""
    return getattr(_local, "threads", numba.config.NUMBA_NUM_THREADS)


def piece_count(n_threads: int, per_thread: int | None = None) -> int:
    """How many pieces to cut a phase into for n_threads: one for a single thread, else
    per_thread (PIECES_PER_THREAD unless given) each."""
    return 1 if n_threads <= 1 else n_threads * (PIECES_PER_THREAD if per_thread is None else per_thread)


def document_piece_count(n_threads: int) -> int:
    """How many pieces of documents a sampler cuts a minibatch into (DOCUMENT_PIECES_PER_THREAD)."""
    return piece_count(n_threads, DOCUMENT_PIECES_PER_THREAD)


class _Run:
    """One call of `run`: its pieces, handed out one at a time, and their results in piece order."""

    def __init__(self, piece_fn: Callable, n_pieces: int, args: tuple):
        self.piece_fn = piece_fn
        self.n_pieces = n_pieces
        self.args = args
        self.results: list = [None] * n_pieces
        self.errors: dict[int, BaseException] = {}
        self.next_piece = itertools.count()  # next() on a count is atomic in CPython
        self.lock = threading.Lock()
        self.n_finished = 0
        self.finished = threading.Event()

    def work(self) -> None:
        """Take pieces until none is left; after an error the remaining pieces are only counted."""
        while (piece := next(self.next_piece)) < self.n_pieces:
            if not self.errors:
                try:
                    self.results[piece] = self.piece_fn(piece, *self.args)
                except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
                    self.errors[piece] = error
            with self.lock:
                self.n_finished += 1
                if self.n_finished == self.n_pieces:
                    self.finished.set()


def _helper() -> None:
    _local.in_piece = True
    while True:
        _tasks.get().work()


def _ensure_helpers(n: int) -> None:
    with _helpers_lock:
        while len(_helpers) < n:
            helper = threading.Thread(target=_helper, name=f"bigtopics-pieces-{len(_helpers)}", daemon=True)
            helper.start()
            _helpers.append(helper)


def run(piece_fn: Callable, n_pieces: int, *args) -> list:
    """[piece_fn(piece, *args) for piece in range(n_pieces)], the pieces run on threads() threads
    as they come free; the results in piece order. If pieces raise, the others still finish or are
    skipped, and the error of the first such piece is raised here."""
    n_threads = min(threads(), n_pieces)
    if n_threads <= 1 or getattr(_local, "in_piece", False):
        return [piece_fn(piece, *args) for piece in range(n_pieces)]
    task = _Run(piece_fn, n_pieces, args)
    _ensure_helpers(n_threads - 1)
    for _ in range(n_threads - 1):
        _tasks.put(task)
    _local.in_piece = True
    try:
        task.work()
    finally:
        _local.in_piece = False
    task.finished.wait()
    if task.errors:
        raise task.errors[min(task.errors)]
    return task.results


def run_ranges(range_fn: Callable, bounds, *args) -> list:
    """range_fn(bounds[p], bounds[p + 1], *args) for each piece p (bounds: kernels/ranges.py
    even_ranges), as `run`."""
    return run(_call_range, len(bounds) - 1, range_fn, bounds, args)


def _call_range(piece: int, range_fn: Callable, bounds, args: tuple):
    return range_fn(bounds[piece], bounds[piece + 1], *args)
