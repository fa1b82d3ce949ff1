"""Helpers of benchmarks/bench_peers.py: the shared train/held-out split and the one evaluator
that scores every system (the systems themselves, and the child process that trains one, are in
benchmarks/systems.py).

The split: a fixed seeded sample of the store's documents (trainer.heldout_documents) is held
out; the other non-empty documents are written, once, to a *training store* whose vocabulary is
the words that occur in them (ids renumbered, order kept). Every system trains on exactly that
store's bags of words, so every topic-word matrix has the same columns; held-out tokens of words
that never occur in training are dropped (for every system alike) because no system can score
them. bigtopics trains on the training store with heldout=0, so its timed training never
includes scoring; the peers train on the same documents copied to a plain NumPy file
(peer_corpus), so that their processes need not load bigtopics' store reader.

The evaluator sees only a topic-word matrix P (K x V, rows p(w | k)): DenseTopics wraps it as a
`source` for bigtopics.heldout.heldout_loglik (left-to-right) and its top words feed
bigtopics.diagnostics.umass_coherence on the training store.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from bigtopics.atomic import atomic_write_bytes
from bigtopics.diagnostics import umass_coherence
from bigtopics.heldout import heldout_documents, heldout_loglik
from bigtopics.minibatch import Minibatch
from bigtopics.reader import read_documents
from bigtopics.store import StoreWriter, index_dtype_for, open_store
from bigtopics.synth import truth_path

# The evaluator's smoothing: p(w|k) = (P[k, w] + EVAL_ETA) / (1 + V EVAL_ETA), equal to P[k, w]
# in float64 for any P[k, w] above ~1e-14 (and never zero, so log p stays finite).
EVAL_ETA = 1e-30


# -- the split -------------------------------------------------------------------------------
def prepare_split(source_path, n_heldout: int, seed: int, cache: Path, n_train: int = 0) -> tuple[Path, Path]:
    """(training store, held-out .npz) for the store at source_path, built once into `cache`. With
    n_train > 0 only a seeded sample of n_train of the other documents is trained on (a smaller
    corpus with the same held-out documents)."""
    source = open_store(source_path)
    if not 0 < n_heldout < source.n_docs:
        raise ValueError(f"cannot hold out {n_heldout} of the {source.n_docs} documents of {source.path}")
    if n_train and not 0 < n_train < source.n_docs - n_heldout:
        raise ValueError(f"cannot train on {n_train} of the {source.n_docs - n_heldout} documents not held out")
    key = json.dumps([str(source.path.resolve()), source.fingerprint(), n_heldout, seed]
                     + ([n_train] if n_train else []), sort_keys=True)
    stem = (f"{source.path.stem}-h{n_heldout}" + (f"-t{n_train}" if n_train else "")
            + f"-s{seed}-{hashlib.sha1(key.encode()).hexdigest()[:8]}")
    train_path, heldout_path = cache / f"{stem}-train.zarr", cache / f"{stem}-heldout.npz"
    if train_path.exists() and heldout_path.exists():
        return train_path, heldout_path
    held = heldout_documents(source.n_docs, n_heldout, seed)
    is_trained = np.ones(source.n_docs, bool)
    is_trained[held] = False
    if n_train:
        chosen = np.random.default_rng([seed, n_train]).choice(np.flatnonzero(is_trained), n_train, replace=False)
        is_trained[:] = False
        is_trained[chosen] = True
    term_counts = np.zeros(source.n_words, np.int64)
    doc_freqs = np.zeros(source.n_words, np.int64)
    for block, keep in _training_rows(source, is_trained):
        mask = _entry_mask(block, keep)
        words = block.indices[mask]
        term_counts += np.bincount(words, weights=block.data[mask], minlength=source.n_words).astype(np.int64)
        doc_freqs += np.bincount(words, minlength=source.n_words)
    kept_words = np.flatnonzero(term_counts)
    new_id = np.full(source.n_words, -1, np.int64)
    new_id[kept_words] = np.arange(len(kept_words))
    writer = StoreWriter(train_path, index_dtype=index_dtype_for(len(kept_words)),
                         count_dtype=source.group["data"].dtype, docs_per_chunk=source.docs_per_block,
                         overwrite=True)
    with writer:
        for block, keep in _training_rows(source, is_trained):
            mask = _entry_mask(block, keep)
            lengths = np.diff(block.indptr)[keep]
            writer.append(np.concatenate([[0], np.cumsum(lengths)]), new_id[block.indices[mask]],
                          block.data[mask], source.doc_ids(block.start, block.start + block.n_docs)[keep])
        writer.commit(source.vocab[kept_words], term_counts[kept_words], doc_freqs[kept_words],
                      attrs={"settings": source.settings,
                             "split": {"source": str(source.path.resolve()), "heldout": n_heldout, "seed": seed,
                                       **({"train": n_train} if n_train else {})}})
    batch = read_documents(source, held)
    seen = new_id[batch.words] >= 0
    entry_doc = np.repeat(np.arange(batch.n_docs), np.diff(batch.indptr))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(entry_doc[seen], minlength=batch.n_docs))])
    buffer = io.BytesIO()
    np.savez(buffer, doc_numbers=held, indptr=indptr, words=new_id[batch.words[seen]],
             counts=np.asarray(batch.counts)[seen], unseen_tokens=int(np.asarray(batch.counts)[~seen].sum()))
    atomic_write_bytes(heldout_path, buffer.getvalue())
    return train_path, heldout_path


def _training_rows(store, is_trained):
    """(block, mask of its documents that are trained on: chosen for training, not empty)."""
    for block in store.iter_blocks():
        yield block, is_trained[block.start:block.start + block.n_docs] & (np.diff(block.indptr) > 0)


def _entry_mask(block, keep_docs: np.ndarray) -> np.ndarray:
    return np.repeat(keep_docs, np.diff(block.indptr))


def load_heldout(path) -> tuple[Minibatch, int]:
    """(the held-out documents over the training vocabulary, tokens dropped as unseen)."""
    with np.load(path) as f:
        return (Minibatch(f["doc_numbers"], f["indptr"], f["words"].astype(np.int64), f["counts"].astype(np.int64)),
                int(f["unseen_tokens"]))


def peer_corpus(train_store) -> Path:
    """The training store's documents as a plain NumPy file beside it (indptr, words, counts and the
    vocabulary as newline-joined UTF-8), written once: the peers' children read it with numpy alone
    (benchmarks/systems.py)."""
    train_store = Path(train_store)
    path = train_store.with_name(train_store.stem + "-corpus.npz")
    if path.exists():
        return path
    store = open_store(train_store)
    blocks = list(store.iter_blocks())
    offsets = np.cumsum([0] + [len(b.indices) for b in blocks])
    buffer = io.BytesIO()
    np.savez(buffer,
             indptr=np.concatenate([[0]] + [b.indptr[1:] + o for b, o in zip(blocks, offsets)]).astype(np.int64),
             words=np.concatenate([b.indices for b in blocks]).astype(np.int32),
             counts=np.concatenate([b.data for b in blocks]).astype(np.int32),
             vocab=np.frombuffer("\n".join(store.vocab).encode("utf-8"), np.uint8))
    atomic_write_bytes(path, buffer.getvalue())
    return path


def ensure_store(corpus: Path, cache: Path, section_tokens: int = 0) -> Path:
    """The store of `corpus` in `cache`, ingested on first use (cut into sections if asked)."""
    name = f"{corpus.parent.name}-s{section_tokens}" if section_tokens else corpus.parent.name
    store = cache / f"{name}.zarr"
    if not store.exists():
        print(f"ingesting {corpus} into {store} (once)", flush=True)
        cmd = [sys.executable, "-m", "bigtopics.cli", "ingest", str(corpus), "-o", str(store), "--quiet"]
        if section_tokens:
            cmd += ["--section-tokens", str(section_tokens)]
        subprocess.run(cmd, check=True)
    return store


def read_snapshot(path, k: int, n_words: int) -> np.ndarray:
    return np.fromfile(path, np.float32).reshape(k, n_words).astype(np.float64)


# -- the one evaluator -----------------------------------------------------------------------
class DenseTopics:
    """A dense topic-word matrix P (K x V, rows summing to 1) as an evaluation `source`.

    bigtopics.frozen.frozen_point_estimates turns rows() and topic_totals() into
    p(w|k) = (values + eta) / (topic_totals + V eta); with values = P, topic_totals = 1 and
    eta = EVAL_ETA that is (P + 1e-30) / (1 + V 1e-30) = P in float64.
    """

    def __init__(self, p: np.ndarray):
        self.p = p
        self.n_topics, self.n_words = p.shape

    def topic_totals(self) -> np.ndarray:
        return np.ones(self.n_topics)

    def rows(self, words):
        words = np.asarray(words, np.int64)
        indptr = np.arange(len(words) + 1, dtype=np.int64) * self.n_topics
        topics = np.tile(np.arange(self.n_topics, dtype=np.int32), len(words))
        return indptr, topics, self.p[:, words].T.ravel()


def top_words(p: np.ndarray, n: int) -> np.ndarray:
    """Each topic's n most probable word ids, most probable first (ties: lower id first)."""
    order = np.argsort(-p, axis=1, kind="stable")
    return order[:, :n]


