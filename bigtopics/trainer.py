"""The training loop: plan minibatches, run the local step, take the global step.

One minibatch t (Mimno, Hoffman & Blei 2012, Algorithm 1; docs/algorithms.md section 1):
  1. copy the topic-word table's rows for the minibatch's words (frozen.TableRows), with
     exclude-own less the statistics its documents added on their previous visit (assignments.py);
  2. local step (local_steps/) on the executor (executors/): in this process's threads or on a
     cluster's workers, which freeze the rows into an estimate of beta and return Nhat;
  3. global step: N <- (1 - rho_t) N + rho_t (D / |B|) Nhat with rho_t = (tau0 + t)^-kappa,
     applied lazily to the hash-sparse table (scale factor pi_t, periodic resets).

The run directory (rundir.py) holds the settings, the metrics log, the checkpoints, the
memory-mapped table, with exclude-own the saved assignments, and model.zarr (a snapshot every
few minutes, at the end, and when a stop signal ends the run).
"""

from __future__ import annotations

import json
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

import numpy as np

from .alpha_scale import fit_alpha_scale, scale_documents, scaled_alpha
from .assignments import SavedAssignments
from .atomic import DiskFullError, atomic_write_bytes, is_disk_full, no_space
from .checkpoint_checks import check_checkpoint, checkpoint_limits
from .checkpoints import (
    START_OF_RUN,
    CheckpointError,
    CheckpointInfo,
    load_latest_checkpoint,
    never_checkpointed,
    remove_temporaries,
    save_checkpoint,
)
from .cluster import ClusterLost
from .cores import thread_count
from .cpu_share import cpu_shares
from .executors import Executor, StepTask, make_executor
from .frozen import ReusedArrays
from .heldout import heldout_documents, heldout_loglik
from .locations import is_url
from .memory import format_bytes, peak_rss_bytes, return_large_frees_to_os, rss_bytes
from .model import MODEL_NAME, write_model
from .options import parse_interval
from .outputs import check_output, holds_files
from .places import check_output_place, read_json
from .plan import EpochPlan
from .priors import LearnedPriors
from .progress import Progress
from .reader import read_documents
from .resources import check_resources
from .rundir import (
    ASSIGNMENTS_DIR,
    METRICS_NAME,
    SETTINGS_NAME,
    TABLE_DIR,
    RunLock,
    RunState,
    fresh_dir,
    read_metrics,
    read_settings,
)
from .settings import TrainSettings, learning_rate, recorded_settings
from .stopping import StopOnSignal
from .store import StoreChanged, open_store
from .topic_word import TopicWordTable


