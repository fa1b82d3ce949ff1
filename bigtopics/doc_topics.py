"""The document topics `bigtopics infer` writes (doc_topics.zarr; docs/formats.md), read and
written here so that every tool that reads them (export, site, report, diagnostics, evaluate)
needs this format, not the inference engine: a Zarr group of one CSR matrix, documents x topics,
with each document's length beside it.

Format version 2 is canonical CSR, as scipy, anndata and dask take it: topic ids int32 and
ascending within a row. Version 1 (topic ids uint16/uint32 by decreasing weight within a row,
which scipy's reductions refuse) is still read: `iter_blocks` gives every reader the rows of
either version with topic ids ascending.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import zarr

from .checked import CheckedChunks, check_ids, check_offsets
from .locations import is_url, locate
from .store import Store, StoreError, check_format, default_compressors, open_store

DOC_TOPICS_FORMAT_VERSION = 2
WEIGHT_ORDERED_VERSION = 1  # its rows by decreasing weight: reordered when read
INDEX_DTYPE = np.dtype(np.int32)  # the index type scipy's sparse matrices keep (int64 is cast down or copied)
LAYOUT = "canonical CSR: topic ids int32, ascending within a row (scipy's has_canonical_format)"
DOCS_PER_CHUNK = 1 << 16
ENTRIES_PER_CHUNK = 1 << 20
# each array's dimension (Zarr v3 dimension_names), so that xarray.open_zarr opens the group
DIMENSIONS = {"indptr": "doc_bound", "indices": "entry", "data": "entry", "doc_lengths": "doc"}
NORMALISATION = ("theta[d,k] = (alpha_k + n_dk) / (N_d + sum_k alpha_k), n_dk averaged over saved sweeps; "
                 "topics with n_dk = 0 or theta < threshold are left out and rows are not renormalised")


def create_arrays(group, n_docs: int, nnz: int, n_topics: int) -> tuple:
    """The group's empty arrays (indptr, indices, data, doc_lengths) for n_docs documents and nnz
    entries, to be filled in by the writer."""
    def create(name, length, dtype, chunk):
        return group.create_array(name, shape=(length,), chunks=(max(1, min(chunk, length)),), dtype=dtype,
                                  compressors=default_compressors(dtype), dimension_names=(DIMENSIONS[name],))

    return (create("indptr", n_docs + 1, np.int64, DOCS_PER_CHUNK),
            create("indices", nnz, INDEX_DTYPE, ENTRIES_PER_CHUNK),
            create("data", nnz, np.float32, ENTRIES_PER_CHUNK),
            create("doc_lengths", n_docs, np.int64, DOCS_PER_CHUNK))


class DocTopics:
    """A doc_topics.zarr written by `infer`, read block by block: from a local path (`path`), a
    URL or a zarr store object (`location`, the canonical text of either)."""

    def __init__(self, location, storage_options: dict | None = None):
        self._where = locate(location, storage_options)
        self.location, self.path = self._where.text, self._where.path
        attrs, occupied = self._where.inspect()
        if attrs is None:
            if self.path is None and not occupied:
                raise FileNotFoundError(f"{self.location} does not exist (no document topics there)")
            raise StoreError(f"{self.location} is not a doc_topics.zarr written by `bigtopics infer`")
        if "unfinished" in attrs:
            raise StoreError(f"{self.location} is incomplete: an inference did not finish writing it "
                             "(run bigtopics infer again)")
        try:
            with self._where.errors():
                self.group = zarr.open_group(CheckedChunks(self._where.zarr_store(True), self.location), mode="r")
                self.attrs = dict(self.group.attrs)
                self.weight_ordered = self.attrs.get("doc_topics_format_version") == WEIGHT_ORDERED_VERSION
                if not self.weight_ordered:
                    check_format(self.location, self.attrs, "doc_topics_format_version", DOC_TOPICS_FORMAT_VERSION)
                self.n_docs, self.n_topics = (int(x) for x in self.attrs["shape"])
                self.nnz = int(self.group["indices"].shape[0])
                self.docs_per_block = int(self.group["indptr"].chunks[0])
                shapes = {name: self.group[name].shape for name in ("indptr", "data", "doc_lengths")}
        except (FileNotFoundError, PermissionError, StoreError):
            raise
        except Exception as e:  # a crafted zarr.json or attribute: one line, not zarr's or int()'s traceback
            raise self._damaged(f"{type(e).__name__}: {str(e).strip()[:200]}") from e
        if shapes != {"indptr": (self.n_docs + 1,), "data": (self.nnz,), "doc_lengths": (self.n_docs,)}:
            raise self._damaged(f"its arrays' shapes {shapes} do not fit {self.n_docs:,} documents and "
                                f"{self.nnz:,} entries")

    def _damaged(self, what: str) -> StoreError:
        return StoreError(f"{self.location} is damaged: {what} (run bigtopics infer again)")

    def iter_blocks(self, docs_per_block: int | None = None):
        """Yield (first document, indptr rebased to 0, topics ascending within each row, weights,
        doc_lengths) per block, each checked: offsets ascending within the entries, topic ids below
        K, weights in [0, 1], lengths >= 0 (one line naming the array and the first bad position)."""
        step = docs_per_block or self.docs_per_block
        for lo in range(0, self.n_docs, step):
            hi = min(lo + step, self.n_docs)
            with self._where.errors():
                indptr = np.asarray(self.group["indptr"][lo : hi + 1])
                check_offsets(indptr, "indptr", self._damaged, low=0, high=self.nnz, first=0 if lo == 0 else None,
                              last=self.nnz if hi == self.n_docs else None, start=lo)
                a, b = int(indptr[0]), int(indptr[-1])
                topics = np.asarray(self.group["indices"][a:b])
                block = (lo, indptr - a, topics.astype(np.int64), np.asarray(self.group["data"][a:b], np.float64),
                         np.asarray(self.group["doc_lengths"][lo:hi]))
            check_ids(topics, self.n_topics, "indices", self._damaged, start=a)
            weights, lengths = block[3], block[4]
            if len(weights) and not (np.isfinite(weights).all() and weights.min() >= 0 and weights.max() <= 1):
                p = int(np.argmax(~(np.isfinite(weights) & (weights >= 0) & (weights <= 1))))
                raise self._damaged(f"data holds {weights[p]} at position {a + p:,}, not a weight in [0, 1]")
            if len(lengths) and (lengths.dtype.kind not in "iu" or lengths.min() < 0):
                p = int(np.argmax(lengths < 0))
                raise self._damaged(f"doc_lengths holds {lengths[p]} at position {lo + p:,}, not a length")
            if self.weight_ordered:  # (positions above are the file's, before the rows are put in topic order)
                block = _by_topic(*block)
            else:
                self._check_ascending(block[1], block[2], a)
            yield block

    def _check_ascending(self, indptr: np.ndarray, topics: np.ndarray, start: int) -> None:
        """Topic ids strictly ascending within each row, as the layout declares."""
        if len(topics) < 2:
            return
        same_row = np.ones(len(topics) - 1, bool)
        same_row[indptr[1:-1][(indptr[1:-1] > 0) & (indptr[1:-1] < len(topics))] - 1] = False
        bad = np.flatnonzero(same_row & (np.diff(topics) <= 0))
        if len(bad):
            raise self._damaged(f"indices holds topic {topics[bad[0] + 1]} after {topics[bad[0]]} within a row at "
                                f"position {start + int(bad[0]) + 1:,}: not ascending")

    def source_store(self, store=None, n_topics: int | None = None, storage_options: dict | None = None) -> Store:
        """The store these topics were inferred from (`store`, a path or URL, else the one recorded),
        opened and checked to have their documents (and, given n_topics, their model's topics)."""
        store = store or self.attrs.get("store")
        if store is None or (not is_url(store) and not Path(store).exists()):
            raise FileNotFoundError(f"the store {store} that {self.location} was inferred from is gone; give --store")
        opened = open_store(store, storage_options)
        if opened.n_docs != self.n_docs or (n_topics is not None and self.n_topics != n_topics):
            raise StoreError(f"{self.location} ({self.n_docs:,} documents, {self.n_topics} topics) does not match "
                             f"{opened.location} ({opened.n_docs:,} documents) and the model ({n_topics} topics)")
        return opened


def by_weight(indptr: np.ndarray, topics: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A block's (topics, weights) with each row by decreasing weight, ties by the lower topic: for
    the readers that list a document's topics largest first (its first entry is its top topic)."""
    order = np.lexsort((topics, -weights, np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))))
    return topics[order], weights[order]


def _by_topic(first: int, indptr: np.ndarray, topics: np.ndarray, weights: np.ndarray, lengths: np.ndarray):
    """A block of a version-1 file (rows by decreasing weight) with each row's topics ascending."""
    order = np.lexsort((topics, np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))))
    return first, indptr, topics[order], weights[order], lengths
