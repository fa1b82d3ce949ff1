"""The systems bench_peers.py compares, and the child process that trains one of them.

    python benchmarks/systems.py SPEC_JSON      (bench_peers.py starts it; not run by hand)

A child imports numpy and its own system's library, nothing else of the harness: a tomotopy,
gensim or scikit-learn child reads the training documents from a plain NumPy file (the peer
corpus, written once by peers.write_peer_corpus) and never loads numba, zarr or bigtopics, so
its memory is what a user of that library would see. (Until 2026-11-23 every child imported the
harness, and with it numba and zarr: about 55 MiB of PSS that the peers were charged for and
their users would not have.) The bigtopics child imports bigtopics, as `bigtopics train` does.

Each system: __init__ converts the corpus (untimed), train_pass() is one timed pass over the
training documents, topic_rows() yields (first topic, rows of p(w | k)) in chunks, and `settings`
records the hyperparameters it really uses.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import itertools
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROWS_PER_CHUNK = 64  # topic rows converted at a time when writing a snapshot
# gensim's chunksize and scikit-learn's batch_size unless --batch-size says otherwise (bigtopics keeps its own)
PEER_BATCH_SIZE = 1024


# -- the peer corpus ------------------------------------------------------------------------------
def read_peer_corpus(path) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(indptr, word ids, counts, vocabulary) of the training documents (peers.write_peer_corpus)."""
    with np.load(path) as f:
        vocab = f["vocab"].tobytes().decode("utf-8").split("\n") if f["vocab"].size else []
        return f["indptr"], f["words"], f["counts"], vocab


def training_csr(corpus_path):
    """The training documents as one scipy.sparse CSR matrix (documents x words, float64 counts)."""
    import scipy.sparse as sp

    indptr, words, counts, vocab = read_peer_corpus(corpus_path)
    return sp.csr_matrix((counts.astype(np.float64), words, indptr), shape=(len(indptr) - 1, len(vocab))), vocab


# -- the systems ----------------------------------------------------------------------------------
def compile_kernels(store_path, settings) -> float:
    """Compile the numba kernels a bigtopics run with these settings uses (the parallel ones are
    compiled in every process) by training 3 minibatches of 8 documents in a scratch run; returns
    the seconds. Learned priors update after the second, so that the kernels are compiled for
    both kinds of alpha (a number, then one per topic: the sampler and the held-out score) and
    for the last sweep's counts the updates read, each a second or more when compiled mid-run."""
    from bigtopics.trainer import train

    start = time.perf_counter()
    warm = dataclasses.replace(settings, batch_size=8, max_docs=24, epochs=1, checkpoint_every="1000000",
                               optimize_burn_in=1)
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

    def __init__(self, store_path, corpus_path, work: Path, k: int, alpha: float, seed: int, batch_size: int,
                 workers: int, options: dict):
        from bigtopics.settings import TrainSettings
        from bigtopics.trainer import Trainer

        s = TrainSettings(**{"n_topics": k, "alpha": alpha, "seed": seed, "batch_size": batch_size,
                             "workers": workers, "epochs": 1_000_000, **options})  # batch_size None: its default
        s.validate()
        self.warmup_s = compile_kernels(store_path, s)
        self.trainer = Trainer(store_path, work / "run", s, quiet=True)
        self.trainer.start(overwrite=True)
        self.epoch = 0
        self.settings = {"alpha": s.alpha, "eta": s.eta, "batch_size": s.batch_size,
                         "workers": self.trainer.executor.n_threads, "local_step": s.local_step, **s.step_options,
                         "kappa": s.kappa, "tau0": s.tau0,
                         "options": options, "warmup_s": self.warmup_s}

    def train_pass(self) -> None:
        for work in self.trainer.minibatches(self.epoch):
            self.trainer.step(work)
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

    def __init__(self, store_path, corpus_path, work, k, alpha, seed, batch_size, workers, options):
        import tomotopy as tp

        indptr, words, counts, vocab = read_peer_corpus(corpus_path)
        vocab = np.asarray(vocab, dtype=object)
        self.word_id = {w: i for i, w in enumerate(vocab)}
        self.model = tp.LDAModel(k=k, alpha=alpha, seed=seed, **({"eta": options["eta"]} if "eta" in options else {}))
        self.model.optim_interval = 0  # its default re-estimates alpha every 10 sweeps; keep alpha fixed
        for a, b in zip(indptr[:-1], indptr[1:]):
            self.model.add_doc(np.repeat(vocab[words[a:b]], counts[a:b]).tolist())
        self.n_words, self.k = len(vocab), k
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

    def __init__(self, store_path, corpus_path, work, k, alpha, seed, batch_size, workers, options):
        import logging

        from gensim.models import LdaMulticore

        logging.getLogger("gensim").setLevel(logging.WARNING)
        csr, vocab = training_csr(corpus_path)
        self.corpus = [list(zip(csr.indices[a:b].tolist(), csr.data[a:b].astype(int).tolist()))
                       for a, b in zip(csr.indptr[:-1], csr.indptr[1:])]
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

    def __init__(self, store_path, corpus_path, work, k, alpha, seed, batch_size, workers, options):
        from sklearn.decomposition import LatentDirichletAllocation

        self.X, _ = training_csr(corpus_path)
        self.model = LatentDirichletAllocation(n_components=k, doc_topic_prior=alpha, learning_method="online",
                                               batch_size=batch_size or PEER_BATCH_SIZE, total_samples=self.X.shape[0],
                                               n_jobs=-1, random_state=seed)
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
SYSTEMS = tuple(SYSTEM_CLASSES)


