"""`bigtopics ingest`: text collections -> a store (bigtopics/store.py).

One tokenizing pass, parallel over worker processes; memory is bounded by the vocabulary:

1. The main process cuts the inputs into units (readers.InputReader) and feeds them to a bounded
   task queue. Each worker interns words into its own vocabulary (local ids), counts every
   unit's documents into CSR rows, accumulates per-word term counts and document frequencies,
   and spills the unit to a temporary file; it returns only a small summary. At the end each
   worker writes out its vocabulary.
2. The main process merges the vocabularies, prunes them (min_df, max_df, max_vocab), orders the
   kept words by frequency (ties by the word, so the result is deterministic) and builds a
   local -> final id map per worker. With a fixed vocabulary (`vocabulary=`, a store, run or
   model, for new text to infer with a trained model) the final ids are instead the word's ids
   in that vocabulary: words outside it are dropped and counted, and nothing is pruned.
3. It streams the spilled units in input order: remap, drop pruned words, sort each row by word
   id, drop documents left empty, and append to a StoreWriter, which publishes atomically.

The store does not depend on the number of workers or the unit size.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import pickle
import queue
import shutil
import sys
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from numcodecs import Blosc

from .atomic import temporary_sibling
from .kernels.tokens import count_rows, remap_rows
from .memory import budget_bytes, format_bytes, peak_rss_bytes
from .model import MODEL_NAME, load_model
from .outputs import check_output
from .progress import Progress
from .readers import FormatOptions, InputError, InputReader, Unit, parse_unit
from .store import DEFAULT_ENTRIES_PER_CHUNK, Store, StoreError, StoreWriter, count_dtype_for, index_dtype_for, open_store
from .tokenizer import Tokenizer, TokenizerSettings

SPILL_CODEC = Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE)  # temporary files: speed over size
SMALL_INPUT_BYTES = 16 << 20  # below this, worker processes cost more to start than they save


@dataclass(frozen=True)
class Pruning:
    """Vocabulary pruning, applied in this order."""

    min_df: int = 2  # drop words in fewer documents (typos, OCR noise)
    max_df: float = 0.5  # drop words in more than this fraction of documents
    max_vocab: int | None = 1 << 16  # then keep the most frequent (the core paper's 2^16; uint16 ids)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class FixedVocabulary:
    """The vocabulary of an existing store or model (word id = list position) and the tokenizer
    settings it was made with (the defaults if it records none, e.g. a synthetic store)."""

    source: str
    words: list[str]
    tokenizer: TokenizerSettings


@dataclass
class IngestReport:
    """What an ingest read, dropped and wrote; `summary()` is printed at the end."""

    output: Path
    n_files: int = 0
    input_bytes: int = 0
    stats: Counter = field(default_factory=Counter)
    pruned: dict = field(default_factory=dict)  # rule -> (words, tokens)
    pruning: Pruning = field(default_factory=Pruning)
    vocabulary_from: str | None = None
    n_docs: int = 0
    n_words: int = 0
    n_tokens: int = 0
    seconds: float = 0.0
    phase_seconds: dict = field(default_factory=dict)  # tokenize, merge, write
    n_workers: int = 0
    peak_rss: int = 0

    def summary(self) -> str:
        s = self.stats
        lines = [
            f"wrote {self.output}: {self.n_docs:,} documents, {self.n_words:,} words, {self.n_tokens:,} tokens",
            f"read {self.n_files:,} files ({format_bytes(self.input_bytes)}), {s['records']:,} source documents"
            + (f" cut into {s['rows']:,} sections" if s["sections"] else "")
            + f", {s['raw_tokens']:,} tokens, in {self.seconds:.1f} s "
            f"({self.input_bytes / 1e6 / max(self.seconds, 1e-9):.1f} MB/s; "
            + ", ".join(f"{k} {v:.1f} s" for k, v in self.phase_seconds.items())
            + f"; workers: {self.n_workers}); peak memory {format_bytes(self.peak_rss)}",
            f"dropped: {s['empty_docs_dropped']:,} empty documents, {s['binary_files_skipped']:,} binary-looking files, "
            f"{s['bad_lines_skipped']:,} bad lines skipped; {s['invalid_utf8_docs']:,} documents had invalid UTF-8 (replaced)",
        ]
        if self.vocabulary_from:
            words, tokens = self.pruned["out_of_vocabulary"]
            lines.append(f"vocabulary of {self.vocabulary_from}: {words:,} words ({tokens:,} tokens) out of it dropped; "
                         f"stop words removed {s['stop_tokens']:,} tokens")
            return "\n".join(lines)
        p = self.pruning
        rules = {"zero": "stop words", "min_df": f"min-df {p.min_df}", "max_df": f"max-df {p.max_df}",
                 "max_vocab": f"max-vocab {p.max_vocab or 0} (0: all)"}
        lines.append("pruned: " + "; ".join(
            f"{words:,} words ({tokens:,} tokens) by {rules[rule]}" for rule, (words, tokens) in self.pruned.items()
            if rule != "zero"
        ) + f"; stop words removed {s['stop_tokens']:,} tokens")
        return "\n".join(lines)


# -- workers -------------------------------------------------------------------------------
class UnitTokenizer:
    """A worker's state: its tokenizer (local vocabulary) and per-word statistics."""

    def __init__(self, worker_id: int, tokenizer: TokenizerSettings, formats: FormatOptions,
                 section_tokens: int | None, spill_dir: Path):
        self.worker_id = worker_id
        self.tok = Tokenizer(tokenizer)
        self.formats = formats
        self.section_tokens = section_tokens
        self.spill_dir = Path(spill_dir)
        self.term_counts = np.zeros(1024, np.int64)
        self.doc_freqs = np.zeros(1024, np.int64)
        self.scratch = np.zeros(1024, np.int64)

    def process(self, unit: Unit) -> dict:
        """Tokenize and count one unit, spill its rows, return a summary."""
        stats = Counter()
        records = parse_unit(unit, self.formats, stats)
        pieces, counts, bounds, doc_ids, rows_meta = [], [], [0], [], []
        for rec in records:
            if rec.counts is not None:
                ids, kept = self.tok.word_ids(list(rec.counts))
                counts.append(np.fromiter(rec.counts.values(), np.uint32, count=len(rec.counts))[kept])
                cuts = [0, len(ids)]
            else:
                ids = self.tok.token_ids(rec.text)
                counts.append(np.ones(len(ids), np.uint32))
                cuts = section_cuts(len(ids), self.section_tokens)
            pieces.append(ids)
            bounds.extend([bounds[-1] + c for c in cuts[1:]])
            if self.section_tokens:
                doc_ids.extend(f"{rec.doc_id}#{j}" for j in range(len(cuts) - 1))
                rows_meta.extend(rec.meta | {"section_of": rec.doc_id, "section_index": j} for j in range(len(cuts) - 1))
            else:
                doc_ids.append(rec.doc_id)
                rows_meta.append(rec.meta)
        names = sorted({name for m in rows_meta for name in m})
        meta = {name: [m.get(name) for m in rows_meta] for name in names}
        ids = np.concatenate(pieces) if pieces else np.zeros(0, np.int32)
        token_counts = np.concatenate(counts) if counts else np.zeros(0, np.uint32)
        self._fit(self.tok.n_words)
        indptr, indices, data = count_rows(ids, np.asarray(bounds, np.int64), token_counts, self.tok.n_stop,
                                           self.scratch, self.term_counts, self.doc_freqs)
        stats.update(
            records=len(records), rows=len(doc_ids), sections=len(doc_ids) if self.section_tokens else 0,
            raw_tokens=int(token_counts.sum()), stop_tokens=int(token_counts[ids < self.tok.n_stop].sum()),
        )
        spill = {"indptr": indptr, "indices": indices, "data": data, "doc_ids": doc_ids, "meta": meta}
        (self.spill_dir / unit_file(unit.seq)).write_bytes(pickle.dumps(
            {k: (SPILL_CODEC.encode(v) if len(v) else b"") if isinstance(v, np.ndarray) else v for k, v in spill.items()}
            | {"dtypes": {k: v.dtype.str for k, v in spill.items() if isinstance(v, np.ndarray)}},
            protocol=pickle.HIGHEST_PROTOCOL,
        ))
        return {
            "seq": unit.seq, "worker": self.worker_id, "stats": stats, "nnz": len(indices),
            "max_count": int(data.max()) if len(data) else 0, "field_kinds": field_kinds(meta),
            "nonempty_rows": int(np.count_nonzero(np.diff(indptr))), "bytes": len(unit.data),
        }

    def finish(self) -> Path:
        """Write this worker's vocabulary with its statistics; returns the file."""
        path = self.spill_dir / f"vocab-{self.worker_id}.pkl"
        n = self.tok.n_words
        path.write_bytes(pickle.dumps({"words": self.tok.words(), "term_counts": self.term_counts[:n],
                                       "doc_freqs": self.doc_freqs[:n]}, protocol=pickle.HIGHEST_PROTOCOL))
        return path

    def _fit(self, n_words: int) -> None:
        if n_words > len(self.scratch):
            size = max(n_words, 2 * len(self.scratch))
            self.scratch = np.zeros(size, np.int64)
            self.term_counts = np.concatenate([self.term_counts, np.zeros(size - len(self.term_counts), np.int64)])
            self.doc_freqs = np.concatenate([self.doc_freqs, np.zeros(size - len(self.doc_freqs), np.int64)])


