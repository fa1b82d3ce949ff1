"""The topic-word table: sparse statistics N[k, w] >= 0 with a lazy scale factor and resets.

The global step N <- (1 - rho) N + rho * scale * Nhat touches every entry; stored lazily as
M = N / pi it touches only the entries of Nhat (algorithms.md section 1, Mimno et al. 2012
eq. 16-19):

    pi <- pi * (1 - rho);   M[k, w] += rho * scale * Nhat[k, w] / pi;   Msum[k] += the same

and N[k, w] = pi * M[k, w], N[k] = pi * Msum[k] when read. pi shrinks geometrically, so once it
falls below `reset_below` a reset folds it into the entries (M <- pi M, pi <- 1), recomputes
Msum exactly, reclaims garbage, and drops entries with N[k, w] < `drop_below` (the mass removed
is counted in `mass_dropped`).

Layout (memory proportional to the stored entries plus O(V + K), never K x V): each word's row
is a small open-addressing hash table topic -> M in a segment of a shared pool; rows that fill
up move to a bigger segment at the end of the pool, which grows by doubling (kernels/table.py
has the details). With a directory the arrays are .npy memory maps in it, so a table larger
than RAM works; otherwise they live in memory.
"""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

import numpy as np

from .atomic import is_disk_full, no_space, temporary_sibling
from .checked import check_ids
from .kernels import pieces
from .kernels.table import (
    add_scaled,
    capacities_for,
    compact_pool,
    fill_rows,
    gather_rows,
    rescale_and_drop,
)
from .kernels.table_parallel import APPLIED, add_parallel

MIN_POOL_SLOTS = 4096
# Updates with fewer entries run on one thread (add_scaled): below this the threads' start-up
# costs more than they save (benchmarks/RESULTS.md, topic-word table).
PARALLEL_MIN_ENTRIES = 20_000


class _ArrayFiles:
    """Creates and grows 1-d arrays: .npy memory maps in a directory, or plain memory.

    A file's blocks are allocated (posix_fallocate) before it is mapped, so a full disk is an
    error when the array is created or grown (DiskFullError, naming the directory and the bytes
    it needed), never a SIGBUS when a page of the map is first written. `what` names the arrays
    in that error ("the topic-word table").
    """

    def __init__(self, directory: str | Path | None, what: str = "the topic-word table"):
        self.directory = None if directory is None else Path(directory)
        self.what = what
        self.maps: dict[str, np.memmap] = {}
        if self.directory is not None:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                if is_disk_full(e):
                    raise no_space(self.directory.parent, self.what, None) from e
                raise

    def new(self, name: str, dtype, length: int, copy_from: np.ndarray | None = None) -> np.ndarray:
        """A zeroed array (its start copied from `copy_from` if given) stored under `name`."""
        if self.directory is None:
            array = np.zeros(length, dtype)
            if copy_from is not None:
                array[: len(copy_from)] = copy_from
            return array
        # Build the new file under a temporary name, then swap it in: the old map stays valid
        # (its file unlinked) until the caller drops it.
        path = self.directory / f"{name}.npy"
        building = temporary_sibling(path, "grow")
        try:
            memmap = _allocated_memmap(building, np.dtype(dtype), int(length))
            array = np.asarray(memmap)
            if copy_from is not None:
                array[: len(copy_from)] = copy_from
            os.replace(building, path)
        except BaseException as e:
            building.unlink(missing_ok=True)
            if is_disk_full(e):
                raise no_space(self.directory, self.what, _npy_bytes(np.dtype(dtype), int(length))) from e
            raise
        self.maps[name] = memmap
        return array

    def close(self) -> None:
        for memmap in self.maps.values():
            memmap.flush()
        self.maps.clear()


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (length,)})
    return buffer.getvalue()


def _npy_bytes(dtype: np.dtype, length: int) -> int:
    """The size of the .npy file of a 1-d array."""
    return len(_npy_header(dtype, length)) + length * dtype.itemsize


def _allocated_memmap(path: Path, dtype: np.dtype, length: int) -> np.memmap:
    """A new .npy file of `length` zeros with every block allocated on disk, memory-mapped.

    The same file as np.lib.format.open_memmap writes, but open_memmap leaves it sparse: a
    store into a page whose block the full disk cannot supply then kills the process with
    SIGBUS. posix_fallocate reserves the blocks first, so a full disk is an OSError (ENOSPC)
    here; a filesystem that cannot reserve blocks gets the sparse file as before.
    """
    header = _npy_header(dtype, length)
    size = len(header) + length * dtype.itemsize
    with open(path, "xb") as f:
        f.write(header)
        f.flush()
        try:
            os.posix_fallocate(f.fileno(), 0, size)
        except AttributeError:  # not on this OS (macOS)
            f.truncate(size)
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            f.truncate(size)
    return np.memmap(path, dtype=dtype, mode="r+", offset=len(header), shape=(length,))


