"""Step 1 of an ingest: tokenizing the input in worker processes (see bigtopics/ingest/__init__.py).

The main process (`tokenize_all`) cuts the input into units and feeds them to a bounded task
queue; each worker process (`_worker_main`, a `UnitTokenizer`) interns words into its own
vocabulary (local ids), counts every unit's documents into CSR rows, accumulates per-word term
counts and document frequencies, spills the unit to a temporary file (`unit_file`, read back by
`read_spill`) and returns only a small summary. Whenever its vocabulary outgrows its share of
the memory budget, and at the end, a worker spills the vocabulary as a run (runs.py) and starts
a new one: a unit's word ids are local to the run named in its summary. With one worker, no
process is started.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import pickle
import queue
import signal
import sys
import threading
import time
import traceback
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
from numcodecs import Blosc

from ..atomic import is_disk_full, no_space
from ..input_formats import FormatOptions, InputError
from ..kernels.tokens import count_rows
from ..progress import Progress
from ..tokenizer import Tokenizer, TokenizerSettings
from .inputs import InputReader, Unit, parse_unit
from .resume import crc32_file, write_manifest
from .runs import FIELDS, write_run

SPILL_CODEC = Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE)  # temporary files: speed over size


class UnitTokenizer:
    """A worker's state: its tokenizer (local vocabulary) and per-word statistics."""

    def __init__(self, worker_id: int, tokenizer: TokenizerSettings, formats: FormatOptions,
                 section_tokens: int | None, spill_dir: Path, run_budget: int, run_prefix: str):
        self.worker_id = worker_id
        self.run_prefix = run_prefix  # new in every attempt: a resumed ingest keeps the runs of earlier ones
        self.settings = tokenizer
        self.formats = formats
        self.section_tokens = section_tokens
        self.spill_dir = Path(spill_dir)
        self.run_budget = run_budget
        self.runs: list[dict] = []  # the runs spilled so far
        self._new_run()

    def _new_run(self) -> None:
        self.tok = Tokenizer(self.settings)
        self.term_counts = np.zeros(1024, np.int64)
        self.doc_freqs = np.zeros(1024, np.int64)
        self.scratch = np.zeros(1024, np.int64)
        self.run_name = f"{self.run_prefix}{self.worker_id:03d}-{len(self.runs):06d}"
        self.run_units: list[dict] = []  # the summaries of the run's units

    def vocabulary_bytes(self) -> int:
        """Memory held by the run's vocabulary (tables, pool and per-word counts)."""
        tok = self.tok
        return (tok.slots.nbytes + tok.word_hash.nbytes + tok.pool.nbytes + tok.pool_offsets.nbytes
                + self.term_counts.nbytes + self.doc_freqs.nbytes + self.scratch.nbytes)

    def spill_run(self) -> None:
        """Spill the run's vocabulary (runs.py), record the run for a resumed ingest (resume.py)
        and start a new run."""
        run = write_run(self.spill_dir, self.run_name, self.tok, self.term_counts, self.doc_freqs)
        files = {f"run-{run['name']}.{field}": self._checked(f"run-{run['name']}.{field}") for field in FIELDS}
        files |= {unit_file(u["seq"]): (u["spill_size"], u["spill_crc"]) for u in self.run_units}
        write_manifest(self.spill_dir, run, self.run_units, files)
        self.runs.append(run)
        self._new_run()

    def _checked(self, name: str) -> tuple[int, int]:
        path = self.spill_dir / name
        return path.stat().st_size, crc32_file(path)

    def process(self, unit: Unit) -> dict:
        """Tokenize and count one unit, spill its rows, return a summary."""
        stats = Counter()
        records = parse_unit(unit, self.formats, stats)
        pieces, counts, bounds, doc_ids, rows_meta = [], [], [0], [], []
        for rec in records:
            if rec.counts is not None:
                ids = self.tok.word_ids(list(rec.counts))
                counts.append(np.fromiter(rec.counts.values(), np.uint32, count=len(rec.counts)))
                cuts = [0, len(ids)]
            else:
                ids = self.tok.token_ids(rec.text)
                counts.append(np.ones(len(ids), np.uint32))
                cuts = section_cuts(len(ids), self.section_tokens)
            pieces.append(ids)
            bounds.extend([bounds[-1] + c for c in cuts[1:]])
            if self.section_tokens:
                doc_ids.extend(f"{rec.doc_id}#{j}" for j in range(len(cuts) - 1))
                rows_meta.extend(rec.meta | {"section_of": rec.doc_id, "section_index": j}
                                 for j in range(len(cuts) - 1))
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
        payload = pickle.dumps(
            {k: (SPILL_CODEC.encode(v) if len(v) else b"") if isinstance(v, np.ndarray) else v
             for k, v in spill.items()}
            | {"dtypes": {k: v.dtype.str for k, v in spill.items() if isinstance(v, np.ndarray)}},
            protocol=pickle.HIGHEST_PROTOCOL,
        )
        (self.spill_dir / unit_file(unit.seq)).write_bytes(payload)
        summary = {
            "seq": unit.seq, "run": self.run_name, "stats": stats, "nnz": len(indices),
            "max_count": int(data.max()) if len(data) else 0, "field_kinds": field_kinds(meta),
            "nonempty_rows": int(np.count_nonzero(np.diff(indptr))), "bytes": len(unit.data),
            "path": unit.path, "input_crc": zlib.crc32(unit.data), "spill_size": len(payload),
            "spill_crc": zlib.crc32(payload),
        }
        self.run_units.append(summary)
        if self.vocabulary_bytes() > self.run_budget:
            self.spill_run()
        return summary

    def finish(self) -> list[dict]:
        """Spill the last run if it has units; returns all the runs this worker spilled."""
        if self.run_units:
            self.spill_run()
        return self.runs

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


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int) -> None:
    """End this worker when the ingest that started it ends, even by kill -9: on Linux the kernel
    sends SIGKILL (prctl PR_SET_PDEATHSIG); elsewhere a thread watches the parent's pid."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    else:
        def watch():
            while os.getppid() == parent_pid:
                time.sleep(1)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent_pid:  # gone before the above took effect
        os._exit(1)


def start_ignoring_ctrl_c(procs) -> None:
    """Start worker processes that ignore SIGINT from their first instruction: Ctrl-C reaches every
    process of the terminal's group, and one still importing would print a traceback. (Python keeps
    an ignored SIGINT ignored; this process ends the workers itself when it is interrupted.)"""
    if threading.current_thread() is not threading.main_thread():
        for p in procs:
            p.start()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for p in procs:
            p.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def _worker_main(worker_id, parent_pid, settings, tasks, results):
    """A worker process: tokenize units from `tasks` until None, then report its runs."""
    die_with_parent(parent_pid)
    try:
        worker = UnitTokenizer(worker_id, *settings)
        while (unit := tasks.get()) is not None:
            results.put(("unit", worker.process(unit)))
        results.put(("runs", worker.finish()))
    except InputError as e:
        results.put(("error", str(e)))
    except OSError as e:  # a full disk, say: the main process says so in one line
        results.put(("oserror", e))
    except BaseException:  # a bug: pass the traceback to the main process, which raises it
        results.put(("crash", traceback.format_exc()))


def tokenize_all(reader: InputReader, worker_settings: tuple, n_workers: int, quiet: bool,
                 done: dict[int, dict] | None = None):
    """Pass 1 over the input: (unit summaries in input order, the runs spilled now). The units in
    `done` (seq -> summary: a resumed ingest) are only checked against the input, not redone.
    A full disk, in this process or a worker, is a DiskFullError naming the spill folder's disk."""
    try:
        return _tokenize_all(reader, worker_settings, n_workers, quiet, done)
    except OSError as e:
        if not is_disk_full(e):
            raise
        spill_dir = Path(worker_settings[3])
        raise no_space(spill_dir.parent, f"the ingest's work files ({spill_dir.name}: its tokenized input and "
                       "vocabularies, about the size of the store)", None) from e