def section_cuts(n_tokens: int, section_tokens: int | None) -> list[int]:
    """Token offsets cutting a document into round(n / section_tokens) near-equal sections."""
    if not section_tokens or n_tokens <= section_tokens:
        return [0, n_tokens]
    n_sections = max(1, round(n_tokens / section_tokens))
    return [(j * n_tokens) // n_sections for j in range(n_sections + 1)]


def unit_file(seq: int) -> str:
    return f"unit-{seq:010d}.pkl"


def read_spill(path: Path) -> dict:
    spill = pickle.loads(path.read_bytes())
    for name, dtype in spill.pop("dtypes").items():
        spill[name] = np.frombuffer(SPILL_CODEC.decode(spill[name]) if spill[name] else b"", dtype)
    return spill


def field_kinds(meta: dict[str, list]) -> dict[str, set]:
    """The Python types seen in each metadata field ("none" for a missing value)."""
    names = {bool: "bool", int: "int", float: "float", str: "str", type(None): "none"}
    return {name: {names.get(type(v), "str") for v in values} for name, values in meta.items()}


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


def _worker_main(worker_id, settings, tasks, results):
    """A worker process: tokenize units from `tasks` until None, then report the vocabulary."""
    try:
        worker = UnitTokenizer(worker_id, *settings)
        while (unit := tasks.get()) is not None:
            results.put(("unit", worker.process(unit)))
        results.put(("vocab", (worker_id, worker.finish())))
    except InputError as e:
        results.put(("error", str(e)))
    except BaseException:  # a bug: pass the traceback to the main process, which raises it
        results.put(("crash", traceback.format_exc()))


# -- the main process ----------------------------------------------------------------------
def ingest(
    inputs,
    output,
    *,
    tokenizer: TokenizerSettings | None = None,
    formats: FormatOptions = FormatOptions(),
    pruning: Pruning | None = None,
    vocabulary: str | os.PathLike | FixedVocabulary | None = None,
    section_tokens: int | None = None,
    workers: int = 0,
    overwrite: bool = False,
    quiet: bool = False,
    log=None,
    unit_bytes: int | None = None,
) -> IngestReport:
    """Read `inputs` (files or directories) and write the store `output`; see the module doc.

    `vocabulary` (a store, a run directory, a model.zarr, or read_vocabulary's result) fixes the
    store's vocabulary, ids included; then `tokenizer` defaults to the one it records and
    `pruning` must not be given. Without it, `tokenizer` and `pruning` default to
    TokenizerSettings() and Pruning().
    `unit_bytes` (input per work unit) defaults to a size that fits the memory available."""
    started = time.monotonic()
    output = Path(output)
    log = log or (lambda msg: print(msg, file=sys.stderr))
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if vocabulary is not None:
        if pruning is not None:
            raise ValueError("pruning (--min-df, --max-df, --max-vocab) does not apply with a fixed --vocabulary")
        if not isinstance(vocabulary, FixedVocabulary):
            vocabulary = read_vocabulary(vocabulary)
        tokenizer = tokenizer or vocabulary.tokenizer
    tokenizer, pruning = tokenizer or TokenizerSettings(), pruning or Pruning()
    _check_settings(output, inputs, tokenizer, formats, pruning, section_tokens, workers, overwrite)
    # A worker holds a few copies of its unit (bytes, str, code points, ids); the queue holds two per worker.
    unit_bytes = unit_bytes or int(min(max(budget_bytes() // (16 * ((os.cpu_count() or 1) + 1)), 1 << 20), 8 << 20))
    reader = InputReader(inputs, formats, unit_bytes, warn=log)
    # By default, start a process per core, but only when there are several units of work for them.
    n_workers = workers or max(1, min(os.cpu_count() or 1, reader.total_bytes // SMALL_INPUT_BYTES))
    report = IngestReport(output, n_files=len(reader.files), input_bytes=reader.total_bytes, pruning=pruning,
                          vocabulary_from=vocabulary and vocabulary.source)
    spill_dir = temporary_sibling(output, "spill")
    spill_dir.mkdir(parents=True)
    try:
        worker_settings = (tokenizer, formats, section_tokens, spill_dir)
        summaries, vocab_files = _tokenize_all(reader, worker_settings, n_workers, quiet)
        report.phase_seconds["tokenize"] = time.monotonic() - started
        for s in summaries:
            report.stats.update(s["stats"])
        report.stats["binary_files_skipped"] = len(reader.skipped_binary)
        words, term_counts, doc_freqs, local_to_merged = _merge_vocabularies(vocab_files)
        if vocabulary is None:
            n_docs_before = sum(s["nonempty_rows"] for s in summaries)
            new_id, report.pruned = prune(words, term_counts, doc_freqs, n_docs_before, pruning)
            kept = np.flatnonzero(new_id >= 0)
            final_words = [words[i] for i in kept[np.argsort(new_id[kept])]]
        else:
            new_id, report.pruned = fixed_ids(words, term_counts, vocabulary.words)
            final_words = vocabulary.words
        kept = np.flatnonzero(new_id >= 0)
        final_counts, final_dfs = np.zeros((2, len(final_words)), np.int64)  # zero for words never seen
        final_counts[new_id[kept]], final_dfs[new_id[kept]] = term_counts[kept], doc_freqs[kept]
        remaps = {w: new_id[m] for w, m in local_to_merged.items()}
        settings = {
            "tokenizer": tokenizer.to_dict(), "input": formats.to_dict() | {"section_tokens": section_tokens},
            "pruning": None if vocabulary else pruning.to_dict(), "inputs": [str(i) for i in inputs],
        } | ({"vocabulary_from": vocabulary.source} if vocabulary else {})
        report.phase_seconds["merge"] = time.monotonic() - started - report.phase_seconds["tokenize"]
        _write_store(output, summaries, remaps, final_words, final_counts, final_dfs,
                     spill_dir, settings, overwrite, quiet, report)
    finally:
        shutil.rmtree(spill_dir, ignore_errors=True)
    report.seconds = time.monotonic() - started
    report.phase_seconds["write"] = report.seconds - sum(report.phase_seconds.values())
    report.n_workers = n_workers
    report.peak_rss = peak_rss_bytes()
    return report


def _check_settings(output, inputs, tokenizer, formats, pruning, section_tokens, workers, overwrite) -> None:
    check_output(output, overwrite, inputs)
    if workers < 0:
        raise ValueError("--workers must be at least 1 (or 0: all cores)")
    if tokenizer.min_length < 1:
        raise ValueError("--min-length must be at least 1")
    if section_tokens is not None and section_tokens < 1:
        raise ValueError("--section-tokens must be at least 1")
    if section_tokens and formats.format == "bow-jsonl":
        raise ValueError("--section-tokens needs running text; bow-jsonl documents have no word order")
    if pruning.min_df < 1 or not 0 < pruning.max_df <= 1 or (pruning.max_vocab is not None and pruning.max_vocab < 1):
        raise ValueError("need --min-df >= 1, 0 < --max-df <= 1 and --max-vocab >= 1")
    if tokenizer.token_pattern:
        import re

        try:
            re.compile(tokenizer.token_pattern)
        except re.error as e:
            raise ValueError(f"--token-pattern {tokenizer.token_pattern!r}: {e}") from None


def _tokenize_all(reader: InputReader, worker_settings: tuple, n_workers: int, quiet: bool):
    """Pass 1 over the input: (unit summaries in input order, {worker id: vocabulary file})."""
    summaries = []
    progress = Progress("ingest: reading", total=reader.total_bytes / 1e6, unit="MB", quiet=quiet,
                        postfix=lambda: {"docs": sum(s["stats"]["records"] for s in summaries)})
    shown = 0.0

    def advance():
        nonlocal shown
        progress.update(reader.bytes_read / 1e6 - shown)
        shown = reader.bytes_read / 1e6

    with progress:
        if n_workers == 1:  # no processes to start for small jobs and tests
            worker = UnitTokenizer(0, *worker_settings)
            for unit in reader.units():
                summaries.append(worker.process(unit))
                advance()
            return summaries, {0: worker.finish()}
        ctx = mp.get_context("spawn")  # fork is unsafe once any library has started threads
        tasks, results = ctx.Queue(maxsize=2 * n_workers), ctx.Queue()
        procs = [ctx.Process(target=_worker_main, args=(i, worker_settings, tasks, results), daemon=True)
                 for i in range(n_workers)]
        for p in procs:
            p.start()
        vocab_files = {}

        def collect(block: bool) -> None:
            while True:
                try:
                    kind, payload = results.get(timeout=0.2) if block else results.get_nowait()
                except queue.Empty:
                    dead = [p.exitcode for p in procs if not p.is_alive() and p.exitcode != 0]
                    if dead:
                        raise RuntimeError(f"an ingest worker died unexpectedly (exit code {dead[0]}; out of memory?)")
                    return
                if kind == "unit":
                    summaries.append(payload)
                elif kind == "vocab":
                    vocab_files[payload[0]] = payload[1]
                elif kind == "error":
                    raise InputError(payload)
                else:
                    raise RuntimeError(f"an ingest worker failed:\n{payload}")
                if block:
                    return

        try:
            for unit in reader.units():
                while True:
                    try:
                        tasks.put(unit, timeout=0.2)
                        break
                    except queue.Full:
                        collect(block=False)
                collect(block=False)
                advance()
            for _ in procs:
                tasks.put(None)
            while len(vocab_files) < n_workers:
                collect(block=True)
            for p in procs:
                p.join()
        finally:
            tasks.cancel_join_thread()  # on an error, units still queued must not block the exit
            for p in procs:
                if p.is_alive():
                    p.terminate()
    summaries.sort(key=lambda s: s["seq"])
    return summaries, vocab_files


def _merge_vocabularies(vocab_files: dict[int, Path]):
    """(words, term_counts, doc_freqs, {worker: local id -> merged id}) over all workers.

    Merged ids follow first appearance over workers in id order, so only the final frequency
    order (computed later) matters for the store."""
    index: dict[str, int] = {}
    term_counts = np.zeros(0, np.int64)
    doc_freqs = np.zeros(0, np.int64)
    local_to_merged = {}
    for worker in sorted(vocab_files):
        vocab = pickle.loads(Path(vocab_files[worker]).read_bytes())
        merged = np.fromiter((index.setdefault(w, len(index)) for w in vocab["words"]), np.int64,
                             count=len(vocab["words"]))
        term_counts = np.concatenate([term_counts, np.zeros(len(index) - len(term_counts), np.int64)])
        doc_freqs = np.concatenate([doc_freqs, np.zeros(len(index) - len(doc_freqs), np.int64)])
        np.add.at(term_counts, merged, vocab["term_counts"])
        np.add.at(doc_freqs, merged, vocab["doc_freqs"])
        local_to_merged[worker] = merged
    return list(index), term_counts, doc_freqs, local_to_merged


def prune(words: list[str], term_counts: np.ndarray, doc_freqs: np.ndarray, n_docs: int, pruning: Pruning):
    """(new_id, pruned): new_id[w] is the store id of word w or -1; ids follow decreasing term
    count, ties by the word. pruned maps each rule to (words, tokens) it removed."""
    alive = term_counts > 0  # stop words and words seen only in skipped rows
    pruned = {}

    def drop(rule: str, mask: np.ndarray) -> None:
        nonlocal alive
        hit = alive & mask
        pruned[rule] = (int(hit.sum()), int(term_counts[hit].sum()))
        alive &= ~mask

    drop("zero", term_counts == 0)
    drop("min_df", doc_freqs < pruning.min_df)
    drop("max_df", doc_freqs > pruning.max_df * n_docs)
    survivors = sorted(np.flatnonzero(alive).tolist(), key=lambda w: (-term_counts[w], words[w]))
    limit = len(survivors) if pruning.max_vocab is None else pruning.max_vocab
    beyond = np.zeros(len(words), bool)
    beyond[survivors[limit:]] = True
    drop("max_vocab", beyond)
    new_id = np.full(len(words), -1, np.int64)
    new_id[survivors[:limit]] = np.arange(min(limit, len(survivors)))
    return new_id, pruned


def fixed_ids(words: list[str], term_counts: np.ndarray, vocabulary: list[str]):
    """(new_id, pruned): new_id[w] is word w's id in the fixed `vocabulary` or -1; pruned maps
    "out_of_vocabulary" to the (words, tokens) outside it."""
    index = {word: i for i, word in enumerate(vocabulary)}
    new_id = np.fromiter((index.get(word, -1) for word in words), np.int64, count=len(words))
    outside = (new_id < 0) & (term_counts > 0)  # stop words have no tokens left to drop
    return new_id, {"out_of_vocabulary": (int(outside.sum()), int(term_counts[outside].sum()))}


def read_vocabulary(source: str | os.PathLike) -> FixedVocabulary:
    """The vocabulary and tokenizer settings of a store, a run directory or a model.zarr.

    A run is read through the store its settings.json names (that store records the tokenizer;
    a model records only the training settings and its store's fingerprint), or through its
    model if that store is gone."""
    from .rundir import SETTINGS_NAME

    path = Path(source)
    if (path / SETTINGS_NAME).is_file():
        store_path = Path(json.loads((path / SETTINGS_NAME).read_text())["store"])
        if (store_path / "zarr.json").exists():
            return read_vocabulary(store_path)
        if not (path / MODEL_NAME / "zarr.json").exists():
            raise StoreError(f"--vocabulary {source}: the run's store {store_path} is gone and the run has no model yet")
        path = path / MODEL_NAME
    if not (path / "zarr.json").exists():
        raise StoreError(f"--vocabulary {source} is not a store, a run directory or a model.zarr "
                         f"(it has no zarr.json or {SETTINGS_NAME})")
    if "model_format_version" in json.loads((path / "zarr.json").read_text()).get("attributes", {}):
        model = load_model(path)
        words, recorded = model.vocab, model.attrs.get("store_fingerprint", {}).get("settings") or {}
    else:
        store = open_store(path)
        words, recorded = store.vocab, store.settings
    tokenizer = TokenizerSettings(**recorded["tokenizer"]) if "tokenizer" in recorded else TokenizerSettings()
    return FixedVocabulary(str(path.resolve()), [str(w) for w in words], tokenizer)


def _write_store(output, summaries, remaps, vocab, term_counts, doc_freqs, spill_dir, settings, overwrite, quiet,
                 report: IngestReport) -> None:
    """Pass 2: stream the spilled units in input order into a StoreWriter and publish it."""
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
    with writer, Progress("ingest: writing", total=n_rows, unit="docs", quiet=quiet) as progress:
        for s in summaries:
            spill = read_spill(spill_dir / unit_file(s["seq"]))
            indptr, indices, data = remap_rows(spill["indptr"], spill["indices"], spill["data"], remaps[s["worker"]])
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


# -- describing a store --------------------------------------------------------------------
def describe_store(store: Store, n_top_words: int = 30) -> str:
    """A human-readable description of a store: sizes, storage, chunking, settings, top words."""
    stored, _ = store.storage_bytes()
    indices = store.group["indices"]
    matrix_raw = indices.nbytes + store.group["data"].nbytes
    matrix_stored = sum(f.stat().st_size for name in ("indices", "data") for f in (store.path / name).rglob("*") if f.is_file())
    codecs = ", ".join(str(getattr(c, "to_dict", lambda: c)()) for c in indices.compressors) or "none"
    lines = [
        f"store       {store.path}",
        f"documents   {store.n_docs:,}",
        f"words       {store.n_words:,}",
        f"tokens      {store.n_tokens:,}  (mean {store.n_tokens / max(store.n_docs, 1):,.1f} per document)",
        f"nnz         {store.nnz:,}  (distinct words per document, summed)",
        f"dtypes      indices {indices.dtype}, data {store.group['data'].dtype}",
        f"codec       {codecs}",
        f"size        {format_bytes(stored)} on disk; indices + data {format_bytes(matrix_stored)}, "
        f"{format_bytes(matrix_raw)} uncompressed (compression ratio {matrix_raw / max(matrix_stored, 1):.2f}x)",
        f"chunking    {indices.chunks[0]:,} entries per indices/data chunk, {store.docs_per_block:,} documents per block "
        f"({math.ceil(store.n_docs / max(store.docs_per_block, 1)):,} blocks)",
        f"metadata    {', '.join(store.metadata_fields) or '(none)'}",
        "settings    " + json.dumps(store.settings, sort_keys=True),
    ]
    top = min(n_top_words, store.n_words)
    if top:
        vocab, counts = store.group["vocab"][:top], store.group["term_counts"][:top]
        lines.append("top words   " + ", ".join(f"{w} ({int(c):,})" for w, c in zip(vocab, counts)))
    return "\n".join(lines)
