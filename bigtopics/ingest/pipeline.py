"""`ingest()`, the Python API of `bigtopics ingest`: checks the settings and runs the three steps
of bigtopics/ingest/__init__.py in order (workers.py, vocabulary.py, write.py), timing each and
filling in the IngestReport; the spill files live in a temporary sibling of a local output, and
in the temporary directory (TMPDIR) for an output at a URL.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from ..cores import available_cores
from ..input_formats import FormatOptions
from ..locations import locate
from ..memory import budget_bytes, peak_rss_bytes
from ..options import OptionError
from ..outputs import check_output
from ..tokenizer import TokenizerSettings
from .inputs import InputReader
from .resume import prepare_spill_dir
from .runs import FIELDS, KnownWords, run_path, write_remaps
from .summary import IngestReport
from .vocabulary import FixedVocabulary, Pruning, fixed_vocabulary_counts, pruned_vocabulary, read_vocabulary
from .workers import tokenize_all
from .write import write_store

SMALL_INPUT_BYTES = 16 << 20  # below this, worker processes cost more to start than they save
MAX_DEFAULT_BUDGET = 1 << 30  # a bigger vocabulary share only makes fewer, bigger runs: no faster
MIN_BUDGET = 16 << 20
# A document takes up to about 16 times its size as it is parsed and tokenized (copies as bytes,
# str and code points: 4 bytes a character once one is beyond Latin-1): one may have 1/32 of the budget.
DOCUMENT_SHARE = 32


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
    storage_options: dict | None = None,
    memory_limit: int | None = None,
    files_from: str | os.PathLike | None = None,
) -> IngestReport:
    """Read `inputs` (files or directories) and write the store `output`; see bigtopics/ingest/__init__.py.

    `output` is a local path or a URL (s3://bucket/prefix/books.zarr, any fsspec filesystem, with
    `storage_options` for it besides the environment's credentials; see bigtopics/locations.py). A
    local store is published by a rename; a remote one is written in place and complete once its
    attributes are written, last. With `overwrite` an earlier store is replaced, but only one
    bigtopics wrote.

    `vocabulary` (a store, a run directory, a model.zarr, or read_vocabulary's result) fixes the
    store's vocabulary, ids included; then `tokenizer` defaults to the one it records and
    `pruning` must not be given. Without it, `tokenizer` and `pruning` default to
    TokenizerSettings() and Pruning().
    `memory_limit` (bytes) bounds the vocabularies and buffers of all processes together, whatever
    the number of distinct strings; it defaults to a quarter of the memory available, at most
    1 GiB. `unit_bytes` (input per work unit) defaults to a size that fits it."""
    started = time.monotonic()
    output = locate(output, storage_options)
    log = log or (lambda msg: print(msg, file=sys.stderr))
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if vocabulary is not None:
        if pruning is not None:
            raise ValueError("pruning (--min-df, --max-df, --max-vocab) does not apply with a fixed --vocabulary")
        if not isinstance(vocabulary, FixedVocabulary):
            vocabulary = read_vocabulary(vocabulary)
        tokenizer = tokenizer or vocabulary.tokenizer
    tokenizer, pruning = tokenizer or TokenizerSettings(), pruning or Pruning()
    _check_settings(output, inputs, tokenizer, formats, pruning, section_tokens, workers, overwrite, memory_limit)
    budget = memory_limit or budget_bytes(ceiling=MAX_DEFAULT_BUDGET)
    # A worker holds a few copies of its unit (bytes, str, code points, ids); the queue holds two per worker.
    cores = available_cores()
    unit_bytes = unit_bytes or int(min(max(budget // (16 * (cores + 1)), 1 << 20), 8 << 20))
    reader = InputReader(inputs, formats, unit_bytes, warn=log, files_from=files_from,
                         max_document_bytes=budget // DOCUMENT_SHARE)
    # By default, start a process per core it may use, but only when there are several units of work for them.
    n_workers = workers or max(1, min(cores, reader.total_bytes // SMALL_INPUT_BYTES))
    report = IngestReport(output.path if output.path is not None else output.text, n_files=reader.n_files,
                          input_bytes=reader.total_bytes, pruning=pruning,
                          vocabulary_from=vocabulary and vocabulary.source)
    done_runs, done_units = [], []
    if output.path is not None:  # resumable
        spill_settings = {
            "inputs": [str(Path(i).resolve()) for i in inputs], "tokenizer": tokenizer.to_dict(),
            "files_from": str(files_from if files_from in (None, "-") else Path(files_from).resolve()),
            "input": formats.to_dict(), "section_tokens": section_tokens, "unit_bytes": unit_bytes,
            "max_document_bytes": reader.max_document_bytes}
        spill_dir, spill_settings, done_runs, done_units = prepare_spill_dir(output.path, spill_settings, log)
        reader.unit_bytes = spill_settings["unit_bytes"]  # the units of the work resumed, and the documents
        reader.max_document_bytes = spill_settings.get("max_document_bytes", reader.max_document_bytes)
    else:
        spill_dir = Path(tempfile.mkdtemp(prefix="bigtopics-ingest-spill-"))
    keep_spills = False
    try:
        # A run's vocabulary, and the copies made to spill it, take up to a third of a worker's share.
        worker_settings = (tokenizer, formats, section_tokens, spill_dir, budget // (3 * n_workers),
                           f"{uuid.uuid4().hex[:8]}-")  # run names: unique to this attempt
        summaries, runs = tokenize_all(reader, worker_settings, n_workers, quiet,
                                       done={u["seq"]: u for u in done_units})
        runs = done_runs + runs
        report.phase_seconds["tokenize"] = time.monotonic() - started
        for s in summaries:
            report.stats.update(s["stats"])
        report.stats["binary_files_skipped"] = len(reader.skipped_binary)
        report.stats["bad_lines_skipped"] += reader.overlong_skipped
        report.bad_files, report.notes = reader.bad_files, reader.notes
        report.n_runs, report.memory_budget = len(runs), budget
        report.run_bytes = sum(run_path(spill_dir, r["name"], field).stat().st_size for r in runs for field in FIELDS)
        if vocabulary is None:
            n_docs_before = sum(s["nonempty_rows"] for s in summaries)
            final_words, final_counts, final_dfs, report.pruned, report.n_distinct = pruned_vocabulary(
                spill_dir, runs, n_docs_before, pruning, budget // 2)
            known = KnownWords(final_words)
        else:
            final_words, known = vocabulary.words, KnownWords(vocabulary.words)
            final_counts, final_dfs, report.pruned, report.n_distinct = fixed_vocabulary_counts(
                spill_dir, runs, known, len(final_words), budget // 2)
        write_remaps(spill_dir, runs, known)
        del known
        settings = {
            "tokenizer": tokenizer.to_dict(), "input": formats.to_dict() | {"section_tokens": section_tokens},
            "pruning": None if vocabulary else pruning.to_dict(), "inputs": [str(i) for i in inputs],
        } | ({"vocabulary_from": vocabulary.source} if vocabulary else {}) | (
            {"files_from": str(files_from)} if files_from is not None else {}) | (
            {"skipped": [{"name": n, "reason": r} for n, r in reader.bad_files]} if reader.bad_files else {}) | (
            {"read_once": [{"name": n, "reason": r} for n, r in reader.notes]} if reader.notes else {})
        report.phase_seconds["merge"] = time.monotonic() - started - report.phase_seconds["tokenize"]
        write_store(output, summaries, final_words, final_counts, final_dfs,
                    spill_dir, settings, overwrite, quiet, report)
    except KeyboardInterrupt:
        keep_spills = output.path is not None
        if keep_spills:
            log(f"note: the work done so far is kept in {spill_dir.name}: run the same command again to continue")
        raise
    finally:
        if not keep_spills:
            shutil.rmtree(spill_dir, ignore_errors=True)
    report.seconds = time.monotonic() - started
    report.phase_seconds["write"] = report.seconds - sum(report.phase_seconds.values())
    report.n_workers = n_workers
    report.peak_rss = peak_rss_bytes()
    return report


def _check_settings(output, inputs, tokenizer, formats, pruning, section_tokens, workers, overwrite,
                    memory_limit) -> None:
    check_output(output, overwrite, inputs, kind="store")
    if memory_limit is not None and memory_limit < MIN_BUDGET:
        raise OptionError(f"--memory-limit must be at least {MIN_BUDGET >> 20} MiB")
    if workers < 0:
        raise OptionError("--workers must be at least 1 (or 0: all cores)")
    if tokenizer.min_length < 1:
        raise OptionError("--min-length must be at least 1")
    if section_tokens is not None and section_tokens < 1:
        raise OptionError("--section-tokens must be at least 1")
    if section_tokens and formats.format == "bow-jsonl":
        raise OptionError("--section-tokens needs running text; bow-jsonl documents have no word order")
    if pruning.min_df < 1 or not 0 < pruning.max_df <= 1 or (pruning.max_vocab is not None and pruning.max_vocab < 1):
        raise OptionError("need --min-df >= 1, 0 < --max-df <= 1 and --max-vocab >= 1")
    if tokenizer.token_pattern:
        try:
            re.compile(tokenizer.token_pattern)
        except re.error as e:
            raise OptionError(f"--token-pattern {tokenizer.token_pattern!r}: {e}") from None
