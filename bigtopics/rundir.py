"""The run directory: its layout, settings record, metrics log, lock and summary.

    <run>/settings.json      the settings, the store's path and fingerprint (written atomically)
         /metrics.jsonl      one JSON record per report; a line torn by a crash is skipped
         /checkpoints/       step-<minibatch>.ckpt files (checkpoints.py)
         /table/             the memory-mapped topic-word table, rebuilt from a checkpoint on resume
         /assignments/       with exclude-own, each document's latest assignments
         /model.zarr         the model, written every few minutes and at the end (model.py)
         /.lock              held by the process training the run
"""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .atomic import is_disk_full, no_space
from .checkpoints import CheckpointError, list_checkpoints, read_checkpoint_meta
from .memory import format_bytes
from .model import MODEL_NAME, Model
from .progress import format_duration
from .settings import recorded_settings

SETTINGS_NAME = "settings.json"
METRICS_NAME = "metrics.jsonl"
TABLE_DIR = "table"
ASSIGNMENTS_DIR = "assignments"


@dataclass
class RunState:
    """Where a run stands."""

    epoch: int = 0
    batch_in_epoch: int = 0
    step: int = 0
    docs_seen: int = 0
    tokens_seen: int = 0
    seconds: float = 0.0


class RunLock:
    """An exclusive lock on a run directory, so two trainers never share one (a second
    `--resume` while the first still runs would delete the first's memory-mapped table)."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / ".lock"
        self.handle = None

    def acquire(self) -> None:
        import fcntl

        self.handle = open(self.path, "w")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.close()
            self.handle = None
            raise FileExistsError(f"{self.path.parent} is in use by another bigtopics train process") from None

    def release(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


def fresh_dir(path: Path) -> Path:
    """An empty directory for memory-mapped arrays (the table, the saved assignments), whose files
    are rebuilt on every start."""
    shutil.rmtree(path, ignore_errors=True)
    try:
        path.mkdir(parents=True)
    except OSError as e:
        if is_disk_full(e):
            raise no_space(path.parent, f"the folder {path.name}", None) from e
        raise
    return path


def read_metrics(path) -> list[dict]:
    """The records of a metrics log; a line torn by a crash (partial, or zeros) is skipped."""
    records = []
    for line in Path(path).read_text(errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return [r for r in records if isinstance(r, dict) and "minibatch" in r]


# What train records in settings.json, each key with the JSON type it has there.
SETTINGS_RECORD = {"settings": dict, "store": str, "store_fingerprint": dict, "n_training_docs": int}


def read_settings(run_dir: Path) -> dict:
    """A run's settings.json, checked to hold what train writes there (SETTINGS_RECORD): a damaged
    or crafted one (not UTF-8 JSON, nested too deeply, a key missing or of another type) is one
    line naming it, not an error from deep inside a command."""
    path = Path(run_dir) / SETTINGS_NAME
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a training run (no {SETTINGS_NAME})")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: nested too deeply
        raise ValueError(f"{path} is damaged: it cannot be read as JSON ({type(e).__name__})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path} is damaged: it holds a JSON {type(record).__name__}, not an object")
    for key, kind in SETTINGS_RECORD.items():
        value = record.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"{path} is damaged: its {key} is {str(value)[:40]!r}, not "
                             f"{'an object' if kind is dict else 'a string' if kind is str else 'a whole number'}")
    return record


def run_in_progress(run_dir) -> bool:
    """Whether a process is training the run now (it holds the run's lock). Only reads: the lock
    file is opened read-only and tried with a shared lock, so a run on read-only media (or one
    another user trains) can be described; a lock file that cannot be opened at all says no."""
    import fcntl

    try:
        handle = open(Path(run_dir) / ".lock", "rb")
    except OSError:  # missing, or not readable: no process of ours can be told to hold it
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:  # a filesystem without locks
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


# What `describe_run` reads from a metrics record: a number under each of these keys.
SUMMARY_KEYS = ("minibatch", "epoch", "docs_seen", "tokens_seen", "seconds", "tokens_per_s", "table_entries",
                "table_resets", "mass_dropped", "peak_rss_bytes")


def last_summary_record(path) -> tuple[dict | None, str | None]:
    """The last record of a metrics log that holds every SUMMARY_KEYS as a number, and a warning
    naming the file and line of a later line that does not (a line torn by a crash, the last
    one, is skipped silently as read_metrics does), or None."""
    lines = Path(path).read_text(errors="replace").splitlines()
    last, problem = None, None
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except ValueError:
            if number < len(lines) and line.strip(" \x00"):
                problem = f"{path}:{number}: not JSON"
            continue
        if not isinstance(record, dict):
            problem = f"{path}:{number}: not a JSON object"
            continue
        bad = [key for key in SUMMARY_KEYS if not isinstance(record.get(key), (int, float))
               or isinstance(record.get(key), bool)]
        if bad:
            problem = f"{path}:{number}: not a metrics record ({', '.join(bad[:3])} missing or not a number)"
            continue
        last, problem = record, None
    if problem:
        problem += "; the last good record before it is shown" if last else "; no report is shown"
    return last, problem


def describe_run(run_dir) -> str:
    """A readable summary of a run: settings, progress, checkpoints and model (`bigtopics info`)."""
    run_dir = Path(run_dir)
    record = read_settings(run_dir)
    settings = recorded_settings(record, run_dir / SETTINGS_NAME)
    lines = [f"training run {run_dir}", f"  store            {record['store']}",
             "  settings         " + ", ".join(f"{k}={v}" for k, v in asdict(settings).items())]
    checkpoints = list_checkpoints(run_dir)
    metrics = run_dir / METRICS_NAME
    last, problem = last_summary_record(metrics) if metrics.exists() else (None, None)
    if problem:
        warnings.warn(problem, stacklevel=2)
    records = [last] if last else []
    # where the run stands: the metrics log's last record (written every few seconds while it
    # trains) or the newest checkpoint, whichever is further
    st = RunState()
    if checkpoints:
        try:
            st = RunState(**read_checkpoint_meta(checkpoints[-1].path)["state"])
        except CheckpointError as e:
            lines.append(f"  progress         unknown: {e}")
    if records and records[-1]["minibatch"] > st.step:
        st = RunState(**{k: records[-1][k] for k in ("epoch", "docs_seen", "tokens_seen", "seconds")},
                      step=records[-1]["minibatch"])
    training = run_in_progress(run_dir)
    if checkpoints or records:
        lines.append(f"  progress         {st.docs_seen / max(record['n_training_docs'], 1):.2f} epochs done "
                     f"({st.docs_seen:,} document visits), {st.step:,} minibatches, {st.tokens_seen:,} tokens, "
                     f"{format_duration(st.seconds)} of training" + (" (training now)" if training else ""))
    if records:
        m = records[-1]
        lines.append(f"  last report      minibatch {m['minibatch']:,}: {m['tokens_per_s']:,.0f} tokens/s, "
                     f"table {m['table_entries']:,} entries, {m['table_resets']} resets, "
                     f"mass dropped {m['mass_dropped']:.4g}, peak memory {format_bytes(m['peak_rss_bytes'])}"
                     + (" (finished)" if m.get("final") else ""))
    lines.append(f"  checkpoints      {len(checkpoints)} in {run_dir / 'checkpoints'}")
    for c in checkpoints:
        lines.append(f"    {c.path.name}  minibatch {c.step:,}  {format_bytes(c.size)}")
    model = run_dir / MODEL_NAME
    lines.append(f"  model            {model if model.exists() else 'not written yet'}")
    return "\n".join(lines)


def describe_model(model: Model) -> str:
    """A readable summary of a model.zarr given alone (`bigtopics info`): its size, priors, how far
    it was trained and on what (a model inside a run is described with the run)."""
    alpha = (f"{model.alpha:g} each topic (symmetric)" if np.ndim(model.alpha) == 0 else
             f"learned, summing to {model.alpha_sum:.4g} ({model.alpha.min():.3g} to {model.alpha.max():.3g})")
    lines = [f"model       {model.path}", f"topics      {model.n_topics:,}", f"words       {model.n_words:,}",
             f"entries     {model.n_entries:,}  (stored topic-word counts; "
             f"{float(model.topic_totals().sum()):,.0f} tokens in the topics)",
             f"alpha       {alpha}", f"eta         {model.eta:g}"]
    progress, trained_on = model.attrs.get("progress"), model.attrs.get("store_fingerprint")
    if progress:  # checked where the model was opened (model.MODEL_ATTRIBUTES)
        lines.append(f"progress    {progress.get('step', 0):,} minibatches, {progress.get('docs_seen', 0):,} document "
                     f"visits, {progress.get('tokens_seen', 0):,} tokens")
    if trained_on:
        lines.append(f"trained on  a store of {trained_on.get('n_docs') or 0:,} documents, "
                     f"{trained_on.get('n_tokens') or 0:,} tokens")
    return "\n".join(lines)

