"""Helpers of benchmarks/bench_peers.py: the shared train/held-out split, one trainer per system
(bigtopics and the peers a user would pick instead), and the one evaluator that scores them all.

The split: a fixed seeded sample of the store's documents (trainer.heldout_documents) is held
out; the other non-empty documents are written, once, to a *training store* whose vocabulary is
the words that occur in them (ids renumbered, order kept). Every system trains on exactly that
store's bags of words, so every topic-word matrix has the same columns; held-out tokens of words
that never occur in training are dropped (for every system alike) because no system can score
them. bigtopics trains on the training store with heldout=0, so its timed training never
includes scoring.

The evaluator sees only a topic-word matrix P (K x V, rows p(w | k)): DenseTopics wraps it as a
`source` for bigtopics.evaluate.heldout_loglik (left-to-right) and its top words feed
bigtopics.evaluate.umass_coherence on the training store.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bigtopics.atomic import atomic_write_bytes
from bigtopics.evaluate import heldout_loglik, umass_coherence
from bigtopics.local_step import Minibatch
from bigtopics.minibatches import read_ahead, read_documents
from bigtopics.store import StoreWriter, index_dtype_for, open_store
from bigtopics.trainer import TrainSettings, Trainer, heldout_documents, train

SYSTEMS = ("bigtopics", "tomotopy", "gensim", "sklearn")
# The evaluator's smoothing: p(w|k) = (P[k, w] + EVAL_ETA) / (1 + V EVAL_ETA), equal to P[k, w]
# in float64 for any P[k, w] above ~1e-14 (and never zero, so log p stays finite).
EVAL_ETA = 1e-30
ROWS_PER_CHUNK = 64  # topic rows converted at a time when writing a snapshot
# gensim's chunksize and scikit-learn's batch_size unless --batch-size says otherwise (bigtopics keeps its own)
PEER_BATCH_SIZE = 1024


# -- the split -------------------------------------------------------------------------------
def prepare_split(source_path, n_heldout: int, seed: int, cache: Path) -> tuple[Path, Path]:
    """(training store, held-out .npz) for the store at source_path, built once into `cache`."""
    source = open_store(source_path)
    if not 0 < n_heldout < source.n_docs:
        raise ValueError(f"cannot hold out {n_heldout} of the {source.n_docs} documents of {source.path}")
    key = json.dumps([str(source.path.resolve()), source.fingerprint(), n_heldout, seed], sort_keys=True)
    stem = f"{source.path.stem}-h{n_heldout}-s{seed}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"
    train_path, heldout_path = cache / f"{stem}-train.zarr", cache / f"{stem}-heldout.npz"
    if train_path.exists() and heldout_path.exists():
        return train_path, heldout_path
    held = heldout_documents(source.n_docs, n_heldout, seed)
    is_held = np.zeros(source.n_docs, bool)
    is_held[held] = True
    term_counts = np.zeros(source.n_words, np.int64)
    doc_freqs = np.zeros(source.n_words, np.int64)
    for block, keep in _training_rows(source, is_held):
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
        for block, keep in _training_rows(source, is_held):
            mask = _entry_mask(block, keep)
            lengths = np.diff(block.indptr)[keep]
            writer.append(np.concatenate([[0], np.cumsum(lengths)]), new_id[block.indices[mask]],
                          block.data[mask], source.doc_ids(block.start, block.start + block.n_docs)[keep])
        writer.commit(source.vocab[kept_words], term_counts[kept_words], doc_freqs[kept_words],
                      attrs={"settings": source.settings,
                             "split": {"source": str(source.path.resolve()), "heldout": n_heldout, "seed": seed}})
    batch = read_documents(source, held)
    seen = new_id[batch.words] >= 0
    entry_doc = np.repeat(np.arange(batch.n_docs), np.diff(batch.indptr))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(entry_doc[seen], minlength=batch.n_docs))])
    buffer = io.BytesIO()
    np.savez(buffer, doc_numbers=held, indptr=indptr, words=new_id[batch.words[seen]],
             counts=np.asarray(batch.counts)[seen], unseen_tokens=int(np.asarray(batch.counts)[~seen].sum()))
    atomic_write_bytes(heldout_path, buffer.getvalue())
    return train_path, heldout_path


def _training_rows(store, is_held):
    """(block, mask of its documents that are trained on: not held out, not empty)."""
    for block in store.iter_blocks():
        yield block, ~is_held[block.start:block.start + block.n_docs] & (np.diff(block.indptr) > 0)


def _entry_mask(block, keep_docs: np.ndarray) -> np.ndarray:
    return np.repeat(keep_docs, np.diff(block.indptr))


def load_heldout(path) -> tuple[Minibatch, int]:
    """(the held-out documents over the training vocabulary, tokens dropped as unseen)."""
    with np.load(path) as f:
        return (Minibatch(f["doc_numbers"], f["indptr"], f["words"].astype(np.int64), f["counts"].astype(np.int64)),
                int(f["unseen_tokens"]))


def training_csr(store_path):
    """The training store as one scipy.sparse CSR matrix (documents x words, float64 counts)."""
    import scipy.sparse as sp

    store = open_store(store_path)
    blocks = list(store.iter_blocks())
    offsets = np.cumsum([0] + [len(b.indices) for b in blocks])
    indptr = np.concatenate([[0]] + [b.indptr[1:] + o for b, o in zip(blocks, offsets)]).astype(np.int64)
    indices = np.concatenate([b.indices for b in blocks]).astype(np.int32)
    data = np.concatenate([b.data for b in blocks]).astype(np.float64)
    return sp.csr_matrix((data, indices, indptr), shape=(store.n_docs, store.n_words))


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


# -- the systems ---------------------------------------------------------------------------------
# Each system: __init__ converts the corpus (untimed), train_pass() is one timed pass over the
# training documents, topic_rows() yields (first topic, rows of p(w | k)) in chunks, and
# `settings` records the hyperparameters it really uses.
def compile_kernels(store_path, settings: TrainSettings) -> float:
    """Compile the numba kernels a run with these settings uses (the parallel ones are compiled
    in every process) by training 8 documents in a scratch run; returns the seconds it took."""
    start = time.perf_counter()
    warm = dataclasses.replace(settings, batch_size=8, max_docs=8, epochs=1, checkpoint_every="1000000")
    with tempfile.TemporaryDirectory() as tmp:
        train(store_path, Path(tmp) / "warmup", warm, overwrite=True, quiet=True)
    return time.perf_counter() - start


class BigtopicsSystem:
    """bigtopics' Python API: one Trainer, a pass = one epoch of its minibatch loop (read-ahead,
    local step, global step), as `bigtopics train --epochs N` runs it, without the checkpoints,
    metrics and model snapshots that a run of a few seconds would otherwise be dominated by.

    The kernels are compiled (numba) before timing by training one minibatch of 8 documents in a
    scratch run; that time is reported apart as `warmup_s`.
    """

    def __init__(self, store_path, work: Path, k: int, alpha: float, seed: int, batch_size: int, workers: int,
                 options: dict):
        s = TrainSettings(**{"n_topics": k, "alpha": alpha, "seed": seed, "batch_size": batch_size,
                             "workers": workers, "epochs": 1_000_000, **options})  # batch_size None: its default
        s.validate()
        self.warmup_s = compile_kernels(store_path, s)
        self.trainer = Trainer(store_path, work / "run", s, quiet=True)
        self.trainer.start(overwrite=True)
        self.epoch = 0
        self.settings = {"alpha": s.alpha, "eta": s.eta, "batch_size": s.batch_size, "workers": s.n_workers,
                         "local_step": s.local_step, "sampler": s.sampler, "beta_estimate": s.beta_estimate,
                         "burnin": s.burnin, "samples": s.samples, "kappa": s.kappa, "tau0": s.tau0,
                         "options": options, "warmup_s": self.warmup_s}

    def train_pass(self) -> None:
        for batch in read_ahead(self.trainer.stream.epoch(self.epoch)):
            self.trainer.step(batch, self.epoch)
        self.epoch += 1

    def topic_rows(self):
        table = self.trainer.table
        indptr, topics, values = table.to_csr()
        words = np.repeat(np.arange(table.n_words), np.diff(indptr))
        eta, totals = self.trainer.settings.eta, table.topic_totals()
        for lo in range(0, table.n_topics, ROWS_PER_CHUNK):
            hi = min(lo + ROWS_PER_CHUNK, table.n_topics)
            p = np.full((hi - lo, table.n_words), eta)
            mine = (topics >= lo) & (topics < hi)
            p[topics[mine] - lo, words[mine]] += values[mine]
            yield lo, p / (table.n_words * eta + totals[lo:hi, None])


class TomotopySystem:
    """tomotopy.LDAModel, collapsed Gibbs; a pass is one sweep, train(1, workers=0)."""

    def __init__(self, store_path, work, k, alpha, seed, batch_size, workers, options):
        import tomotopy as tp

        store = open_store(store_path)
        vocab = np.asarray(store.vocab, dtype=object)
        self.word_id = {w: i for i, w in enumerate(vocab)}
        self.model = tp.LDAModel(k=k, alpha=alpha, seed=seed)
        self.model.optim_interval = 0  # its default re-estimates alpha every 10 sweeps; keep alpha fixed
        for block in store.iter_blocks():
            for d in range(block.n_docs):
                words, counts = block.row(d)
                self.model.add_doc(np.repeat(vocab[words], counts).tolist())
        self.n_words, self.k = store.n_words, k
        self.settings = {"alpha": alpha, "eta": self.model.eta, "workers": "all cores (workers=0)",
                         "pass": "one Gibbs sweep (train(1))", "optim_interval": 0}

    def train_pass(self) -> None:
        self.model.train(1, workers=0)

    def topic_rows(self):
        columns = np.array([self.word_id[w] for w in self.model.used_vocabs], np.int64)
        for lo in range(0, self.k, ROWS_PER_CHUNK):
            hi = min(lo + ROWS_PER_CHUNK, self.k)
            p = np.zeros((hi - lo, self.n_words))
            for k in range(lo, hi):
                p[k - lo, columns] = self.model.get_topic_word_dist(k)
            yield lo, p / p.sum(axis=1, keepdims=True)


class GensimSystem:
    """gensim LdaMulticore, online VB; a pass is one update(corpus) call (a new worker pool each)."""

    def __init__(self, store_path, work, k, alpha, seed, batch_size, workers, options):
        import logging

        from gensim.models import LdaMulticore

        logging.getLogger("gensim").setLevel(logging.WARNING)
        csr = training_csr(store_path)
        self.corpus = [list(zip(csr.indices[a:b].tolist(), csr.data[a:b].astype(int).tolist()))
                       for a, b in zip(csr.indptr[:-1], csr.indptr[1:])]
        vocab = open_store(store_path).vocab
        self.model = LdaMulticore(num_topics=k, id2word=dict(enumerate(vocab)), workers=workers,
                                  chunksize=batch_size or PEER_BATCH_SIZE,
                                  passes=1, alpha=alpha, eval_every=None, random_state=seed)
        m = self.model
        self.settings = {"alpha": alpha, "eta": float(m.eta[0]), "workers": workers, "chunksize": m.chunksize,
                         "decay": m.decay, "offset": m.offset, "iterations": m.iterations,
                         "gamma_threshold": m.gamma_threshold}

    def train_pass(self) -> None:
        self.model.update(self.corpus)

    def topic_rows(self):
        m = self.model
        for lo in range(0, m.num_topics, ROWS_PER_CHUNK):
            lam = m.eta + m.state.sstats[lo:lo + ROWS_PER_CHUNK]  # lambda = eta + sstats (get_lambda)
            yield lo, lam / lam.sum(axis=1, keepdims=True)


class SklearnSystem:
    """scikit-learn LatentDirichletAllocation, online VB; a pass is partial_fit(X) (all minibatches)."""

    def __init__(self, store_path, work, k, alpha, seed, batch_size, workers, options):
        from sklearn.decomposition import LatentDirichletAllocation

        self.X = training_csr(store_path)
        self.model = LatentDirichletAllocation(n_components=k, doc_topic_prior=alpha, learning_method="online",
                                               batch_size=batch_size or PEER_BATCH_SIZE, total_samples=self.X.shape[0], n_jobs=-1,
                                               random_state=seed)
        m = self.model
        self.settings = {"alpha": alpha, "eta": 1.0 / k, "batch_size": m.batch_size, "n_jobs": -1,
                         "learning_offset": m.learning_offset, "learning_decay": m.learning_decay,
                         "max_doc_update_iter": m.max_doc_update_iter, "mean_change_tol": m.mean_change_tol}

    def train_pass(self) -> None:
        self.model.partial_fit(self.X)

    def topic_rows(self):
        c = self.model.components_
        for lo in range(0, c.shape[0], ROWS_PER_CHUNK):
            rows = c[lo:lo + ROWS_PER_CHUNK]
            yield lo, rows / rows.sum(axis=1, keepdims=True)


SYSTEM_CLASSES = {"bigtopics": BigtopicsSystem, "tomotopy": TomotopySystem, "gensim": GensimSystem,
                  "sklearn": SklearnSystem}


def library_version(system: str) -> str:
    try:
        return __import__(system).__version__  # each system's name is its module's
    except ImportError:
        return "missing"


def write_snapshot(system, path: Path) -> None:
    """The system's p(w | k) as raw float32 rows (K x V), written chunk by chunk."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        for _, rows in system.topic_rows():
            f.write(np.ascontiguousarray(rows, np.float32).tobytes())
    os.replace(tmp, path)


def read_snapshot(path, k: int, n_words: int) -> np.ndarray:
    return np.fromfile(path, np.float32).reshape(k, n_words).astype(np.float64)


# -- the one evaluator -----------------------------------------------------------------------
class DenseTopics:
    """A dense topic-word matrix P (K x V, rows summing to 1) as an evaluation `source`.

    bigtopics.infer.frozen_point_estimates turns rows() and topic_totals() into
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


def evaluate(p: np.ndarray, heldout: Minibatch, train_store, *, alpha: float, particles: int, seed: int,
             top_n: int, n_workers: int) -> dict:
    """Held-out log-likelihood per token (left-to-right, no resampling) and mean UMass coherence."""
    total, tokens = heldout_loglik(DenseTopics(p), heldout, alpha=alpha, eta=EVAL_ETA, seed=seed, particles=particles,
                                   resample=False, n_workers=n_workers)
    coherence, _ = umass_coherence(open_store(train_store), top_words(p, top_n))
    return {"heldout_loglik": total / max(tokens, 1), "heldout_tokens": tokens,
            "coherence": float(coherence.mean())}
