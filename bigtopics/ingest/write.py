"""Step 3 of an ingest: writing the store (see bigtopics/ingest/__init__.py).

`write_store` streams the spilled units in input order: remaps each run's local word ids to
the store's (runs.write_remaps), drops pruned words, sorts each row by word id, drops documents left empty, turns
the metadata into typed columns (`column_dtype`, `metadata_column`) and appends to a
StoreWriter, which publishes the store atomically.
"""

from __future__ import annotations

import json
import math

import numpy as np

from ..input_formats import InputError
from ..kernels.tokens import remap_rows
from ..progress import Progress
from ..store import DEFAULT_ENTRIES_PER_CHUNK, StoreWriter, count_dtype_for, index_dtype_for
from .runs import remap_path
from .summary import IngestReport
from .workers import read_spill, unit_file


def column_dtype(kinds: set) -> type:
    """int64, float64 or bool if every value is of that kind; missing numbers become NaN; else str."""
    if kinds <= {"bool"}:
        return np.bool_
    if kinds <= {"int"}:
        return np.int64
    if kinds <= {"int", "float", "none"}:
        return np.float64
    return str


def metadata_column(values: list, dtype) -> np.ndarray:
    if dtype is str:
        return np.array(["" if v is None else v if isinstance(v, str) else json.dumps(v) for v in values], dtype=str)
    if dtype is np.float64:
        return np.array([math.nan if v is None else v for v in values], np.float64)
    return np.array(values, dtype)


def write_store(output, summaries, vocab, term_counts, doc_freqs, spill_dir, settings, overwrite, quiet,
                report: IngestReport) -> None:
    """Pass 2: stream the spilled units in input order into a StoreWriter and publish it at
    `output` (a path, a URL or a locations.Location)."""
    kinds: dict[str, set] = {}
    for s in summaries:
        for name, k in s["field_kinds"].items():
            kinds.setdefault(name, set()).update(k)
    n_rows = sum(s["stats"]["rows"] for s in summaries)
    for name, k in kinds.items():
        if any(s["stats"]["rows"] and name not in s["field_kinds"] for s in summaries):
            k.add("none")
    fields = {name: column_dtype(k) for name, k in sorted(kinds.items())}
    nnz_per_doc = max(1.0, sum(s["nnz"] for s in summaries) / max(1, n_rows))
    writer = StoreWriter(
        output, index_dtype=index_dtype_for(len(vocab)),
        count_dtype=count_dtype_for(max([s["max_count"] for s in summaries], default=0)),
        docs_per_chunk=max(1, int(DEFAULT_ENTRIES_PER_CHUNK / nnz_per_doc)), metadata_fields=fields,
        overwrite=overwrite,
    )
    last_unit = {s["run"]: s["seq"] for s in summaries}
    remaps = {}  # of the runs whose units are being written (about one per worker)
    with writer, Progress("ingest: writing", total=n_rows, unit="docs", quiet=quiet) as progress:
        for s in summaries:
            if s["run"] not in remaps:
                remaps[s["run"]] = np.fromfile(remap_path(spill_dir, s["run"]), np.int64)
            spill = read_spill(spill_dir / unit_file(s["seq"]))
            indptr, indices, data = remap_rows(spill["indptr"], spill["indices"], spill["data"], remaps[s["run"]])
            if last_unit[s["run"]] == s["seq"]:
                del remaps[s["run"]]
            nonempty = np.flatnonzero(np.diff(indptr))
            n = len(indptr) - 1
            report.stats["empty_docs_dropped"] += n - len(nonempty)
            metadata = {
                name: metadata_column([values[i] for i in nonempty] if (values := spill["meta"].get(name)) else
                                      [None] * len(nonempty), dt)
                for name, dt in fields.items()
            }
            writer.append(
                np.concatenate([[0], np.cumsum(np.diff(indptr)[nonempty])]), indices, data,
                [spill["doc_ids"][i] for i in nonempty], metadata,
            )
            progress.update(n)
        if writer.n_docs == 0:  # a store of nothing would only fail later, in train
            raise InputError(
                f"no document with a word to keep in {', '.join(settings['inputs'])} (input files: "
                f"{report.n_files}, skipped as binary: {report.stats['binary_files_skipped']}, documents empty "
                f"after tokenizing and pruning: {report.stats['empty_docs_dropped']}); nothing written")
        writer.commit(vocab, term_counts, doc_freqs, attrs={"settings": settings})
    report.n_docs, report.n_words, report.n_tokens = writer.n_docs, len(vocab), writer.n_tokens
