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

from ..store import CSR_ENCODING, ChunkAppender, default_compressors
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

    def create(name, length, dtype, chunk, shape=None):
        return group.create_array(name, shape=(length,) if shape is None else shape,
                                  chunks=(max(1, min(chunk, length)),), dtype=dtype,
                                  compressors=default_compressors(dtype), dimension_names=(DIMENSIONS[name],))

    # the topics' entries appended whole chunks at a time: a topic's few entries written in place
    # would rewrite a chunk of 2^20 entries once per topic (K = 20,000 took 40 minutes)
    indices = ChunkAppender(create("indices", nnz, np.uint32, 1 << 20, shape=(0,)))
    data = ChunkAppender(create("data", nnz, np.float32, 1 << 20, shape=(0,)))
    indptr = np.zeros(model.n_topics + 1, np.int64)
    for k in range(model.n_topics):
        words, values = model.topic_entries(k)
        indptr[k + 1] = indptr[k] + len(words)
        indices.append(words.astype(np.uint32))
        data.append(((model.eta + values) / norms[k]).astype(np.float32))
    indices.close()
    data.close()
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