class Trainer:
    """Runs, or resumes, one training run in a run directory.

    `Trainer(store, run_dir, settings)` starts a run; `Trainer.resume(run_dir, **changes)`
    continues one from its newest good checkpoint. Either way `run()` trains until the stopping
    rule, checkpointing as it goes, and writes the model.

    Creating a Trainer fixes glibc's mmap threshold for the whole process
    (`memory.return_large_frees_to_os`), so that each minibatch's freed arrays leave it.
    """

    def __init__(self, store_path, run_dir, settings: TrainSettings, *, quiet: bool = False,
                 storage_options: dict | None = None,
                 report_seconds: float = 10.0, snapshot_seconds: float = 600.0, executor: Executor | None = None,
                 cluster: str | None = None, scheduler: str | None = None):
        settings.validate()
        return_large_frees_to_os()
        self.settings = settings
        self.store = open_store(store_path, storage_options)  # the options are never written to the run
        self.run_dir = Path(run_dir)
        self.quiet = quiet
        self.report_seconds = report_seconds
        self.snapshot_seconds = snapshot_seconds
        if self.store.n_docs == 0 or self.store.n_tokens == 0:
            raise ValueError(f"{self.store.location} holds no documents: nothing to train on")
        if settings.heldout and settings.heldout >= self.store.n_docs:
            raise ValueError(f"cannot hold out {settings.heldout} of the store's {self.store.n_docs} documents")
        self.heldout_docs = heldout_documents(self.store.n_docs, settings.heldout, settings.seed)
        settings.settle_scale_docs(self.store.n_docs - len(self.heldout_docs))
        if settings.heldout + settings.scale_docs >= self.store.n_docs:
            raise ValueError(f"cannot keep {settings.heldout} held-out and {settings.scale_docs} --scale-docs "
                             f"documents out of the store's {self.store.n_docs}: none would be left to train on")
        self.scale_doc_numbers = scale_documents(self.store.n_docs, settings.scale_docs, settings.seed,
                                                 self.heldout_docs)
        kept_out = np.union1d(self.heldout_docs, self.scale_doc_numbers)
        settings.settle_batch_size(self.store.n_docs - len(kept_out))
        self.plan = EpochPlan(self.store.n_docs, self.store.docs_per_block, settings.batch_size, settings.seed,
                              settings.window_blocks, exclude=kept_out)
        self.n_training_docs = self.plan.n_training_docs
        self._buffers = ReusedArrays()  # a minibatch's copy of its rows and frozen view, reused
        self.task = StepTask(settings.step, settings.alpha, settings.eta, settings.seed, settings.shard_docs)
        self.executor = executor if executor is not None else make_executor(
            self.store, workers=settings.workers, window_blocks=settings.window_blocks, cluster=cluster,
            scheduler=scheduler)
        self.rejoin = f" --cluster {cluster}" if cluster else f" --scheduler {scheduler}" if scheduler else ""
        self._heldout_batch = None
        self._scale_batch = None
        self.last_heldout: float | None = None
        self.state = RunState()
        self.priors = LearnedPriors.start(settings)
        self._table: TopicWordTable | None = None  # `table`, maybe with a global step under way
        self.saved: SavedAssignments | None = None  # exclude_own: each document's latest assignments
        self.resumed_from: CheckpointInfo | None = None
        self.stop_signal: int | None = None
        self.checkpointed: dict | None = None  # the state the newest checkpoint holds
        self.lock = RunLock(self.run_dir)
        self.phase_seconds: dict[str, float] = {}  # this process's time per phase, for the metrics log
        self.cpu_line = self.cpu_log = None  # CpuShare of the progress line and of the metrics log (in process)

    @property
    def table(self) -> TopicWordTable | None:
        """The table once it has taken every global step so far (executors/base.py: settle)."""
        self.executor.settle()
        return self._table

    @table.setter
    def table(self, table: TopicWordTable | None) -> None:
        self._table = table

    @contextmanager
    def timer(self, phase: str):
        start = time.monotonic()
        try:
            yield
        finally:
            self.phase_seconds[phase] = self.phase_seconds.get(phase, 0.0) + time.monotonic() - start

    @classmethod
    def resume(cls, run_dir, *, quiet: bool = False, options: dict | None = None, store=None,
               **changes) -> "Trainer":
        """Continue a run from its newest good checkpoint, with some settings changed.

        Only TrainSettings.CHANGEABLE settings may change; the store must be the one the run
        started on (same fingerprint), where it was or at `store` if it has moved.
        """
        run_dir = Path(run_dir)
        options = options or {}
        record = read_settings(run_dir)
        settings = recorded_settings(record, run_dir / SETTINGS_NAME)
        refused = {k: v for k, v in changes.items()
                   if v is not None and k not in TrainSettings.CHANGEABLE and v != getattr(settings, k)}
        if refused:
            raise ValueError(
                f"cannot change {', '.join(sorted(refused))} when resuming {run_dir} (they define the model); "
                f"only {', '.join(TrainSettings.CHANGEABLE)} may change; start a new run instead"
            )
        for k, v in changes.items():
            if v is not None:
                setattr(settings, k, v)
        store_path = store or record["store"]
        if not is_url(store_path) and not Path(store_path).exists():
            raise FileNotFoundError(f"the run's store {store_path} is gone; if it has moved, give its new place "
                                    "(bigtopics train --resume RUN STORE)")
        trainer = cls(store_path, run_dir, settings, quiet=quiet, **options)
        if trainer.store.fingerprint() != record["store_fingerprint"]:
            raise ValueError(f"the store at {store_path} changed since {run_dir} started "
                             "(different documents, vocabulary or settings); resuming would mix corpora")
        trainer.lock.acquire()
        try:
            trainer._restore()
        except BaseException as e:
            trainer.lock.release()
            trainer.executor.close()
            if isinstance(e, DiskFullError):
                trainer._resume_hint(e)
            raise
        return trainer

    def _restore(self) -> None:
        """Rebuild the run from its newest good checkpoint, or from the start if it was stopped
        before it wrote its first."""
        run_dir = self.run_dir
        remove_temporaries(run_dir)
        for leftover in run_dir.glob(f".{MODEL_NAME}.*"):  # an interrupted model snapshot
            shutil.rmtree(leftover, ignore_errors=True)
        if never_checkpointed(run_dir):
            self._restart()
            return
        meta, arrays, info = load_latest_checkpoint(run_dir, checkpoint_limits(self.settings, self.store),
                                                    partial(check_checkpoint, self.settings, self.store))
        saved = arrays.pop("saved_assignments", None)
        prior_arrays = {name: arrays.pop(name) for name in list(arrays) if name.startswith("prior_")}
        self.priors = LearnedPriors.from_checkpoint(self.settings, meta.get("priors"), prior_arrays)
        self.table = TopicWordTable.from_state(
            {**arrays, **meta["table_scalars"]}, directory=fresh_dir(run_dir / TABLE_DIR))
        self._open_saved(saved)
        self.state = RunState(**meta["state"])
        self.resumed_from = info
        self.checkpointed = asdict(self.state)
        self._truncate_metrics(self.state.step)
        self._write_settings()

    def _restart(self) -> None:
        """Resume a run stopped before its first checkpoint (by a kill, or a full disk) from the
        start, writing that first checkpoint as a new run does; refused if the run shows progress
        that its checkpoints, now gone, held."""
        run_dir = self.run_dir
        metrics = run_dir / METRICS_NAME
        done = max((r["minibatch"] for r in read_metrics(metrics)), default=0) if metrics.exists() else 0
        model = run_dir / MODEL_NAME
        if done or model.exists():
            remove = " ".join(str(p) for p in (model, metrics) if p.exists())
            raise CheckpointError(
                f"{run_dir} has no checkpoints, yet it had trained {done:,} minibatches (were its checkpoints "
                f"deleted?); to train it again from the start: rm -r {remove} && bigtopics train --resume {run_dir}")
        check_resources(self.store, self.settings, run_dir)
        s = self.settings
        self.table = TopicWordTable(s.n_topics, self.store.n_words, directory=fresh_dir(run_dir / TABLE_DIR))
        self.table.drop_below, self.table.reset_below = s.drop_below, s.reset_below
        self._open_saved(None)
        self.state = RunState()
        self.resumed_from = START_OF_RUN
        self._write_settings()
        self.write_checkpoint()  # the first checkpoint, before the first minibatch

    def _resume_hint(self, error: DiskFullError | ClusterLost) -> DiskFullError | ClusterLost:
        """Complete a full disk's or a lost cluster's one-line error with how to go on."""
        if not error.hint and isinstance(error, ClusterLost):
            error.hint = (f"the checkpoints stand: resume with bigtopics train --resume {self.run_dir}{self.rejoin}"
                          if (self.run_dir / SETTINGS_NAME).exists() else "train again")
        if not error.hint:
            error.hint = (f"free space and resume with bigtopics train --resume {self.run_dir}"
                          if (self.run_dir / SETTINGS_NAME).exists() else "free space and train again")
        return error

    # -- files of the run ------------------------------------------------------------------
    def _start_run_dir(self, overwrite: bool) -> None:
        check_output_place(self.run_dir)  # (a new run too: never inside a store, a model or another run's files)
        if self.run_dir.exists() and holds_files(self.run_dir):
            if not overwrite and (self.run_dir / SETTINGS_NAME).exists():
                raise FileExistsError(f"{self.run_dir} already holds a run (use --resume to continue it, "
                                      "--overwrite to start afresh)")
            check_output(self.run_dir, overwrite, [self.store.location], kind="run")
            self.lock.acquire()  # refuses a run that another process is training
            try:
                shutil.rmtree(self.run_dir)
            finally:
                self.lock.release()
        created = not self.run_dir.exists()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.lock.acquire()
        try:
            check_resources(self.store, self.settings, self.run_dir)
        except BaseException:  # refused before any work: leave no empty run behind
            self.lock.release()
            if created:  # it holds only the lock file
                shutil.rmtree(self.run_dir, ignore_errors=True)
            raise
        self._write_settings()

    def _write_settings(self) -> None:
        record = {"settings": asdict(self.settings), "store": self.store.location,
                  "store_fingerprint": self.store.fingerprint(), "n_training_docs": self.n_training_docs}
        atomic_write_bytes(self.run_dir / SETTINGS_NAME, json.dumps(record, indent=2).encode())

    def _log_metrics(self, record: dict) -> None:
        """Append a record; a write that fails (a full disk) is taken back, so no torn line stays."""
        path = self.run_dir / METRICS_NAME
        line = (json.dumps(record) + "\n").encode()
        with open(path, "ab", buffering=0) as f:
            start = f.tell()
            try:
                rest = memoryview(line)
                while rest:
                    rest = rest[f.write(rest):]
            except OSError as e:
                try:
                    f.truncate(start)
                except OSError:
                    pass
                if is_disk_full(e):
                    raise no_space(path.parent, f"the metrics log {path.name}", len(line)) from e
                raise

    def _truncate_metrics(self, step: int) -> None:
        """Drop metrics logged after the checkpoint we resume from (they will be logged again)."""
        path = self.run_dir / METRICS_NAME
        if path.exists():
            kept = [json.dumps(r) for r in read_metrics(path) if r["minibatch"] <= step]
            atomic_write_bytes(path, "".join(line + "\n" for line in kept).encode())

    def write_model(self, *, final: bool = False) -> Path:
        """model.zarr from the current state; the final one (when the run reaches its end) with alpha
        at the scale fitted for new documents, snapshots and stopped runs' with the learned alpha (so a
        stop exits at once; the model is scaled when the resumed run ends; the fit takes
        nine or more left-to-right passes over the kept-out documents, too many for every
        snapshot)."""
        try:
            return self._write_model(final)
        except DiskFullError as e:  # write_model left nothing half-written; the checkpoints stand
            raise self._resume_hint(e)

    def _write_model(self, final: bool) -> Path:
        s, st = self.settings, self.state
        alpha, scale = self.new_document_alpha() if final else (self.priors.current_alpha(s), None)
        return write_model(
            self.run_dir / MODEL_NAME, self.table.to_csr(), self.table.topic_totals(), self.store.vocab,
            alpha=alpha, eta=self.priors.eta,
            attrs={
                **({"alpha_scale": scale} if scale else {}),
                "settings": asdict(s),
                "progress": asdict(st),
                "store_fingerprint": self.store.fingerprint(),
                "table": {"entries": self.table.n_entries, "resets": self.table.n_resets,
                          "mass_dropped": self.table.mass_dropped},
            },
        )

    def write_checkpoint(self) -> Path:
        state = {**self.table.state(), **(self.saved.state() if self.saved is not None else {})}
        arrays = {k: v for k, v in state.items() if isinstance(v, np.ndarray)}
        scalars = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in state.items() if k not in arrays}
        meta = {"state": asdict(self.state), "table_scalars": scalars, "settings": asdict(self.settings),
                "store_fingerprint": self.store.fingerprint(), "priors": self.priors.scalars()}
        arrays.update(self.priors.arrays())
        try:
            path = save_checkpoint(self.run_dir, self.state.step, meta, arrays, keep=self.settings.keep_checkpoints)
        except DiskFullError as e:  # the earlier checkpoints stand
            raise self._resume_hint(e)
        self.checkpointed = meta["state"]
        return path

    # -- the loop --------------------------------------------------------------------------
    def start(self, overwrite: bool = False) -> None:
        """Create the run directory and an empty topic-word table (run() does this; benchmarks
        that drive step() themselves call it directly)."""
        s = self.settings
        self._start_run_dir(overwrite)
        self.table = TopicWordTable(s.n_topics, self.store.n_words, directory=fresh_dir(self.run_dir / TABLE_DIR))
        self.table.drop_below, self.table.reset_below = s.drop_below, s.reset_below
        self._open_saved(None)

    def _open_saved(self, saved: np.ndarray | None) -> None:
        s = self.settings
        if s.exclude_own:
            self.saved = SavedAssignments(self.store, s.n_topics, fresh_dir(self.run_dir / ASSIGNMENTS_DIR),
                                          saved)

    def run(self, overwrite: bool = False) -> Path:
        """Train to the stopping rule (or a stop signal); returns the model's path.

        A full disk (the table growing, a checkpoint, a snapshot, the metrics log, the saved
        assignments) stops it with a DiskFullError naming the place and the bytes it needed; the
        newest checkpoint written stands, and `resume` continues from it once there is space."""
        self.already_finished = self.resumed_from is not None and self.state.docs_seen >= self.docs_limit()
        try:
            if self.already_finished:  # a resumed run with nothing left to do: its records, once
                with self._full_disk_hint():
                    self.finish()
                return self.run_dir / MODEL_NAME
            with StopOnSignal(self), self._full_disk_hint():
                if self.table is None:
                    self.start(overwrite)
                    self.write_checkpoint()  # so a run killed before its first interval can still resume
                progress = Progress("train", total=self.docs_limit(), unit="docs", quiet=self.quiet,
                                    postfix=self._postfix)
                progress.count = self.state.docs_seen
                try:
                    self._loop(progress)
                finally:
                    progress.close()
                if self.checkpointed != asdict(self.state):
                    self.write_checkpoint()
            with self._full_disk_hint():
                self.finish(reached_the_end=self.stop_signal is None)
        finally:
            self.lock.release()
            self.executor.close()
        return self.run_dir / MODEL_NAME

    @contextmanager
    def _full_disk_hint(self):
        """A full disk or a lost cluster, told how to go on."""
        try:
            yield
        except (DiskFullError, ClusterLost) as e:
            raise self._resume_hint(e)
        except StoreChanged as e:  # the store vanished or changed under the run: its checkpoints stand
            raise StoreChanged(f"{e}; then continue with bigtopics train --resume {self.run_dir}") from e

    def finish(self, reached_the_end: bool = True) -> None:
        """Close the run's records: the final metrics record once it has reached its stopping rule
        (not again when a finished run is resumed), and the model unless model.zarr already holds
        this state; after a stop too, so `topics`, `evaluate` and `infer` read the run so far, and
        after a crash between the last checkpoint and the model."""
        if reached_the_end:
            metrics = self.run_dir / METRICS_NAME
            last = ((read_metrics(metrics) if metrics.exists() else []) or [{}])[-1]
            if not (last.get("final") and last.get("minibatch") == self.state.step):
                self._log_metrics(self._metrics_record(
                    final=True, heldout=self.heldout_score() if self.settings.heldout else None))
        attributes = read_json(self.run_dir / MODEL_NAME / "zarr.json").get("attributes") or {}
        scale_due = (reached_the_end and bool(len(self.scale_doc_numbers)) and self.priors.updates > 0
                     and "alpha_scale" not in attributes)
        if self.state.step and (attributes.get("progress") != asdict(self.state) or scale_due):
            self.write_model(final=reached_the_end)

    def docs_limit(self) -> int:
        return self.settings.document_visits(self.n_training_docs)

    def _loop(self, progress: Progress) -> None:
        s, st = self.settings, self.state
        every_batches, every_seconds = parse_interval(s.checkpoint_every)
        score_batches, score_seconds = parse_interval(s.heldout_every, "held-out interval")
        clock = time.monotonic()
        self.cpu_line, self.cpu_log = cpu_shares(self.executor)
        seconds_before = st.seconds
        last_report = last_snapshot = last_checkpoint = last_score = clock
        interval_tokens, interval_start = 0, clock
        while st.epoch < s.epochs:
            minibatches = self.minibatches(st.epoch, skip=st.batch_in_epoch)
            while True:
                with self.timer("read_wait"):  # time the sampler waits on reading and decompressing
                    work = next(minibatches, None)
                if work is None:
                    break
                if st.docs_seen >= self.docs_limit() or self.stop_signal is not None:
                    minibatches.close()
                    return
                n_docs, n_tokens = self.step(work)
                interval_tokens += n_tokens
                now = time.monotonic()
                st.seconds = seconds_before + now - clock  # before the progress line shows tok/s
                progress.update(n_docs)
                heldout = None
                if s.heldout and ((score_batches and st.step % score_batches == 0)
                                  or (score_seconds and now - last_score >= score_seconds) or st.step == 1):
                    with self.timer("heldout"):
                        heldout = self.heldout_score()
                    last_score = time.monotonic()
                if heldout is not None or now - last_report >= self.report_seconds:
                    self._log_metrics(self._metrics_record(
                        tokens_per_second=interval_tokens / max(now - interval_start, 1e-9), heldout=heldout))
                    last_report, interval_tokens, interval_start = now, 0, now
                if (every_batches and st.step % every_batches == 0) or (
                        every_seconds and now - last_checkpoint >= every_seconds):
                    with self.timer("checkpoint"):
                        self.write_checkpoint()
                    last_checkpoint = time.monotonic()
                # the first snapshot after the first minibatch, so `topics` reads a run from its start
                if now - last_snapshot >= self.snapshot_seconds or not (self.run_dir / MODEL_NAME).exists():
                    with self.timer("snapshot"):
                        self.write_model()
                    last_snapshot = time.monotonic()
            st.epoch += 1
            st.batch_in_epoch = 0

    def heldout_score(self) -> float:
        """Held-out log-likelihood per token of the current topics (left-to-right, Wallach et al.
        2009, without resampling so that long documents stay affordable)."""
        if self._heldout_batch is None:
            self._heldout_batch = read_documents(self.store, self.heldout_docs)
        s = self.settings
        total, n_tokens = heldout_loglik(self.table, self._heldout_batch, alpha=self.priors.current_alpha(s),
                                         eta=self.priors.eta, seed=s.seed,
                                         particles=5, resample=False, n_workers=thread_count(s.workers))
        self.last_heldout = total / max(n_tokens, 1)
        return self.last_heldout

    def new_document_alpha(self) -> tuple[float | np.ndarray, dict | None]:
        """(the model's alpha, how its scale was fitted or None): once alpha has been learned and
        documents were kept out for it, the learned alpha_k times the factor their left-to-right
        score picks (alpha_scale.py), else the alpha the kernels take."""
        s = self.settings
        alpha = self.priors.current_alpha(s)
        if not len(self.scale_doc_numbers) or np.ndim(alpha) == 0:
            return alpha, None
        if self._scale_batch is None:
            self._scale_batch = read_documents(self.store, self.scale_doc_numbers)
        factor, scores = fit_alpha_scale(self.table, self._scale_batch, alpha, self.priors.eta, s.seed,
                                         n_workers=thread_count(s.workers))
        record = {"factor": factor, "documents": len(self.scale_doc_numbers), "training_alpha_sum": float(alpha.sum()),
                  "loglik_per_token": [[f, v] for f, v in scores.items()]}
        return scaled_alpha(alpha, factor), record

    def minibatches(self, epoch: int, skip: int = 0):
        """The executor's work items for the minibatches of an epoch, from the `skip`-th on."""
        return self.executor.minibatches(self.plan.epoch(epoch, skip=skip), self.task, self.saved)

    def step(self, work) -> tuple[int, int]:
        """One minibatch: freeze, local step, global step; returns its documents and tokens."""
        s, st, executor, priors = self.settings, self.state, self.executor, self.priors
        plan = executor.plan_of(work)
        task = self.task
        if s.optimize_alpha or s.optimize_eta:
            task = replace(task, alpha=priors.current_alpha(s), eta=priors.eta,
                           prior_counts=priors.counts_needed(s) if priors.updates_after(s, st.step + 1) else ())
        with self.timer("freeze"):
            own = None if self.saved is None else executor.previous_stats(work, self.saved).stats()
            rows = executor.rows(work, self._table, own, self._buffers)
        with self.timer("local_step"):
            result = executor.run(work, rows, task)
        if self.saved is not None:
            self.saved.record(plan.doc_numbers, result.last_sweep)
        st.step += 1
        rho = learning_rate(st.step, s.tau0, s.kappa)
        stats = result.stats()
        with self.timer("global_step"):
            executor.global_step(self._table, stats, rho, self.n_training_docs / plan.n_docs)
        if task.prior_counts:
            with self.timer("priors"):
                priors.update(s, result.prior_counts, self.store.n_words,
                              priors.rate(s, rho, plan.n_docs, self.n_training_docs))
        n_tokens = executor.n_tokens(work)
        st.batch_in_epoch += 1
        st.docs_seen += plan.n_docs
        st.tokens_seen += n_tokens
        return plan.n_docs, n_tokens

    # -- reporting -------------------------------------------------------------------------
    def _metrics_record(self, tokens_per_second: float | None = None, final: bool = False,
                        heldout: float | None = None) -> dict:
        st = self.state
        elapsed = max(st.seconds, 1e-9)
        return {
            "minibatch": st.step,
            "epoch": st.epoch,
            "docs_seen": st.docs_seen,
            "tokens_seen": st.tokens_seen,
            "seconds": round(st.seconds, 3),
            "tokens_per_s": round(tokens_per_second if tokens_per_second is not None else st.tokens_seen / elapsed, 1),
            "rho": learning_rate(max(st.step, 1), self.settings.tau0, self.settings.kappa),
            "pi": self.table.pi,
            "table_entries": self.table.n_entries,
            "table_resets": self.table.n_resets,
            "mass_dropped": self.table.mass_dropped,
            "heldout_loglik": heldout,
            "heldout_perplexity": None if heldout is None else float(np.exp(-heldout)),
            "rss_bytes": rss_bytes(),
            "peak_rss_bytes": peak_rss_bytes(),
            "phase_seconds": {k: round(v, 3) for k, v in sorted(self.phase_seconds.items())},
            **({"alpha_sum": float(self.priors.alpha.sum())} if self.priors.alpha is not None else {}),
            **({"eta": self.priors.eta} if self.settings.optimize_eta else {}),
            **({"cluster": cluster} if (cluster := self.executor.metrics()) else {}),
            **(self.cpu_log.record() if self.cpu_log is not None else {}),
            **({"final": True} if final else {}),
        }

    def _postfix(self) -> dict:
        st = self.state
        out = {
            "tok/s": f"{st.tokens_seen / max(st.seconds, 1e-9):,.0f}",
            "entries": f"{self._table.n_entries:,}" if self._table is not None else "0",  # (never waits: settle)
            "mem": format_bytes(rss_bytes()),
        }
        if self.last_heldout is not None:
            out["heldout"] = f"{self.last_heldout:.3f}"
        out.update(self.cpu_line.postfix() if self.cpu_line is not None else {})
        cluster = self.executor.metrics()
        if cluster:
            out["workers"] = cluster["workers"]
            out["tasks"] = cluster["tasks_in_flight"]
            out["sent/mb"] = format_bytes(cluster["bytes_sent_per_minibatch"])
            out["recv/mb"] = format_bytes(cluster["bytes_received_per_minibatch"])
            out["wait"] = f"{cluster['wait_seconds']:.0f}s"
        return out


def summary(trainer: Trainer) -> str:
    """What a finished run did, in one line (the CLI prints it)."""
    st = trainer.state
    return (f"trained {trainer.settings.n_topics} topics: {st.docs_seen:,} documents seen ({st.tokens_seen:,} tokens) "
            f"in {st.seconds:.1f} s ({st.tokens_seen / max(st.seconds, 1e-9):,.0f} tokens/s); table "
            f"{trainer.table.n_entries:,} entries, peak memory {format_bytes(peak_rss_bytes())}")


def train(store_path, run_dir, settings: TrainSettings, *, overwrite: bool = False, quiet: bool = False,
          **options) -> Path:
    """Train a model on a store; returns the path of the written model (`<run_dir>/model.zarr`)."""
    return Trainer(store_path, run_dir, settings, quiet=quiet, **options).run(overwrite=overwrite)


def resume(run_dir, *, quiet: bool = False, options: dict | None = None, store=None, **changes) -> Path:
    """Continue a run from its newest good checkpoint; returns the path of the written model."""
    return Trainer.resume(run_dir, quiet=quiet, options=options, store=store, **changes).run()
