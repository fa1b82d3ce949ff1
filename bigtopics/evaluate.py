"""`bigtopics evaluate`: judging a model (algorithms.md, "Evaluation").

`evaluate()` writes a run's per-topic diagnostics (diagnostics.py) and, with a held-out store or
documents held out of training, its held-out scores (heldout.py) to <run>/evaluation.json;
`current_evaluation` reads that file back for report.py and export.py if it scored the model as
it is now, and `format_table` prints it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from .atomic import atomic_write_bytes
from .cluster import connected
from .cores import use_threads
from .diagnostics import topic_diagnostics
from .doc_topics import DocTopics
from .heldout import METHODS, heldout_documents, heldout_scores
from .locations import canonical_location, is_url
from .model import Model, alpha_attribute, load_model
from .options import MAX_COUNT, MAX_SWEEPS, MAX_WORKERS, check_integer, check_real, check_seed
from .places import check_output_file, output_kind
from .rundir import SETTINGS_NAME, read_settings
from .store import open_store

EVALUATION_NAME = "evaluation.json"
EVALUATION_FORMAT_VERSION = 1
# Most words per topic for coherence: UMass coherence costs top_n^2 pairs per topic.
MAX_TOP_WORDS = 1000


def validate_options(*, heldout_docs: int, methods, particles: int, top_n: int, prominence_threshold: float,
                     sample_docs: int, seed: int, workers: int) -> None:
    """evaluate's numeric options finite and in range (options.py's bounds), each failure one
    line naming the option as the CLI spells it."""
    check_integer(heldout_docs, "--heldout-docs", 1, MAX_COUNT)
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"--method: give one or more of {', '.join(METHODS)} (got {', '.join(map(str, methods))})")
    check_integer(particles, "--particles", 1, MAX_SWEEPS)
    check_integer(top_n, "--top-words", 2, MAX_TOP_WORDS)
    check_real(prominence_threshold, "--prominence", 0.0, 1.0, high_open=True, text="in [0, 1)")
    check_integer(sample_docs, "--sample-docs", 1, MAX_COUNT)
    check_seed(seed)
    check_integer(workers, "--workers", 0, MAX_WORKERS)


def is_evaluation(path) -> bool:
    """Whether the file at `path` is an evaluation bigtopics wrote (recognised by its first
    bytes: the format key, or for one from before it, the "model" and "n_topics" keys)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if not head.lstrip().startswith(b"{"):
        return False
    return b'"evaluation_format_version"' in head or all(
        key in head for key in (b'"model":', b'"n_topics":', b'"n_words":'))


def run_folder(run) -> Path:
    """The folder a run's files are in: `run`, or the folder holding it when `run` is a model.zarr
    itself (RUN/model.zarr reads RUN's settings, as RUN does)."""
    run = Path(run)
    return run.parent if output_kind(run) == "model" else run


def evaluation_path(run) -> Path:
    """Where a run's evaluation goes by default: <run>/evaluation.json (beside the model when
    `run` is a model.zarr itself, never inside it)."""
    return run_folder(run) / EVALUATION_NAME


def evaluate(run, *, store=None, heldout_store=None, doc_topics=None, output=None, heldout_docs: int = 1000,
             methods=METHODS, particles: int = 10, resample: bool = True, top_n: int = 10,
             prominence_threshold: float = 0.1, sample_docs: int = 2000, seed: int = 0, workers: int = 0,
             quiet: bool = False, storage_options: dict | None = None, overwrite: bool = False,
             cluster: str | None = None, scheduler: str | None = None) -> dict:
    """Diagnostics (and held-out scores with a held-out store) of a run; written as JSON to
    `output` (default <run>/evaluation.json). The stores and doc_topics may be local paths or URLs
    (`storage_options` for them, bigtopics/locations.py); the output is a local file, which replaces
    an earlier evaluation but any other existing file only with `overwrite` (and never a file
    inside a store or model, nor a run's own files). With `cluster` ("local:N") or `scheduler`
    (an address) the inference of the sampled documents and of the held-out ones runs on a Dask
    cluster, with the same result."""
    validate_options(heldout_docs=heldout_docs, methods=methods, particles=particles, top_n=top_n,
                     prominence_threshold=prominence_threshold, sample_docs=sample_docs, seed=seed, workers=workers)
    model = load_model(run)  # first: RUN that is not a run (a store, say) is named for what it is
    output = Path(output) if output else evaluation_path(run)
    check_output_file(output, overwrite, is_evaluation, "a bigtopics evaluation", run_file=EVALUATION_NAME)
    n_workers = use_threads(workers)
    if store is None:
        store = _run_store(run)
    result = {"evaluation_format_version": EVALUATION_FORMAT_VERSION,
              "model": str(model.path), "scored_model": model_state(model), "n_topics": model.n_topics,
              "n_words": model.n_words, "alpha": alpha_attribute(model.alpha), "eta": model.eta, "top_words": top_n,
              "prominence_threshold": prominence_threshold, "store": str(store) if store else None}
    with connected(cluster, scheduler) as client:
        result["topics"] = topic_diagnostics(
            model, open_store(store, storage_options) if store else None,
            DocTopics(doc_topics, storage_options) if doc_topics else None,
            top_n=top_n, prominence_threshold=prominence_threshold, sample_docs=sample_docs, seed=seed,
            n_workers=n_workers, quiet=quiet, client=client)
        held_out_of_training = _run_heldout_documents(run, store, storage_options)
        if heldout_store is not None or (store and held_out_of_training is not None):
            result["heldout"] = heldout_scores(
                model, open_store(heldout_store or store, storage_options), max_docs=heldout_docs, seed=seed,
                methods=methods, particles=particles, resample=resample, n_workers=n_workers, quiet=quiet,
                doc_numbers=None if heldout_store is not None else held_out_of_training, client=client)
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(output, json.dumps(result, indent=2).encode())
    result["output"] = str(output)
    return result