def _tokenize_all(reader: InputReader, worker_settings: tuple, n_workers: int, quiet: bool,
                  done: dict[int, dict] | None = None):
    summaries, done = [], done or {}

    def already_done(unit: Unit) -> bool:
        summary = done.pop(unit.seq, None)
        if summary is None:
            return False
        if (summary["path"], summary["bytes"], summary["input_crc"]) != (unit.path, len(unit.data),
                                                                         zlib.crc32(unit.data)):
            raise InputError(f"{unit.path} changed since the interrupted ingest whose work was to be resumed; "
                             "that work is removed: run the command again to start afresh")
        summaries.append(summary)
        return True

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
                if not already_done(unit):
                    summaries.append(worker.process(unit))
                advance()
            return summaries, worker.finish()
        ctx = mp.get_context("spawn")  # fork is unsafe once any library has started threads
        tasks, results = ctx.Queue(maxsize=2 * n_workers), ctx.Queue()
        procs = [ctx.Process(target=_worker_main, args=(i, os.getpid(), worker_settings, tasks, results), daemon=True)
                 for i in range(n_workers)]
        start_ignoring_ctrl_c(procs)
        runs, finished = [], 0

        def collect(block: bool) -> None:
            nonlocal finished
            while True:
                try:
                    kind, payload = results.get(timeout=0.2) if block else results.get_nowait()
                except queue.Empty:
                    dead = [p.exitcode for p in procs if not p.is_alive() and p.exitcode != 0]
                    if dead:
                        raise ChildProcessError(f"an ingest worker died unexpectedly (exit code {dead[0]}; "
                                                "out of memory?)")
                    return
                if kind == "unit":
                    summaries.append(payload)
                elif kind == "runs":
                    runs.extend(payload)
                    finished += 1
                elif kind == "error":
                    raise InputError(payload)
                elif kind == "oserror":
                    raise payload
                else:
                    raise RuntimeError(f"an ingest worker failed:\n{payload}")
                if block:
                    return

        try:
            for unit in reader.units():
                if already_done(unit):
                    advance()
                    continue
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
            while finished < n_workers:
                collect(block=True)
            for p in procs:
                p.join()
        finally:
            tasks.cancel_join_thread()  # on an error, units still queued must not block the exit
            for p in procs:
                if p.is_alive():
                    p.terminate()
    summaries.sort(key=lambda s: s["seq"])
    return summaries, sorted(runs, key=lambda run: run["name"])