class TopicWordTable:
    """Sparse N[k, w] (K topics x V words) under lazy scaling; see the module docstring."""

    def __init__(self, n_topics: int, n_words: int, directory: str | Path | None = None,
                 initial_capacity: int = 4):
        if n_topics < 1 or n_words < 1:
            raise ValueError(f"the table needs at least one topic and one word (got K={n_topics}, V={n_words})")
        if initial_capacity < 2 or initial_capacity & (initial_capacity - 1):
            raise ValueError(f"initial_capacity must be a power of two >= 2 (got {initial_capacity})")
        self.n_topics = int(n_topics)
        self.n_words = int(n_words)
        self.initial_capacity = int(initial_capacity)
        self.pi = 1.0
        self.n_entries = 0
        self.n_resets = 0
        self.mass_dropped = 0.0
        self.reset_below = 1e-6
        self.drop_below = 0.0
        self._files = _ArrayFiles(directory)
        self._row_start = self._files.new("row_start", np.int64, self.n_words)
        self._row_capacity = self._files.new("row_capacity", np.int32, self.n_words)
        self._row_size = self._files.new("row_size", np.int32, self.n_words)
        self._pool_topics = self._files.new("pool_topics", np.int32, MIN_POOL_SLOTS)
        self._pool_values = self._files.new("pool_values", np.float64, MIN_POOL_SLOTS)
        self._pool_used = 0
        self._topic_sums = np.zeros(self.n_topics)

    # -- reading ---------------------------------------------------------------------------
    def topic_totals(self) -> np.ndarray:
        """N[k] = pi * Msum[k], float64 (K,)."""
        return self.pi * self._topic_sums

    def rows(self, words) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR over the given distinct word ids: (indptr, topics int32 ascending per row, N)."""
        return self._gather(self._check_ids(words, self.n_words, "word"), self.pi, sort=True)

    def to_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The whole table word-major: (indptr (V+1), topics ascending per row, N)."""
        return self._gather(np.arange(self.n_words, dtype=np.int64), self.pi, sort=True)

    def row_arrays(self) -> tuple:
        """(row_start, row_capacity, row_size, pool_topics, pool_values): the rows as the table
        kernels see them (kernels/table.py), for kernels that read the table in place."""
        return self._row_start, self._row_capacity, self._row_size, self._pool_topics, self._pool_values

    def nbytes(self) -> int:
        """Bytes the table's arrays occupy (memory or disk)."""
        arrays = (self._row_start, self._row_capacity, self._row_size, self._pool_topics,
                  self._pool_values, self._topic_sums)
        return int(sum(a.nbytes for a in arrays))

    def _gather(self, words: np.ndarray, scale: float, sort: bool):
        return gather_rows(words, scale, sort, *self.row_arrays())

    # -- the global step -------------------------------------------------------------------
    def update(self, words, topics, values, rho: float, scale: float) -> None:
        """N <- (1 - rho) N + rho * scale * Nhat, Nhat given as unique (word, topic, value).

        rho = 1 replaces N by scale * Nhat. Resets (with self.drop_below) once pi < reset_below.
        """
        words = self._check_ids(words, self.n_words, "word")
        topics = self._check_ids(topics, self.n_topics, "topic")
        values = np.ascontiguousarray(values, np.float64)
        if not len(words) == len(topics) == len(values):
            raise ValueError(f"words, topics and values differ in length ({len(words)}, {len(topics)}, {len(values)})")
        if len(values) and not (np.isfinite(values).all() and values.min() >= 0):
            raise ValueError("Nhat values must be finite and >= 0")
        if not 0.0 < rho <= 1.0:
            raise ValueError(f"the step size rho must lie in (0, 1] (got {rho})")
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be finite and > 0 (got {scale})")
        if rho == 1.0:
            self._clear()  # (1 - rho) N = 0: start afresh rather than divide by pi = 0
            coef = scale
        else:
            self.pi *= 1.0 - rho
            coef = rho * scale / self.pi
        first = 0
        if pieces.threads() > 1 and len(words) >= PARALLEL_MIN_ENTRIES:
            # the same arrays bit for bit; NOT_GROUPED or NO_ROOM change nothing and leave it to add_scaled
            outcome, pool_used, inserted = add_parallel(
                words, topics, values, coef, self._row_start, self._row_capacity, self._row_size,
                self._pool_topics, self._pool_values, self._pool_used, self._topic_sums, self.initial_capacity)
            if outcome == APPLIED:
                self._pool_used = pool_used
                self.n_entries += inserted
                first = len(words)
        while first < len(words):
            first, self._pool_used, inserted, room_needed = add_scaled(
                words, topics, values, first, coef, self._row_start, self._row_capacity, self._row_size,
                self._pool_topics, self._pool_values, self._pool_used, self._topic_sums, self.initial_capacity)
            self.n_entries += inserted
            if room_needed:
                self._make_room(room_needed)
        if self.pi < self.reset_below:
            self.reset()

    def reset(self, drop_below: float | None = None) -> float:
        """M <- pi M, pi <- 1, Msum recomputed, entries with N < drop_below (default
        self.drop_below) dropped, pool compacted and shrunk if mostly free. Returns the mass of
        N dropped."""
        threshold = self.drop_below if drop_below is None else float(drop_below)
        dropped, self.n_entries = rescale_and_drop(
            self.pi, threshold, self._row_start, self._row_capacity, self._row_size,
            self._pool_topics, self._pool_values, self._topic_sums)
        self.pi = 1.0
        self._compact()
        self._fit_pool()
        self.n_resets += 1
        self.mass_dropped += dropped
        return dropped

    def _clear(self) -> None:
        self._row_capacity[:] = 0
        self._row_size[:] = 0
        self._topic_sums[:] = 0.0
        self._pool_used = 0
        self.n_entries = 0
        self.pi = 1.0

    def _compact(self) -> None:
        live = np.flatnonzero(self._row_capacity)
        in_pool_order = live[np.argsort(self._row_start[live], kind="stable")]
        self._pool_used = compact_pool(in_pool_order, self._row_start, self._row_capacity, self._row_size,
                                       self._pool_topics, self._pool_values, self.initial_capacity)

    def _make_room(self, slots: int) -> None:
        """Room for `slots` more pool slots: compact first if at least a fifth of the used pool is
        garbage (outgrown row segments), then grow the pool by doubling if still short. Either
        costs O(pool) and at least a constant fraction of it is gained, so inserts stay O(1)
        amortized."""
        garbage = self._pool_used - int(self._row_capacity.sum(dtype=np.int64))
        if 5 * garbage >= self._pool_used:
            self._compact()
        self._ensure_pool(self._pool_used + slots)

    def _ensure_pool(self, slots: int) -> None:
        """Double the pool until it holds `slots`."""
        length = len(self._pool_topics)
        while length < slots:
            length *= 2
        self._resize_pool(length)

    def _fit_pool(self) -> None:
        """Halve the pool while at most a quarter of it is used (after a compaction)."""
        length = len(self._pool_topics)
        while length > MIN_POOL_SLOTS and 4 * self._pool_used <= length:
            length //= 2
        self._resize_pool(length)

    def _resize_pool(self, length: int) -> None:
        if length != len(self._pool_topics):
            used = self._pool_used
            self._pool_topics = self._files.new("pool_topics", np.int32, length, self._pool_topics[:used])
            self._pool_values = self._files.new("pool_values", np.float64, length, self._pool_values[:used])

    # -- persistence -----------------------------------------------------------------------
    def state(self) -> dict:
        """Everything needed to rebuild the table exactly: M word-major (rows in layout order, so
        from_state puts every entry back in its slot and samplers see the rows as before), pi,
        Msum, counters."""
        indptr, topics, stored = self._gather(np.arange(self.n_words, dtype=np.int64), 1.0, sort=False)
        return {
            "n_topics": self.n_topics, "n_words": self.n_words, "initial_capacity": self.initial_capacity,
            "indptr": indptr, "topics": topics, "stored_values": stored,
            "topic_sums": self._topic_sums.copy(), "pi": self.pi,
            "n_resets": self.n_resets, "mass_dropped": self.mass_dropped,
            "reset_below": self.reset_below, "drop_below": self.drop_below,
        }

    @classmethod
    def from_state(cls, state: dict, directory: str | Path | None = None) -> "TopicWordTable":
        """The table `state` came from; the same future updates give bit-identical results."""
        cls.check_state(state)  # before anything is allocated: the sizes come from a file
        table = cls(int(state["n_topics"]), int(state["n_words"]), directory, int(state["initial_capacity"]))
        indptr = np.asarray(state["indptr"], np.int64)
        topics = np.asarray(state["topics"], np.int32)
        stored = np.asarray(state["stored_values"], np.float64)
        topic_sums = np.asarray(state["topic_sums"], np.float64)
        sizes = np.diff(indptr)
        capacities = capacities_for(sizes, table.initial_capacity)
        table._row_size[:] = sizes
        table._row_capacity[:] = capacities
        table._row_start[:] = np.cumsum(capacities) - capacities
        table._ensure_pool(int(capacities.sum()))
        table._pool_used = int(capacities.sum())
        fill_rows(indptr, topics, stored, table._row_start, table._row_capacity,
                  table._pool_topics, table._pool_values)
        table._topic_sums[:] = topic_sums
        table.pi = float(state["pi"])
        table.n_entries = int(indptr[-1])
        table.n_resets = int(state["n_resets"])
        table.mass_dropped = float(state["mass_dropped"])
        table.reset_below = float(state["reset_below"])
        table.drop_below = float(state["drop_below"])
        return table

    @staticmethod
    def check_state(state: dict) -> None:
        """ValueError unless `state` is a table's state (TopicWordTable.state()) whose arrays agree
        with its sizes and hold possible values: from_state allocates by the declared sizes and
        its kernels index by the stored topics, so a damaged or crafted state must stop here."""
        try:
            n_topics, n_words = int(state["n_topics"]), int(state["n_words"])
            capacity = int(state["initial_capacity"])
            indptr, topics, stored, sums = (np.asarray(state[k]) for k in ("indptr", "topics", "stored_values",
                                                                          "topic_sums"))
            scalars = [float(state[k]) for k in ("pi", "mass_dropped", "reset_below", "drop_below")]
            n_resets = int(state["n_resets"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"inconsistent table state: {type(e).__name__} {e}") from None
        problems = []
        if n_topics < 1 or n_words < 1 or n_resets < 0:
            problems.append(f"K={n_topics}, V={n_words}, resets={n_resets}")
        if capacity < 2 or capacity & (capacity - 1) or capacity > max(4, 2 << max(n_topics - 1, 0).bit_length()):
            problems.append(f"initial capacity {capacity}")
        if not (indptr.ndim == topics.ndim == stored.ndim == sums.ndim == 1):
            problems.append("arrays of more than one dimension")
        elif len(indptr) != n_words + 1 or len(sums) != n_topics:
            problems.append(f"{len(indptr)} row pointers and {len(sums)} topic sums for V={n_words}, K={n_topics}")
        elif not (indptr.dtype.kind in "iu" and topics.dtype.kind in "iu" and stored.dtype.kind == "f"
                  and sums.dtype.kind == "f"):
            problems.append("arrays of the wrong types")
        elif indptr[0] != 0 or not (len(topics) == len(stored) == indptr[-1]):
            problems.append(f"{indptr[-1]} entries declared, {len(topics)} topics and {len(stored)} values stored")
        elif len(indptr) > 1 and not (0 <= (sizes := np.diff(indptr)).min() and sizes.max() <= n_topics):
            problems.append("rows of negative length or with more entries than topics")
        elif len(topics) and not (topics.min() >= 0 and topics.max() < n_topics):
            problems.append("topic ids out of range")
        elif not (np.isfinite(stored).all() and np.isfinite(sums).all() and (len(stored) == 0 or stored.min() >= 0)):
            problems.append("values that are negative or not finite")
        elif not (np.isfinite(scalars).all() and 0 < scalars[0] <= 1):
            problems.append(f"scalars out of range (pi={scalars[0]})")
        if problems:
            raise ValueError(f"inconsistent table state: {'; '.join(problems)}")

    def close(self) -> None:
        """Flush the memory maps and release them (the table is unusable afterwards)."""
        self._files.close()
        self._row_start = self._row_capacity = self._row_size = None
        self._pool_topics = self._pool_values = None

    @staticmethod
    def _check_ids(ids, bound: int, what: str) -> np.ndarray:
        ids = np.ascontiguousarray(ids, np.int64)
        check_ids(ids, bound, f"the {what} ids", ValueError)  # the check every reader of a file uses
        return ids
