"""Checked reads: what bigtopics reads from a store, document topics or a model is checked against
what the file declares before any of it indexes an array (a numba kernel does not check bounds:
a crafted word id reads or writes outside its array, or crashes the process).

Two parts, used by every reader:

- `CheckedChunks`, the zarr store every Store and DocTopics reads through. Zarr v3 reads a chunk
  that is not there as the array's fill value (word 0, count 0, offset 0) without a word, so a
  store whose chunks vanish while it is in use (deleted, moved, its bucket removed) would read as
  empty documents. bigtopics writes every chunk (store.py), so a missing chunk is always damage:
  here it is an error, on every read, at no cost (the check is on the answer zarr gets anyway).
- The value checks (`check_ids`, `check_offsets`, `check_counts`): ids below their bound, offsets
  ascending within their range, counts positive; each failure names the array and the first bad
  position, through the caller's `damaged` (which says whose file it is and what to do).
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np
from zarr.storage import WrapperStore

from .locations import StoreError

# A chunk's key under zarr v3's default encoding: <array>/c/<i>[/<j>...] ("c" alone for 0-d arrays).
CHUNK_KEY = re.compile(r"(?:^|/)c(?:/\d+)*$")


class StoreChanged(StoreError):
    """Part of a store (or of document topics) that was there when it was opened is gone, or
    holds what its declarations rule out: it changed or vanished while in use."""


class CheckedChunks(WrapperStore):
    """A zarr store that raises StoreChanged for a chunk that is not there, where zarr would read
    its fill value. `location` names the group in messages."""

    def __init__(self, store, location: str = ""):
        super().__init__(store)
        self.location = location or str(store)

    def _with_store(self, store):
        return type(self)(store, self.location)

    async def get(self, key, prototype, byte_range=None):
        value = await self._store.get(key, prototype, byte_range)
        if value is None and CHUNK_KEY.search(key):
            raise await self._missing(key)
        return value

    async def get_partial_values(self, prototype, key_ranges):
        key_ranges = list(key_ranges)
        values = await self._store.get_partial_values(prototype, key_ranges)
        for (key, _), value in zip(key_ranges, values):
            if value is None and CHUNK_KEY.search(key):
                raise await self._missing(key)
        return values

    async def _missing(self, key: str) -> StoreChanged:
        try:  # only on the error's path: one more look, to say whether all of it is gone
            whole = not await self._store.exists("zarr.json")
        except Exception:  # the storage itself failing: say what was asked for
            whole = True
        if whole:
            return StoreChanged(f"{self.location} is gone: it was moved or deleted while in use "
                                f"(reading {key}); put it back, or give where it is now")
        return StoreChanged(f"{self.location} is damaged: chunk {key} is missing (deleted or changed while in "
                            "use?); restore it, or ingest it again")


Damaged = Callable[[str], Exception]


def _first(mask: np.ndarray) -> int:
    return int(np.argmax(mask))


def check_ids(ids: np.ndarray, limit: int, name: str, damaged: Damaged, start: int = 0) -> None:
    """Every id in [0, limit); else damaged("<name> holds id <v> at position <p>, ...") for the
    first one outside (p counted from `start`: where `ids` begins in its array)."""
    if not len(ids):
        return
    if ids.dtype.kind not in "iu":
        raise damaged(f"{name} holds {ids.dtype} values, not whole numbers")
    high = ids.max()
    low = ids.min() if ids.dtype.kind == "i" else 0
    if high >= limit or low < 0:
        p = _first((ids >= limit) | (ids < 0))
        where = f"beyond the {limit} there are" if ids[p] >= limit else "below 0"
        raise damaged(f"{name} holds id {int(ids[p])} at position {start + p:,}, {where}")


def check_offsets(indptr: np.ndarray, name: str, damaged: Damaged, *, low: int, high: int,
                  first: int | None = None, last: int | None = None, start: int = 0) -> None:
    """indptr ascending within [low, high] (the entries there are), starting at `first` and ending
    at `last` where given; else damaged(...) naming the first position that breaks it."""
    if indptr.dtype.kind not in "iu":
        raise damaged(f"{name} holds {indptr.dtype} values, not whole numbers")
    what = f"{name} is not an ascending offset array from {low} to {high}"
    if first is not None and len(indptr) and indptr[0] != first:
        raise damaged(f"{what} (position {start:,} holds {int(indptr[0])}, not {first})")
    if last is not None and len(indptr) and indptr[-1] != last:
        raise damaged(f"{what} (position {start + len(indptr) - 1:,} holds {int(indptr[-1])}, not {last})")
    steps = np.diff(indptr)
    if len(steps) and steps.min() < 0:
        p = _first(steps < 0) + 1
        raise damaged(f"{what} (position {start + p:,} holds {int(indptr[p])}, after {int(indptr[p - 1])})")
    if len(indptr) and (indptr[0] < low or indptr[-1] > high):
        p = 0 if indptr[0] < low else len(indptr) - 1
        raise damaged(f"{what} (position {start + p:,} holds {int(indptr[p])})")


def check_counts(counts: np.ndarray, name: str, damaged: Damaged, start: int = 0) -> None:
    """Every count a positive whole number; else damaged(...) naming the first that is not."""
    if counts.dtype.kind not in "iu":
        raise damaged(f"{name} holds {counts.dtype} values, not whole numbers")
    if len(counts) and counts.min() < 1:
        p = _first(counts < 1)
        raise damaged(f"{name} holds {int(counts[p])} at position {start + p:,}; counts are at least 1")