def model_state(model: Model) -> dict:
    """What identifies the model an evaluation scored: its training step (minibatches; shown in
    notices) and a fingerprint of its topic sizes and entry count, which any further training
    changes, so that a run retrained from scratch to the same step is told apart too."""
    digest = hashlib.sha256(np.ascontiguousarray(model.topic_totals(), np.float64).tobytes())
    digest.update(f"{model.n_words} {model.n_entries} {alpha_attribute(model.alpha)!r} {model.eta!r}".encode())
    return {"step": (model.attrs.get("progress") or {}).get("step"), "fingerprint": digest.hexdigest()[:16]}


def current_evaluation(run, model: Model) -> tuple[dict[int, dict], str | None]:
    """The per-topic records of <run>/evaluation.json by topic if it scored `model` as it is now.
    Otherwise ({}, a notice saying why): figures of an earlier model, or of an unknown one (a
    file from before evaluation.json recorded the model), would be silently wrong. No file: ({}, None)."""
    path = evaluation_path(run)
    if not path.exists():
        return {}, None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        scored, now = record.get("scored_model"), model_state(model)
        if scored == now:
            return {r["topic"]: r for r in record["topics"]}, None
        if scored is None:
            why = "does not record which model it scored (written by an older bigtopics)"
        elif scored["step"] == now["step"]:
            why = f"is from another model with the same step ({now['step']})"
        else:
            earlier = None not in (scored["step"], now["step"]) and scored["step"] < now["step"]
            why = f"is from {'an earlier' if earlier else 'another'} model (step {scored['step']}, now {now['step']})"
    except (OSError, ValueError, AttributeError, KeyError, TypeError) as e:  # damaged, or not an evaluation
        why = f"cannot be read as an evaluation ({type(e).__name__}: {e})"
    return {}, f"{path} {why}; its per-topic figures are left out: rerun bigtopics evaluate {run}"


def _run_heldout_documents(run, store, storage_options=None) -> np.ndarray | None:
    """The documents `bigtopics train --heldout N` kept out of training, when `store` is the run's
    (the same path or URL)."""
    run = run_folder(run)
    if store is None or not (run / SETTINGS_NAME).exists():
        return None
    record = read_settings(run)
    n_heldout, seed = record["settings"].get("heldout", 0), record["settings"].get("seed", 0)
    if not n_heldout or canonical_location(record["store"]) != canonical_location(store):
        return None
    return heldout_documents(open_store(store, storage_options).n_docs, n_heldout, seed)


def _run_store(run) -> str | None:
    """The store a run trained on, as its settings.json names it (None for a model without a run);
    FileNotFoundError if that store is gone, as for export and site: coherence and the document
    shares silently left out would look like a complete evaluation. (A URL is taken as it is:
    opening it says if it is gone.)"""
    run = run_folder(run)
    if (run / SETTINGS_NAME).exists():
        path = read_settings(run)["store"]
        if path and not is_url(path) and not Path(path).exists():
            raise FileNotFoundError(f"the run's store {path} is gone; if it has moved, give its new place "
                                    "with --store")
        return path or None
    return None


def format_table(result: dict, n_words: int = 6) -> str:
    """The per-topic diagnostics (and held-out scores) as a plain-text table."""
    # (header, key, width, format); columns whose key the records lack are left out
    columns = [("topic", "topic", 5, "d"), ("share", "share", 6, ".1%"), ("coherence", "coherence", 9, ".2f"),
               ("npmi", "npmi", 6, ".3f"), ("c_v", "c_v", 5, ".3f"),
               ("entropy", "entropy", 7, ".2f"), ("words", "stored_words", 8, "d"),
               ("top-1", "top_topic_docs", 6, ".1%"), ("prom.", "prominent_docs", 6, ".1%")]
    topics = result["topics"]
    present = [c for c in columns if topics and c[1] in topics[0]]
    lines = ["  ".join(f"{header:>{width}}" for header, _, width, _ in present) + "  top words"]
    for record in topics:
        cells = [f"{record[key]:>{width}{fmt}}" for _, key, width, fmt in present]
        lines.append("  ".join(cells) + "  " + " ".join(record["top_words"][:n_words]))
    heldout = result.get("heldout")
    if heldout:
        lines.append("")
        for method in METHODS:
            if method in heldout:
                h = heldout[method]
                lines.append(f"held-out {method}: {h['loglik_per_token']:.4f} nats/token, perplexity "
                             f"{h['perplexity']:.1f} ({h['tokens']:,} tokens of {heldout['n_docs']:,} documents)")
    return "\n".join(lines)