def library_version(system: str) -> str:
    try:
        return __import__(system).__version__  # each system's name is its module's
    except ImportError:
        return "missing"


# -- the child ----------------------------------------------------------------------------------
def write_snapshot(system, path: Path) -> None:
    """The system's p(w | k) as raw float32 rows (K x V), written chunk by chunk."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        for _, rows in system.topic_rows():
            f.write(np.ascontiguousarray(rows, np.float32).tobytes())
    os.replace(tmp, path)


def write_phase(path: Path, sequence: int, name: str) -> None:
    """Tell the parent which phase the memory it polls belongs to (bench_peers.watch_memory), atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{sequence} {name}")
    os.replace(tmp, path)


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the OS (glibc's malloc_trim; elsewhere nothing), so a
    snapshot's freed rows are not counted in the next training polls. bigtopics.memory has the
    same call; a peer's child must not import bigtopics to reach it."""
    name = ctypes.util.find_library("c")
    try:
        malloc_trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return
    if malloc_trim is not None:
        malloc_trim(0)


def child(spec: dict) -> None:
    """Train one system pass by pass, appending one JSON line per event to spec['log']."""
    work = Path(spec["work"])

    def log(record: dict) -> None:
        with open(spec["log"], "a") as f:
            f.write(json.dumps(record) + "\n")

    phase = Path(spec["phase"])
    marks = itertools.count(1)

    def mark(name: str) -> None:
        write_phase(phase, next(marks), name)

    mark("train")  # preparing (corpus conversion, numba's compilation) counts as training memory

    start = time.perf_counter()
    system = SYSTEM_CLASSES[spec["system"]](spec["store"], spec["corpus"], work, spec["k"], spec["alpha"],
                                            spec["seed"], spec["batch_size"], spec["workers"], spec["options"])
    log({"event": "ready", "prepare_s": time.perf_counter() - start, "settings": system.settings,
         "version": library_version(spec["system"]),
         "harness_modules": sorted(m for m in ("numba", "zarr", "bigtopics") if m in sys.modules)})
    seconds, stopped = 0.0, f"reached --max-passes {spec['max_passes']}"
    for p in range(1, spec["max_passes"] + 1):
        t0 = time.perf_counter()
        system.train_pass()
        pass_s = time.perf_counter() - t0
        seconds += pass_s
        last = p == spec["max_passes"] or seconds + pass_s > spec["max_seconds"]
        snapshot = None
        if spec.get("snapshots", True) and (last or p in spec["snapshot_passes"]):  # bench_shared: speed only
            snapshot = str(work / f"p{p:04d}.f32")
            mark("snapshot")
            write_snapshot(system, Path(snapshot))
            release_free_memory()  # freed is not yet returned: the next polls must not see the rows
            mark("train")
        record = {"event": "pass", "pass": p, "seconds": seconds, "pass_s": pass_s, "snapshot": snapshot}
        log(record)
        if last:
            if p < spec["max_passes"]:
                stopped = (f"stopped after pass {p}: another pass (~{pass_s:.0f} s) would pass "
                           f"--max-train-seconds {spec['max_seconds']:.0f}")
            break
    log({"event": "done", "stopped": stopped,
         "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


if __name__ == "__main__":
    child(json.loads(sys.argv[1]))
