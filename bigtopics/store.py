"""The corpus store: documents as a chunked, compressed CSR matrix in a Zarr v3 group.

Layout (format_version 1; see README "The store"):

    <store>/                 group; attrs: encoding-type="csr_matrix", encoding-version="0.1.0",
                             shape=[n_docs, n_words] (anndata's on-disk CSR convention), and
                             format_version, n_docs, n_words, n_tokens, settings (tokenizer and
                             pruning settings used), created_by
      indptr     int64  (n_docs + 1,)   row d is indices/data[indptr[d]:indptr[d+1]]
      indices    uint16|uint32 (nnz,)   word ids, ascending within a row
      data       uint8|uint16|uint32 (nnz,)   counts (> 0)
      vocab      str    (n_words,)      word id -> word; id 0 is the most frequent word
      term_counts int64 (n_words,)      corpus frequency of each word
      doc_freqs  int64  (n_words,)      number of documents containing each word
      doc_ids    str    (n_docs,)       a document's id in its source
      doc_meta/<field>  (n_docs,)       per-document metadata (int64, float64, bool or str)

`indptr` is chunked so that one chunk of documents covers about one chunk of `indices`: a reader
streams the store one indptr chunk ("block") at a time.

A store lives at a local path, a URL of any fsspec filesystem (s3://bucket/prefix/books.zarr,
gs://, memory://, file://) or in a zarr store object (locations.py: credentials and
endpoint from the environment and `storage_options`). A local store is built under a temporary
name and renamed into place; a remote one is written in place and counts as complete only once
its attributes (format_version, n_docs, ...) are written, last: until then `Store` refuses it.
A `Store` pickles as its location and storage options and reopens on the other side (a Dask
worker), so `open_store(**store.spec())` and `pickle.loads(pickle.dumps(store))` both work.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import zarr
from zarr.codecs import BloscCodec
from zarr.core.sync import sync

from .checked import CheckedChunks, StoreChanged, check_counts, check_ids, check_offsets
from .locations import Location, StoreError, locate
from .memory import available_bytes, format_bytes
from .outputs import NewGroup
from .places import KIND_ATTRIBUTES

FORMAT_VERSION = 1
CSR_ENCODING = {"encoding-type": "csr_matrix", "encoding-version": "0.1.0"}
DEFAULT_ENTRIES_PER_CHUNK = 1 << 20
STRING_CHUNK = 1 << 16
# The least memory a token of a block takes once expanded to be sampled (its word, topic, document
# and place, int32 each; resources.py's estimate of a whole minibatch is larger). A block whose
# tokens need more than the memory available is refused before anything is sized from its counts;
# below LARGE_BLOCK_BYTES the memory is not asked (a block is about a million entries).
TOKEN_BYTES = 16
LARGE_BLOCK_BYTES = 256 << 20


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:200]}" if text else type(e).__name__


def check_format(path, attrs: dict, key: str, version: int, wanted: str | None = None) -> None:
    """Raise a StoreError unless attrs[key] == version, saying what `path` (a path or location)
    is if it is another kind, and what was `wanted` (by default the kind `key` marks)."""
    if attrs.get(key) == version:
        return
    if key not in attrs:
        found = next((kind for k, kind in KIND_ATTRIBUTES.items() if k in attrs),
                     "a Zarr group bigtopics did not write")
        raise StoreError(f"{path} is {found}, not {wanted or KIND_ATTRIBUTES[key]}")
    raise StoreError(f"{path} is {KIND_ATTRIBUTES[key]} of format version {attrs[key]!r}; this bigtopics reads "
                     f"version {version}")


def default_compressors(dtype: np.dtype | type | str):
    """The codec chosen by measurement (benchmarks/RESULTS.md, "store codec")."""
    return BloscCodec(cname="zstd", clevel=3, shuffle="shuffle")


def index_dtype_for(n_words: int) -> np.dtype:
    return np.dtype(np.uint16) if n_words <= (1 << 16) else np.dtype(np.uint32)


def count_dtype_for(max_count: int) -> np.dtype:
    for dt in (np.uint8, np.uint16, np.uint32):
        if max_count <= np.iinfo(dt).max:
            return np.dtype(dt)
    raise StoreError(f"a count of {max_count} does not fit in uint32")


@dataclass
class CSRBlock:
    """Consecutive documents [start, start + n_docs) of a store, as CSR arrays.

    indptr is rebased to start at 0; indices are word ids, data the counts.
    """

    start: int
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    @property
    def n_docs(self) -> int:
        return len(self.indptr) - 1

    @property
    def doc_lengths(self) -> np.ndarray:
        """Tokens per document."""
        csum = np.concatenate([[0], np.cumsum(self.data, dtype=np.int64)])
        return csum[self.indptr[1:]] - csum[self.indptr[:-1]]

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.indptr[i], self.indptr[i + 1]
        return self.indices[lo:hi], self.data[lo:hi]


class ChunkAppender:
    """Appends to a 1-D zarr array (created empty) whole chunks at a time: no read-modify-write of
    a chunk, which writing a few values at a time into a large chunk would repeat at every write."""

    def __init__(self, array: zarr.Array):
        self.array = array
        self.chunk = array.chunks[0]
        self.length = 0
        self.pending: list[np.ndarray] = []
        self.pending_len = 0

    def append(self, values: np.ndarray) -> None:
        if len(values) == 0:
            return
        self.pending.append(values)
        self.pending_len += len(values)
        if self.pending_len >= self.chunk:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        if not self.pending:
            return
        buf = np.concatenate(self.pending) if len(self.pending) > 1 else self.pending[0]
        n_write = len(buf) if final else (len(buf) // self.chunk) * self.chunk
        if n_write:
            self.array.resize((self.length + n_write,))
            self.array[self.length : self.length + n_write] = buf[:n_write]
            self.length += n_write
        rest = buf[n_write:]
        self.pending = [rest] if len(rest) else []
        self.pending_len = len(rest)

    def close(self) -> None:
        self._flush(final=True)


def _create_1d(group: zarr.Group, name: str, dtype, chunk: int) -> zarr.Array:
    # Every chunk is written, even one equal to the fill value, so a missing chunk file always
    # means damage (Store checks for them).
    if np.dtype(dtype).kind in "OUT":
        return group.create_array(name, shape=(0,), chunks=(chunk,), dtype=str,
                                  compressors=default_compressors(str), config={"write_empty_chunks": True})
    return group.create_array(name, shape=(0,), chunks=(chunk,), dtype=dtype,
                              compressors=default_compressors(dtype), config={"write_empty_chunks": True})


class StoreWriter:
    """Writes a new store document block by document block, then publishes it.

    Locally the store is built under a hidden temporary name next to `location` and renamed into
    place by `commit`; until then nothing at `location` opens as a store. At a URL (or in a zarr
    store object) it is written in place: an earlier store there is deleted first (with
    `overwrite`, and only if bigtopics wrote it), and `commit` writes the group's attributes last,
    so that `Store` refuses it as incomplete until then (outputs.NewGroup). `abort` (or an
    exception inside a `with` block) removes what was written.

    `docs_per_chunk` should make one indptr chunk cover about `entries_per_chunk` entries;
    `metadata_fields` maps metadata field names to dtypes (str for text).
    """

    def __init__(
        self,
        location: str | os.PathLike | Location,
        *,
        index_dtype=np.uint32,
        count_dtype=np.uint32,
        entries_per_chunk: int = DEFAULT_ENTRIES_PER_CHUNK,
        docs_per_chunk: int = 1 << 14,
        metadata_fields: dict[str, object] | None = None,
        overwrite: bool = False,
        storage_options: dict | None = None,
    ):
        self.target = NewGroup(location, overwrite, storage_options, kind="store")
        self.location, self.path = self.target.location.text, self.target.location.path
        self.group = self.target.group
        self.index_dtype, self.count_dtype = np.dtype(index_dtype), np.dtype(count_dtype)
        g = self.group
        try:
            with self.target.errors():
                self._indptr = ChunkAppender(_create_1d(g, "indptr", np.int64, docs_per_chunk))
                self._indices = ChunkAppender(_create_1d(g, "indices", self.index_dtype, entries_per_chunk))
                self._data = ChunkAppender(_create_1d(g, "data", self.count_dtype, entries_per_chunk))
                self._doc_ids = ChunkAppender(_create_1d(g, "doc_ids", str, STRING_CHUNK))
                meta = g.create_group("doc_meta")
                self.metadata_fields = dict(metadata_fields or {})
                self._meta = {
                    name: ChunkAppender(_create_1d(meta, name, dt,
                                               STRING_CHUNK if np.dtype(dt).kind in "OUT" else docs_per_chunk))
                    for name, dt in self.metadata_fields.items()
                }
        except BaseException:
            self.abort()
            raise
        self._indptr.append(np.zeros(1, np.int64))
        self.n_docs = 0
        self.nnz = 0
        self.n_tokens = 0

    def append(self, indptr, indices, data, doc_ids, metadata: dict | None = None) -> None:
        """Append documents given as a CSR block (indptr starting at 0) with their ids."""
        with self.target.errors():
            self._append(indptr, indices, data, doc_ids, metadata)

    def _append(self, indptr, indices, data, doc_ids, metadata: dict | None = None) -> None:
        indptr = np.asarray(indptr, np.int64)
        n = len(indptr) - 1
        if len(doc_ids) != n:
            raise ValueError(f"{len(doc_ids)} doc ids for {n} documents")
        self._indptr.append(indptr[1:] + self.nnz)
        self._indices.append(np.asarray(indices, self.index_dtype))
        self._data.append(np.asarray(data, self.count_dtype))
        self._doc_ids.append(np.asarray(doc_ids, dtype=str))
        metadata = metadata or {}
        for name, app in self._meta.items():
            values = metadata.get(name)
            if values is None or len(values) != n:
                raise ValueError(f"metadata field {name!r} needs {n} values")
            app.append(np.asarray(values, dtype=str if np.dtype(self.metadata_fields[name]).kind in "OUT"
                                  else self.metadata_fields[name]))
        self.n_docs += n
        self.nnz += int(indptr[-1])
        self.n_tokens += int(np.asarray(data, np.int64).sum())

    def commit(self, vocab, term_counts, doc_freqs, attrs: dict | None = None) -> Path | str:
        """Write the vocabulary, then the attributes (last), and publish the store; returns its
        path (local) or location."""
        n_words = len(vocab)
        with self.target.errors():
            for app in (self._indptr, self._indices, self._data, self._doc_ids, *self._meta.values()):
                app.close()
            for name, values, dt in (
                ("vocab", np.asarray(vocab, dtype=str), str),
                ("term_counts", np.asarray(term_counts, np.int64), np.int64),
                ("doc_freqs", np.asarray(doc_freqs, np.int64), np.int64),
            ):
                arr = _create_1d(self.group, name, dt, STRING_CHUNK if dt is str else max(1, min(n_words, 1 << 20)))
                arr.resize((n_words,))
                if n_words:
                    arr[:] = values
        self.target.publish(
            {
                **CSR_ENCODING,
                "shape": [self.n_docs, n_words],
                "format_version": FORMAT_VERSION,
                "n_docs": self.n_docs,
                "n_words": n_words,
                "n_tokens": self.n_tokens,
                "nnz": self.nnz,
                "created_by": "bigtopics",
                **(attrs or {}),
            }
        )
        return self.path if self.path is not None else self.location

    def abort(self) -> None:
        self.target.abort()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.abort()


async def _count_chunk_keys(store, names: list[str]) -> dict[str, int]:
    """How many chunk objects each array of `names` holds (keys listed, not generated)."""
    counts = {}
    for name in names:
        counts[name] = sum([1 async for key in store.list_prefix(f"{name}/c")])
    return counts


class Store:
    """A read-only view of a store; arrays are read chunk by chunk on demand.

    `location` is the canonical text of where it lives (the absolute local path, or the URL),
    `path` the local directory (None for a store at a URL or in a zarr store object),
    `storage_options` the fsspec options a URL was opened with. A Store pickles as `spec()` and
    reopens from it (without repeating the check for missing chunks, and refusing a store whose
    content changed in between).
    """

    def __init__(self, location: str | os.PathLike | Location, storage_options: dict | None = None, *,
                 verify: bool = True):
        self._where = locate(location, storage_options)
        self.location, self.path, self.storage_options = (self._where.text, self._where.path,
                                                          self._where.storage_options)
        attrs, occupied = self._where.inspect()
        if attrs is None:
            if self.path is None and not occupied:
                raise FileNotFoundError(f"{self.location} does not exist (no store there)")
            raise StoreError(f"{self.location} is not a bigtopics store "
                             "(no zarr.json; an unfinished ingest leaves none)")
        if "unfinished" in attrs:
            raise StoreError(f"{self.location} is incomplete: an ingest did not finish writing it (ingest it again)")
        check_format(self.location, attrs, "format_version", FORMAT_VERSION)
        try:
            with self._where.errors():
                # every chunk is read through CheckedChunks: one gone since opening is an error, not
                # the fill value zarr would read in its place (checked.py)
                self.group = zarr.open_group(CheckedChunks(self._where.zarr_store(True), self.location), mode="r")
        except (FileNotFoundError, PermissionError, StoreError):
            raise
        except Exception as e:  # zarr raises several types for a damaged group (json's RecursionError too)
            raise StoreError(f"{self.location} cannot be opened as a Zarr group: {_first_line(e)}") from e
        self.attrs = dict(self.group.attrs)
        check_format(self.location, self.attrs, "format_version", FORMAT_VERSION)
        self.n_docs, self.n_words, self.n_tokens = (self._count(name) for name in ("n_docs", "n_words", "n_tokens"))
        if not isinstance(self.attrs.get("settings", {}), dict):
            raise self._damaged(f"its attribute settings is {type(self.attrs['settings']).__name__}, not an object")
        with self._where.errors():
            self._indptr, self._indices, self._data = (self._array(name, kinds) for name, kinds in
                                                       (("indptr", "iu"), ("indices", "iu"), ("data", "iu")))
            self.nnz = self._count("nnz") if "nnz" in self.attrs else self._indices.shape[0]
        if not self.nnz <= self.n_tokens <= self.nnz * np.iinfo(self._data.dtype).max:
            raise self._damaged(f"n_tokens {self.n_tokens:,} cannot be the sum of {self.nnz:,} counts of "
                                f"{self._data.dtype} (each at least 1)")
        self._vocab = None
        if verify:
            self._check_chunks()

    def _check_chunks(self) -> None:
        # Zarr reads a missing chunk as its fill value (word 0, count 0): training would go on, on
        # wrong documents. (Older stores omit chunks that equal the fill value throughout, which
        # these arrays of a real corpus never do: counts are positive, words named.) The declared
        # shapes are checked against the group's counts first, and the chunks present are counted
        # by listing them (zarr's nchunks_initialized builds every key the shape declares, so a
        # damaged shape of 10^13 would exhaust memory before anything said so).
        expected = {"indptr": self.n_docs + 1, "indices": self.nnz, "data": self.nnz, "vocab": self.n_words}
        with self._where.errors():
            # (remote: a request each)
            arrays = {name: self._array(name, "OTU" if name == "vocab" else "iu") for name in expected}
            for name, length in expected.items():
                if arrays[name].shape != (length,):
                    raise StoreError(f"{self.location} is damaged: {name} declares shape {arrays[name].shape}, the "
                                     f"store's counts say ({length},) (ingest it again)")
            present = sync(_count_chunk_keys(self.group.store, list(expected)))
            for name, array in arrays.items():
                missing = array.nchunks - present[name]
                if missing > 0:
                    raise StoreError(f"{self.location} is damaged: {missing} of the {array.nchunks} chunks of {name} "
                                     "are missing (ingest it again)")

    def _damaged(self, what: str) -> StoreError:
        return StoreError(f"{self.location} is damaged: {what} (ingest it again)")

    def _count(self, name: str) -> int:
        """The attribute `name`, a whole number >= 0 (a crafted one is one line, not int()'s error)."""
        value = self.attrs.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self._damaged(f"its attribute {name} is {str(value)[:40]!r}, not a whole number >= 0")
        return value

    def _array(self, name: str, kinds: str | None = None) -> zarr.Array:
        """The 1-D array `name`, of a dtype whose kind is among `kinds` ("iu": whole numbers; None: any)."""
        try:
            array = self.group[name]
        except KeyError:
            if not sync(self.group.store.exists("zarr.json")):
                raise StoreChanged(f"{self.location} is gone: it was moved or deleted while in use (reading "
                                   f"{name}); put it back, or give where it is now") from None
            raise self._damaged(f"it has no array {name}") from None
        except (FileNotFoundError, PermissionError, StoreError):
            raise
        except Exception as e:  # a crafted zarr.json of the array (json's RecursionError among them)
            raise self._damaged(f"{name}/zarr.json cannot be read ({_first_line(e)})") from e
        if not isinstance(array, zarr.Array) or array.ndim != 1:
            raise self._damaged(f"{name} is {'a group' if not isinstance(array, zarr.Array) else f'{array.ndim}-D'}, "
                                "not a 1-D array")
        if kinds is not None and array.dtype.kind not in kinds:
            raise self._damaged(f"{name} holds {array.dtype} values, "
                                f"not {'whole numbers' if kinds == 'iu' else 'text'}")
        return array

    # -- reopening elsewhere -------------------------------------------------------------
    def spec(self) -> dict:
        """A small picklable dict that reopens this store anywhere: open_store(**store.spec())."""
        return self._where.spec()

    def __getstate__(self) -> dict:
        return {"spec": self.spec(), "fingerprint": self.fingerprint()}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state["spec"], verify=False)
        if self.fingerprint() != state["fingerprint"]:
            raise StoreError(f"{self.location} changed since it was opened (it was ingested again?)")

    @classmethod
    def reopen(cls, state: dict) -> "Store":
        """The store `__getstate__` described, opened in this process (and checked)."""
        store = cls.__new__(cls)
        store.__setstate__(state)
        return store

    # -- sizes and vocabulary ------------------------------------------------------------
    @property
    def settings(self) -> dict:
        return dict(self.attrs.get("settings", {}))

    @property
    def vocab(self) -> np.ndarray:
        if self._vocab is None:
            self._vocab = np.asarray(self._column("vocab"), dtype=object)
        return self._vocab

    @property
    def term_counts(self) -> np.ndarray:
        return np.asarray(self._column("term_counts"))

    @property
    def doc_freqs(self) -> np.ndarray:
        return np.asarray(self._column("doc_freqs"))

    def _column(self, name: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        with self._where.errors():
            return self._array(name)[start:stop]

    @property
    def docs_per_block(self) -> int:
        return int(self._indptr.chunks[0])

    @property
    def metadata_fields(self) -> list[str]:
        return sorted(self.group["doc_meta"].array_keys()) if "doc_meta" in self.group else []

    # -- documents -----------------------------------------------------------------------
    def read_docs(self, start: int, stop: int) -> CSRBlock:
        """Documents [start, stop) as a CSR block, checked against what the store declares (a chunk
        gone since opening, offsets out of order or beyond the entries, word ids beyond the vocabulary,
        counts below 1, more tokens than the store holds: one line naming the array and position)."""
        start, stop = max(0, int(start)), min(self.n_docs, int(stop))
        if stop <= start:
            return CSRBlock(start, np.zeros(1, np.int64), np.zeros(0, self._indices.dtype),
                            np.zeros(0, self._data.dtype))
        try:
            with self._where.errors():  # the storage's trouble (a URL): one line, not "damaged"
                indptr = np.asarray(self._indptr[start : stop + 1])
                check_offsets(indptr, "indptr", self._damaged, low=0, high=self.nnz,
                              first=0 if start == 0 else None, last=self.nnz if stop == self.n_docs else None,
                              start=start)
                lo, hi = int(indptr[0]), int(indptr[-1])
                indices, data = np.asarray(self._indices[lo:hi]), np.asarray(self._data[lo:hi])
        except (MemoryError, OSError, StoreError):
            raise  # the machine's or the storage's trouble, not the store's
        except Exception as e:  # a chunk that fails to decompress or decode: name where, not the codec's internals
            raise StoreError(f"{self.location} is damaged: documents {start}-{stop - 1} cannot be read "
                             f"({type(e).__name__}: {e}); ingest it again") from e
        self._check_block(start, stop, lo, hi, indices, data)
        return CSRBlock(start, indptr - lo, indices, data)

    def _check_block(self, start: int, stop: int, lo: int, hi: int, indices: np.ndarray, data: np.ndarray) -> None:
        """What read_docs read adds up: as many words and counts as indptr spans, each in range, and
        no more tokens than the store holds (nor than the memory can expand)."""
        if not len(indices) == len(data) == hi - lo:
            raise StoreChanged(f"{self.location} changed while in use: documents {start}-{stop - 1} span {hi - lo:,} "
                               f"entries, and {len(indices):,} words and {len(data):,} counts were read; "
                               "restore it, or ingest it again")
        check_ids(indices, self.n_words, "indices", self._damaged, start=lo)
        check_counts(data, "data", self._damaged, start=lo)
        tokens = int(data.sum(dtype=np.int64))
        if tokens > self.n_tokens:
            raise self._damaged(f"documents {start}-{stop - 1} hold {tokens:,} tokens, more than the store's "
                                f"n_tokens {self.n_tokens:,}")
        if tokens * TOKEN_BYTES > LARGE_BLOCK_BYTES and tokens * TOKEN_BYTES > available_bytes():
            raise StoreError(f"documents {start}-{stop - 1} of {self.location} hold {tokens:,} tokens, which need "
                             f"{format_bytes(tokens * TOKEN_BYTES)} of memory to sample, and "
                             f"{format_bytes(available_bytes())} is available")

    def block_starts(self, docs_per_block: int | None = None) -> range:
        step = docs_per_block or self.docs_per_block
        return range(0, self.n_docs, step)

    def iter_blocks(self, docs_per_block: int | None = None, start: int = 0,
                    stop: int | None = None) -> Iterator[CSRBlock]:
        """Stream documents [start, stop) block by block (a block is an indptr chunk by default)."""
        step = docs_per_block or self.docs_per_block
        stop = self.n_docs if stop is None else min(stop, self.n_docs)
        for lo in range(start, stop, step):
            yield self.read_docs(lo, min(lo + step, stop))

    def doc_ids(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        return np.asarray(self._document_column("doc_ids", start, stop), dtype=object)

    def metadata(self, field: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        return np.asarray(self._document_column(f"doc_meta/{field}", start, stop))

    def _document_column(self, name: str, start: int, stop: int | None) -> np.ndarray:
        """A value a document (its ids, a metadata field): n_docs of them, or the store is damaged
        (a short column would end a site or an export with an IndexError deep inside)."""
        with self._where.errors():
            array = self._array(name)
            if array.shape != (self.n_docs,):
                raise self._damaged(f"{name} holds {array.shape[0]:,} values for {self.n_docs:,} documents")
            return array[start:stop]

    # -- reporting -----------------------------------------------------------------------
    def stored_bytes(self, prefix: str = "") -> int:
        """Bytes stored (on disk, or in object storage) under `prefix`, e.g. "indices"; all by default."""
        return self._where.stored_bytes(prefix)

    def storage_bytes(self) -> tuple[int, int]:
        """(bytes stored, bytes uncompressed) over all arrays of the store."""
        stored = self.stored_bytes()
        raw = 0
        for _, arr in self.group.arrays():
            raw += arr.nbytes if arr.dtype.kind != "T" else 0
        for _, arr in self.group["doc_meta"].arrays() if "doc_meta" in self.group else ():
            raw += arr.nbytes if arr.dtype.kind != "T" else 0
        return stored, raw

    def fingerprint(self) -> dict:
        """What identifies this store's content for a training run (checked on resume)."""
        return {k: self.attrs.get(k) for k in ("n_docs", "n_words", "n_tokens", "nnz", "format_version")} | {
            "settings": self.attrs.get("settings"),
        }


def open_store(location: str | os.PathLike | Location, storage_options: dict | None = None) -> Store:
    """Open a store written by `bigtopics ingest` (or `tools/synth_corpus.py`) for reading.

    `location`: a local path, a file:// URL, an fsspec URL (s3://bucket/prefix/books.zarr,
    gs://..., memory://...) or a zarr store object; `storage_options`: the fsspec filesystem's
    options for a URL (credentials, endpoint_url, ...), besides the environment's."""
    return Store(location, storage_options)


def list_items(text: str) -> list | None:
    """The items of a metadata value that is a JSON list (ingest writes lists so), else None."""
    if not text.startswith("["):
        return None
    try:
        items = json.loads(text)
    except ValueError:
        return None
    return items if isinstance(items, list) else None
