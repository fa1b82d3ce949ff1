"""The model's own files:

  topic_word.zarr  K x V p(w | k) over the stored entries, anndata's csr_matrix encoding (indptr
                   int64, indices uint32, data float32), plus `smoothing` (K): the probability of
                   every word a topic does not store, eta / (V eta + N[k]). Every array names its
                   dimension (Zarr v3 dimension_names), so xarray.open_zarr opens the group.
  vocab.txt        one word per line, in column order (text.escape_word)
  topics.jsonl     per topic: id, label, top words and probabilities, size, alpha_k, and the diagnostics of
                   `bigtopics evaluate` when it scored this model
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import zarr

from ..store import CSR_ENCODING, default_compressors
from .base import ExportContext, Writer, json_line, stored_counts, topic_norms

# dimension names of topic_word.zarr's arrays, as xarray reads them
DIMENSIONS = {"indptr": "topic_bound", "indices": "entry", "data": "entry", "smoothing": "topic"}


def write_topic_word(ctx: ExportContext, out: Path) -> None:
    model = ctx.model
    norms = topic_norms(model)
    group = zarr.open_group(out / "topic_word.zarr", mode="w")
    group.attrs.update({**CSR_ENCODING, "shape": [model.n_topics, model.n_words],
                        "description": "p(w|k) of stored entries; every other word of topic k has smoothing[k]"})
    nnz = model.n_entries

    def create(name, length, dtype, chunk):
        return group.create_array(name, shape=(length,), chunks=(max(1, min(chunk, length)),), dtype=dtype,
                                  compressors=default_compressors(dtype), dimension_names=(DIMENSIONS[name],))

    indices, data = create("indices", nnz, np.uint32, 1 << 20), create("data", nnz, np.float32, 1 << 20)
    indptr = np.zeros(model.n_topics + 1, np.int64)
    for k in range(model.n_topics):
        words, values = model.topic_entries(k)
        lo = indptr[k]
        indptr[k + 1] = lo + len(words)
        if len(words):
            indices[lo : lo + len(words)] = words.astype(np.uint32)
            data[lo : lo + len(words)] = ((model.eta + values) / norms[k]).astype(np.float32)
    create("indptr", model.n_topics + 1, np.int64, 1 << 16)[:] = indptr
    create("smoothing", model.n_topics, np.float64, 1 << 16)[:] = model.eta / norms


def write_vocab(ctx: ExportContext, out: Path) -> None:
    (out / "vocab.txt").write_text("".join(f"{w}\n" for w in ctx.vocab_text), encoding="utf-8")


def write_topics_jsonl(ctx: ExportContext, out: Path) -> None:
    model = ctx.model
    norms, totals, alpha = topic_norms(model), model.topic_totals(), model.alpha_k
    with open(out / "topics.jsonl", "w", encoding="utf-8") as f:
        for k, words in enumerate(ctx.top):
            record = {"topic": k, "label": ctx.labels[k], "top_words": [str(w) for w in model.vocab[words]],
                      "probabilities": [round(float(p), 6)
                                        for p in (stored_counts(model, k, words) + model.eta) / norms[k]],
                      "tokens": float(totals[k]), "share": float(totals[k] / max(totals.sum(), 1e-300)),
                      "alpha": float(alpha[k]),
                      "smoothing": float(model.eta / norms[k]), **ctx.diagnostics.get(k, {})}
            f.write(json_line(record))


WRITERS = (
    Writer(("topic_word.zarr",), write_topic_word),
    Writer(("vocab.txt",), write_vocab),
    Writer(("topics.jsonl",), write_topics_jsonl),
)
