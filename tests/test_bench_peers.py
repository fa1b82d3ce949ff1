import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("gensim")
pytest.importorskip("tomotopy")
pytest.importorskip("scipy")

from bigtopics.frozen import frozen_point_estimates  # noqa: E402
from bigtopics.store import StoreWriter, open_store  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import peers  # noqa: E402
import systems  # noqa: E402

pytestmark = pytest.mark.slow  # benchmark smoke tests: each runs a script end to end


def write_clustered_store(path, n_docs=150, seed=0):
    """Documents drawn from 3 topics with disjoint 12-word vocabularies, plus an empty document
    and a word (id 36) that only document 0 uses."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(n_docs):
        topic = d % 3
        words = rng.integers(12 * topic, 12 * topic + 12, size=30)
        rows.append(np.unique(words, return_counts=True))
    rows[0] = (np.append(rows[0][0], 36), np.append(rows[0][1], 2))
    rows[5] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    indptr = np.concatenate([[0], np.cumsum([len(w) for w, _ in rows])])
    words = np.concatenate([w for w, _ in rows])
    counts = np.concatenate([c for _, c in rows])
    with StoreWriter(path, index_dtype=np.uint16, count_dtype=np.uint8, docs_per_chunk=64) as writer:
        writer.append(indptr, words, counts, [f"doc{d}" for d in range(n_docs)])
        term_counts = np.bincount(words, weights=counts, minlength=37).astype(np.int64)
        writer.commit([f"w{i}" for i in range(37)], term_counts, np.bincount(words, minlength=37))
    return path


def test_dense_topics_freeze_to_exactly_p():
    # The sampler's view is p(w | k) = smoothing[k] + coef[k, w]: it must give back P itself.
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.full(50, 0.3), size=4)
    words = np.array([3, 7, 8, 49])
    frozen = frozen_point_estimates(peers.DenseTopics(p), words, peers.EVAL_ETA)
    assert frozen.words.tolist() == words.tolist()
    rebuilt = np.zeros((4, len(words)))
    for r in range(len(words)):
        lo, hi = frozen.row_indptr[r], frozen.row_indptr[r + 1]
        rebuilt[frozen.row_topics[lo:hi], r] = frozen.row_coef[lo:hi] + frozen.smoothing[frozen.row_topics[lo:hi]]
    np.testing.assert_allclose(rebuilt, p[:, words], rtol=1e-14, atol=0)
    assert np.all(frozen.smoothing < 1e-25)


def test_top_words_most_probable_first_ties_by_id():
    p = np.array([[0.1, 0.4, 0.1, 0.4], [0.7, 0.1, 0.1, 0.1]])
    assert peers.top_words(p, 3).tolist() == [[1, 3, 0], [0, 1, 2]]


def test_split_trains_on_the_complement_over_the_training_vocabulary(tmp_path):
    source = write_clustered_store(tmp_path / "source.zarr")
    train_path, heldout_path = peers.prepare_split(source, 20, seed=3, cache=tmp_path)
    assert peers.prepare_split(source, 20, seed=3, cache=tmp_path) == (train_path, heldout_path)  # cached
    train, (heldout, unseen) = open_store(train_path), peers.load_heldout(heldout_path)
    held_ids = set(heldout.doc_numbers.tolist())
    expected = [f"doc{d}" for d in range(150) if d not in held_ids and d != 5]  # the empty document is dropped
    assert list(train.doc_ids()) == expected
    assert len(held_ids) == 20
    vocab = list(train.vocab)
    assert ("w36" in vocab) == (0 not in held_ids)  # a word only held-out documents use is not trained on
    if 0 in held_ids:
        assert unseen == 2
    csr, corpus_vocab = systems.training_csr(peers.peer_corpus(train_path))  # what the peers train on
    assert csr.shape == (len(expected), len(vocab)) and csr.sum() == train.n_tokens and corpus_vocab == vocab
    first = next(train.iter_blocks())
    words, counts = first.row(0)
    assert csr[0].indices.tolist() == words.tolist() and csr[0].data.tolist() == counts.tolist()
    assert heldout.words.max() < len(vocab)


def test_a_smaller_training_set_keeps_the_held_out_documents(tmp_path):
    source = write_clustered_store(tmp_path / "source.zarr")
    full_train, full_heldout = peers.prepare_split(source, 20, seed=3, cache=tmp_path)
    train_path, heldout_path = peers.prepare_split(source, 20, seed=3, cache=tmp_path, n_train=40)
    assert train_path != full_train
    held = peers.load_heldout(heldout_path)[0].doc_numbers
    assert held.tolist() == peers.load_heldout(full_heldout)[0].doc_numbers.tolist()
    ids = list(open_store(train_path).doc_ids())
    assert 39 <= len(ids) <= 40  # the empty document, if chosen, is dropped
    assert set(ids) < set(open_store(full_train).doc_ids())
    (tmp_path / "again").mkdir()
    again, _ = peers.prepare_split(source, 20, seed=3, cache=tmp_path / "again", n_train=40)
    assert list(open_store(again).doc_ids()) == ids  # the sample is the seed's
    with pytest.raises(ValueError, match="cannot train on 130"):
        peers.prepare_split(source, 20, seed=3, cache=tmp_path, n_train=130)


def test_bench_peers_runs_every_system_on_a_tiny_store(tmp_path):
    source = write_clustered_store(tmp_path / "source.zarr")
    out = tmp_path / "out.json"
    cmd = [sys.executable, str(BENCHMARKS / "bench_peers.py"), "--store", str(source), "--cache", str(tmp_path),
           "-k", "3", "--passes", "1,2", "--max-passes", "2", "--heldout-docs", "20", "--particles", "2",
           "--batch-size", "64", "--alpha", "0.3", "--target", "3:-3.0", "--bigtopics-option", "burnin=1",
           "--json", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    for expected in ("Equal passes", "Time to quality", "fixed -3.000", "command:", "versions:", "tomotopy 0.",
                     "burnin"):
        assert expected in result.stdout
    figures = json.loads(out.read_text())
    runs = {r["system"]: r for r in figures["runs"]}
    assert set(runs) == set(systems.SYSTEMS)
    uniform = -math.log(open_store(next(tmp_path.glob("*-train.zarr"))).n_words)
    for name, run in runs.items():
        assert [r["pass"] for r in run["passes"]] == [1, 2], name
        assert all(r["seconds"] > 0 for r in run["passes"])
        assert run["peak_mem_mib"] > 10
        final = run["passes"][-1]
        # 3 well-separated topics: every system must predict held-out words better than uniform
        assert uniform < final["heldout_loglik"] < 0, name
        assert np.isfinite(final["coherence"])
        # a peer's process is what its users run: no numba, zarr or bigtopics loaded for it
        assert run["harness_modules"] == (["bigtopics", "numba", "zarr"] if name == "bigtopics" else []), name
    assert runs["bigtopics"]["settings"]["burnin"] == 1
    assert runs["bigtopics"]["peak_train_mem_mib"] > 10  # seconds of compiling: polled in the train phase
    assert not list(tmp_path.glob("peers-*"))  # the snapshots are removed