def distinct_top_sets(p: np.ndarray, n: int = 10) -> int:
    """How many distinct sets of n top words the topics have (topics collapsing onto a corpus'
    frequent words share one)."""
    return len({tuple(sorted(row)) for row in top_words(p, n).tolist()})


def true_topics(store, train_store) -> np.ndarray | None:
    """The true p(w | k) of a synthetic store (tools/synth_corpus.py writes them to `<store>.truth`)
    over the training store's vocabulary; None for a store without them."""
    truth_dir = truth_path(store)
    if not truth_dir.is_dir():
        return None
    truth = np.load(truth_dir / "beta.npy")
    column = {w: i for i, w in enumerate((truth_dir / "vocab.txt").read_text(encoding="utf-8").split())}
    kept = np.array([column[w] for w in open_store(train_store).vocab], np.int64)
    return truth[:, kept] / truth[:, kept].sum(axis=1, keepdims=True)


def recovery(p: np.ndarray, truth: np.ndarray) -> float:
    """The mean over the true topics of the cosine of the best-matching learned topic."""
    unit = p / np.linalg.norm(p, axis=1, keepdims=True)
    truth_unit = truth / np.linalg.norm(truth, axis=1, keepdims=True)
    return float((truth_unit @ unit.T).max(axis=1).mean())


def evaluate(p: np.ndarray, heldout: Minibatch, train_store, *, alpha: float, particles: int, seed: int,
             top_n: int, n_workers: int) -> dict:
    """Held-out log-likelihood per token (left-to-right, no resampling) and mean UMass coherence."""
    total, tokens = heldout_loglik(DenseTopics(p), heldout, alpha=alpha, eta=EVAL_ETA, seed=seed, particles=particles,
                                   resample=False, n_workers=n_workers)
    coherence, _ = umass_coherence(open_store(train_store), top_words(p, top_n))
    return {"heldout_loglik": total / max(tokens, 1), "heldout_tokens": tokens,
            "coherence": float(coherence.mean())}
