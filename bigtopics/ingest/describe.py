"""`bigtopics info` on a store: `describe_store`, a human-readable description of what an ingest
wrote."""

from __future__ import annotations

import json
import math

from ..memory import format_bytes
from ..store import Store


def describe_store(store: Store, n_top_words: int = 30) -> str:
    """A human-readable description of a store: sizes, storage, chunking, settings, top words."""
    stored, _ = store.storage_bytes()
    indices = store.group["indices"]
    matrix_raw = indices.nbytes + store.group["data"].nbytes
    matrix_stored = store.stored_bytes("indices") + store.stored_bytes("data")
    codecs = ", ".join(str(getattr(c, "to_dict", lambda: c)()) for c in indices.compressors) or "none"
    lines = [
        f"store       {store.location}",
        f"documents   {store.n_docs:,}",
        f"words       {store.n_words:,}",
        f"tokens      {store.n_tokens:,}  (mean {store.n_tokens / max(store.n_docs, 1):,.1f} per document)",
        f"nnz         {store.nnz:,}  (distinct words per document, summed)",
        f"dtypes      indices {indices.dtype}, data {store.group['data'].dtype}",
        f"codec       {codecs}",
        f"size        {format_bytes(stored)} {'on disk' if store.path is not None else 'stored'}; "
        f"indices + data {format_bytes(matrix_stored)}, "
        f"{format_bytes(matrix_raw)} uncompressed (compression ratio {matrix_raw / max(matrix_stored, 1):.2f}x)",
        f"chunking    {indices.chunks[0]:,} entries per indices/data chunk, "
        f"{store.docs_per_block:,} documents per block "
        f"({math.ceil(store.n_docs / max(store.docs_per_block, 1)):,} blocks)",
        f"metadata    {', '.join(store.metadata_fields) or '(none)'}",
        "settings    " + json.dumps(store.settings, sort_keys=True),
    ]
    top = min(n_top_words, store.n_words)
    if top:
        vocab, counts = store.group["vocab"][:top], store.group["term_counts"][:top]
        lines.append("top words   " + ", ".join(f"{w} ({int(c):,})" for w, c in zip(vocab, counts)))
    return "\n".join(lines)
