"""Judging a model: held-out likelihood and per-topic diagnostics (algorithms.md, "Evaluation").

Held-out likelihood is in heldout.py; this module adds the per-topic diagnostics and the
`bigtopics evaluate` command.

Topic diagnostics, streamed over a store block by block: UMass coherence of the top words
(Mimno et al. 2011), size in tokens, entropy of p(w | k) (nats), stored words, and the share of
documents of which a topic is the top topic or has proportion >= `prominence` (from a
doc_topics.zarr, or inferred on a bounded sample of documents).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np

from .atomic import atomic_write_bytes
from .infer import (DocTopics, InferSettings, check_vocabulary, infer_block)
from .kernels.evaluate import count_cooccurrences
from .model import Model, load_model
from .heldout import METHODS, heldout_documents, heldout_scores
from .progress import Progress
from .rundir import SETTINGS_NAME
from .store import Store, open_store

EVALUATION_NAME = "evaluation.json"


# -- topic diagnostics ----------------------------------------------------------------------------
def top_word_ids(model: Model, k: int, n: int) -> np.ndarray:
    """Topic k's n most probable word ids, most probable first (ties: lower id first)."""
    words, values = model.topic_entries(k)
    top = words[np.lexsort((words, -values))[:n]]
    if len(top) < n:  # a nearly empty topic: every unstored word has the smoothing probability
        unstored = np.setdiff1d(np.arange(min(model.n_words, n + len(words))), words)
        top = np.concatenate([top, unstored[: n - len(top)]])
    return top


def umass_coherence(store: Store, top_words: np.ndarray, *, quiet: bool = True) -> tuple[np.ndarray, dict]:
    """UMass coherence of every topic's top words (rows of top_words, most probable first):
    C_k = sum_{m > l} log((D(v_m, v_l) + 1) / D(v_l)), with D document frequencies in the store,
    counted in one streaming pass. A top word absent from the store counts as D = 1 (the term
    is otherwise undefined). Returns (C, {"doc_freq": D of each top word})."""
    n_topics, n_top = top_words.shape
    unique = np.unique(top_words)
    local_of = np.full(store.n_words, -1, np.int32)
    local_of[unique] = np.arange(len(unique), dtype=np.int32)
    top_local = local_of[top_words]
    flat = top_local.ravel()
    order = np.argsort(flat, kind="stable")
    occ_indptr = np.zeros(len(unique) + 1, np.int64)
    np.cumsum(np.bincount(flat, minlength=len(unique)), out=occ_indptr[1:])
    occ_topic = (order // n_top).astype(np.int64)
    occ_rank = (order % n_top).astype(np.int64)
    present = np.zeros(len(unique), np.bool_)
    doc_freq = np.zeros(len(unique), np.int64)
    pair_freq = np.zeros((n_topics, n_top, n_top), np.int64)
    with Progress("coherence", total=store.n_docs, unit="docs", quiet=quiet) as progress:
        for block in store.iter_blocks():
            count_cooccurrences(block.indptr, block.indices, local_of, top_local, occ_indptr, occ_topic, occ_rank,
                                present, doc_freq, pair_freq)
            progress.update(block.n_docs)
    denominators = np.maximum(doc_freq[top_local], 1).astype(np.float64)  # D(v_l), K x W
    below = np.tril(np.ones((n_top, n_top), bool), -1)  # (m, l) with l < m
    terms = np.log((pair_freq + 1.0) / denominators[:, None, :])
    return np.where(below[None], terms, 0.0).sum(axis=(1, 2)), {"doc_freq": doc_freq[top_local]}


def topic_entropy(values: np.ndarray, total: float, n_words: int, eta: float) -> float:
    """-sum_w p(w|k) log p(w|k) over the whole vocabulary (nats), from a topic's stored N[k, w]
    values and N[k]."""
    norm = n_words * eta + total
    p = (eta + values) / norm
    smoothing = eta / norm
    return float(-(p * np.log(p)).sum() - (n_words - len(values)) * smoothing * math.log(smoothing))


def prominence(doc_topics_blocks, n_topics: int, threshold: float) -> tuple[np.ndarray, np.ndarray, int]:
    """(documents whose top topic is k, documents with theta_k >= threshold, documents) from
    blocks of (first doc, indptr, topics by decreasing weight, weights, lengths)."""
    top = np.zeros(n_topics, np.int64)
    prominent = np.zeros(n_topics, np.int64)
    n_docs = 0
    for _, indptr, topics, weights, _ in doc_topics_blocks:
        nonempty = np.diff(indptr) > 0
        top += np.bincount(topics[indptr[:-1][nonempty]], minlength=n_topics)
        prominent += np.bincount(topics[weights >= threshold], minlength=n_topics)
        n_docs += len(indptr) - 1
    return top, prominent, n_docs


def sampled_doc_topics(model: Model, store: Store, n_docs: int, seed: int, n_workers: int = 1):
    """Inferred proportions of about n_docs documents of whole blocks chosen at random."""
    rng = np.random.default_rng(seed)
    taken = 0
    step = min(store.docs_per_block, max(1, n_docs))
    for start in rng.permutation(np.arange(0, store.n_docs, step)):
        if taken >= n_docs:
            return
        block = store.read_docs(start, min(start + step, start + n_docs - taken))
        result = infer_block(model, block, InferSettings(seed=seed), n_workers)
        taken += block.n_docs
        yield block.start, result["indptr"], result["indices"].astype(np.int64), result["data"], result["doc_lengths"]


def topic_diagnostics(model: Model, store: Store | None = None, doc_topics: DocTopics | None = None, *,
                      top_n: int = 10, prominence_threshold: float = 0.1, sample_docs: int = 2000, seed: int = 0,
                      n_workers: int = 1, quiet: bool = True) -> list[dict]:
    """One record per topic: top words, tokens, share, entropy, stored words, and (with a store)
    UMass coherence and (with doc_topics or a store) the document shares."""
    totals = model.topic_totals()
    top = np.stack([top_word_ids(model, k, top_n) for k in range(model.n_topics)])
    records = []
    for k in range(model.n_topics):
        _, values = model.topic_entries(k)
        records.append({"topic": k, "top_words": [str(model.vocab[w]) for w in top[k]],
                        "tokens": float(totals[k]), "share": float(totals[k] / max(totals.sum(), 1e-300)),
                        "entropy": topic_entropy(values, totals[k], model.n_words, model.eta),
                        "stored_words": len(values)})
    if store is not None:
        check_vocabulary(model, store)
        coherence, _ = umass_coherence(store, top, quiet=quiet)
        for record, c in zip(records, coherence):
            record["coherence"] = float(c)
    blocks = None
    if doc_topics is not None:
        blocks, source = doc_topics.iter_blocks(), str(doc_topics.path)
    elif store is not None:
        blocks, source = sampled_doc_topics(model, store, sample_docs, seed, n_workers), "sample"
    if blocks is not None:
        top_docs, prominent_docs, n_docs = prominence(blocks, model.n_topics, prominence_threshold)
        for k, record in enumerate(records):
            record["top_topic_docs"] = float(top_docs[k] / max(n_docs, 1))
            record["prominent_docs"] = float(prominent_docs[k] / max(n_docs, 1))
            record["prominence_from"] = source
    return records


# -- the evaluate command ---------------------------------------------------------------------------
def evaluate(run, *, store=None, heldout_store=None, doc_topics=None, output=None, heldout_docs: int = 1000,
             methods=METHODS, particles: int = 10, resample: bool = True, top_n: int = 10,
             prominence_threshold: float = 0.1, sample_docs: int = 2000, seed: int = 0, workers: int = 0,
             quiet: bool = False) -> dict:
    """Diagnostics (and held-out scores with a held-out store) of a run; written as JSON to
    `output` (default <run>/evaluation.json)."""
    import numba

    model = load_model(run)
    n_workers = workers or numba.config.NUMBA_NUM_THREADS
    numba.set_num_threads(min(n_workers, numba.config.NUMBA_NUM_THREADS))
    if store is None:
        store = _run_store(run)
    result = {"model": str(model.path), "scored_model": model_state(model), "n_topics": model.n_topics,
              "n_words": model.n_words, "alpha": model.alpha, "eta": model.eta, "top_words": top_n,
              "prominence_threshold": prominence_threshold, "store": str(store) if store else None}
    result["topics"] = topic_diagnostics(
        model, open_store(store) if store else None, DocTopics(doc_topics) if doc_topics else None,
        top_n=top_n, prominence_threshold=prominence_threshold, sample_docs=sample_docs, seed=seed,
        n_workers=n_workers, quiet=quiet)
    held_out_of_training = _run_heldout_documents(run, store)
    if heldout_store is not None or (store and held_out_of_training is not None):
        result["heldout"] = heldout_scores(
            model, open_store(heldout_store or store), max_docs=heldout_docs, seed=seed, methods=methods,
            particles=particles, resample=resample, n_workers=n_workers, quiet=quiet,
            doc_numbers=None if heldout_store is not None else held_out_of_training)
    output = Path(output) if output else Path(run) / EVALUATION_NAME
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(output, json.dumps(result, indent=2).encode())
    result["output"] = str(output)
    return result


def model_state(model: Model) -> dict:
    """What identifies the model an evaluation scored: its training step (minibatches; shown in
    notices) and a fingerprint of its topic sizes and entry count, which any further training
    changes, so that a run retrained from scratch to the same step is told apart too."""
    digest = hashlib.sha256(np.ascontiguousarray(model.topic_totals(), np.float64).tobytes())
    digest.update(f"{model.n_words} {model.n_entries} {model.alpha!r} {model.eta!r}".encode())
    return {"step": (model.attrs.get("progress") or {}).get("step"), "fingerprint": digest.hexdigest()[:16]}


def current_evaluation(run, model: Model) -> tuple[dict[int, dict], str | None]:
    """The per-topic records of <run>/evaluation.json by topic if it scored `model` as it is now.
    Otherwise ({}, a notice saying why): figures of an earlier model, or of an unknown one (a
    file from before evaluation.json recorded the model), would be silently wrong. No file: ({}, None)."""
    path = Path(run) / EVALUATION_NAME
    if not path.exists():
        return {}, None
    record = json.loads(path.read_text())
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
    return {}, f"{path} {why}; its per-topic figures are left out: rerun bigtopics evaluate {run}"


def _run_heldout_documents(run, store) -> np.ndarray | None:
    """The documents `bigtopics train --heldout N` kept out of training, when `store` is the run's."""
    path = Path(run) / SETTINGS_NAME
    if store is None or not path.exists():
        return None
    record = json.loads(path.read_text())
    n_heldout, seed = record["settings"].get("heldout", 0), record["settings"].get("seed", 0)
    if not n_heldout or Path(record["store"]).resolve() != Path(store).resolve():
        return None
    return heldout_documents(open_store(store).n_docs, n_heldout, seed)


def _run_store(run) -> str | None:
    """The store a run trained on, if its settings.json names one that still exists."""
    settings = Path(run) / "settings.json"
    if settings.exists():
        path = json.loads(settings.read_text()).get("store")
        if path and Path(path).exists():
            return path
    return None


def format_table(result: dict, n_words: int = 6) -> str:
    """The per-topic diagnostics (and held-out scores) as a plain-text table."""
    # (header, key, width, format); columns whose key the records lack are left out
    columns = [("topic", "topic", 5, "d"), ("share", "share", 6, ".1%"), ("coherence", "coherence", 9, ".2f"),
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
