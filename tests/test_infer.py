"""Inference of document-topic proportions: recovery, determinism, resumption, bad input."""

import ctypes
import importlib
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from bigtopics.cli import main
from bigtopics.doc_topics import DocTopics
from bigtopics.infer import InferSettings, infer
from bigtopics.model import load_model
from bigtopics.settings import TrainSettings
from bigtopics.stopping import InterruptsThatStick
from bigtopics.store import StoreError
from bigtopics.synth import CorpusSpec, truth_path, write_corpus
from bigtopics.trainer import train

infer_module = importlib.import_module("bigtopics.infer")  # the package exports a function of that name

SPEC = CorpusSpec(n_docs=6000, n_topics=6, n_words=300, mean_length=50, alpha=0.1, eta=0.02, seed=7)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("infer")
    store = root / "corpus.zarr"
    write_corpus(SPEC, store, "store", entries_per_chunk=4096)  # about 60 blocks
    run = root / "run"
    train(store, run, TrainSettings(n_topics=SPEC.n_topics, epochs=3, batch_size=500, tau0=1, seed=1), quiet=True)
    return store, run


def dense(path) -> np.ndarray:
    group = zarr.open_group(path, mode="r")
    n_docs, n_topics = group.attrs["shape"]
    indptr, indices, data = (group[name][:] for name in ("indptr", "indices", "data"))
    out = np.zeros((n_docs, n_topics))
    out[np.repeat(np.arange(n_docs), np.diff(indptr)), indices] = data
    return out


def arrays(path) -> dict:
    group = zarr.open_group(path, mode="r")
    return {name: group[name][:] for name in ("indptr", "indices", "data", "doc_lengths")}


def test_recovers_the_true_proportions(trained, tmp_path):
    """After matching learned to true topics (best cosine of p(w|k)), the mean L1 distance
    between inferred and true theta over documents must be below 0.25 (a document's two
    dominant topics swapped would cost up to 2)."""
    store, run = trained
    out = tmp_path / "doc_topics.zarr"
    infer(run, store, out, InferSettings(threshold=0.0, seed=3), quiet=True)
    model = load_model(run)
    beta = np.load(truth_path(store) / "beta.npy")
    learned = np.stack([model.word_probabilities(k) for k in range(model.n_topics)])
    cosine = ((beta / np.linalg.norm(beta, axis=1, keepdims=True))
              @ (learned / np.linalg.norm(learned, axis=1, keepdims=True)).T)
    match = cosine.argmax(axis=1)  # true topic -> learned topic
    assert len(set(match.tolist())) == SPEC.n_topics
    theta = np.load(truth_path(store) / "theta.npy")
    inferred = dense(out)[:, match]
    l1 = np.abs(inferred - theta).sum(1)
    assert l1.mean() < 0.25, l1.mean()
    stored = arrays(out)
    assert (np.diff(stored["indptr"]) >= 1).all()
    assert np.all(inferred.sum(1) <= 1 + 1e-5)


def test_rows_are_thresholded_and_canonical_csr(trained, tmp_path):
    """Topic ids int32 and ascending within a row on disk (canonical CSR, as scipy takes it)."""
    store, run = trained
    out = tmp_path / "dt.zarr"
    infer(run, store, out, InferSettings(threshold=0.05, seed=3), quiet=True)
    doc_topics = DocTopics(out)
    assert doc_topics.group["indices"].dtype == np.int32
    on_disk = np.asarray(doc_topics.group["indices"][:])
    for first, indptr, topics, weights, lengths in doc_topics.iter_blocks():
        assert (weights >= 0.05).all()
        for d in range(len(indptr) - 1):
            row = topics[indptr[d]:indptr[d + 1]]
            assert (np.diff(row) > 0).all()
        assert (lengths > 0).all()
    np.testing.assert_array_equal(on_disk, np.concatenate([b[2] for b in doc_topics.iter_blocks()]))


def test_a_version_1_file_is_read_with_its_rows_in_topic_order(trained, tmp_path):
    """doc_topics.zarr of format version 1 (uint16 topic ids by decreasing weight) is still read."""
    store, run = trained
    out = tmp_path / "dt.zarr"
    infer(run, store, out, InferSettings(seed=3), quiet=True)
    canonical = [tuple(np.copy(a) for a in block[1:]) for block in DocTopics(out).iter_blocks()]
    group = zarr.open_group(out, mode="r+")
    indptr, topics, weights = (np.asarray(group[name][:]) for name in ("indptr", "indices", "data"))
    doc_of = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    order = np.lexsort((topics, -weights, doc_of))  # version 1's layout
    group["indices"][:] = topics[order]
    group["data"][:] = weights[order]
    group.attrs["doc_topics_format_version"] = 1
    old = DocTopics(out)
    assert old.weight_ordered
    for (indptr, topics, weights, lengths), block in zip(canonical, old.iter_blocks()):
        for want, got in zip((indptr, topics, weights, lengths), block[1:]):
            np.testing.assert_array_equal(got, want)


def test_same_seed_same_output_whatever_the_workers(trained, tmp_path):
    store, run = trained
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}.zarr"
        infer(run, store, out, InferSettings(seed=4, workers=workers), quiet=True)
        outs.append(arrays(out))
    for name in outs[0]:
        np.testing.assert_array_equal(outs[0][name], outs[1][name])


@pytest.mark.slow
def test_a_killed_infer_resumes_where_it_stopped(trained, tmp_path):
    store, run = trained
    out = tmp_path / "resumed.zarr"
    parts = tmp_path / ".resumed.zarr.parts"
    command = [sys.executable, "-m", "bigtopics.cli", "infer", str(run), str(store), "-o", str(out), "--seed", "5",
               "--part-tokens", "2000", "--quiet"]
    process = subprocess.Popen(command, env={**os.environ, "NUMBA_NUM_THREADS": "2"})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if parts.exists() and len(list(parts.glob("part-*.npz"))) >= 3:
                break
            time.sleep(0.005)
        assert process.poll() is None, "infer finished before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
    assert not out.exists()
    summary = infer(run, store, out, InferSettings(seed=5), quiet=True, part_tokens=2000)
    assert summary["parts_reused"] >= 3 and summary["parts_computed"] > 0
    assert not parts.exists()
    fresh = tmp_path / "fresh.zarr"
    infer(run, store, fresh, InferSettings(seed=5), quiet=True)  # in one part: the same result
    a, b = arrays(out), arrays(fresh)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


@pytest.mark.parametrize("damage", ["truncated", "emptied", "topic out of range", "not a zip"])
def test_a_damaged_part_of_an_interrupted_infer_is_computed_again(trained, tmp_path, monkeypatch, damage):
    store, run = trained
    out, parts = tmp_path / "out.zarr", tmp_path / ".out.zarr.parts"

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(infer_module, "_assemble", interrupted)
        with pytest.raises(KeyboardInterrupt):
            infer(run, store, out, InferSettings(seed=5), quiet=True, part_tokens=2000)
    victim = sorted(parts.glob("part-*.npz"))[1]
    raw = victim.read_bytes()
    if damage == "truncated":
        victim.write_bytes(raw[: len(raw) // 2])
    elif damage == "emptied":
        victim.write_bytes(b"")
    elif damage == "not a zip":
        victim.write_bytes(b"x" * len(raw))
    else:
        with np.load(victim) as part:
            arrays_of_part = dict(part)
        arrays_of_part["indices"][0] = 10_000
        np.savez(victim, **arrays_of_part)
    summary = infer(run, store, out, InferSettings(seed=5), quiet=True, part_tokens=2000)
    assert summary["parts_damaged"] == 1 and summary["parts_computed"] == 1 and summary["parts_reused"] >= 2
    fresh = tmp_path / "fresh.zarr"
    infer(run, store, fresh, InferSettings(seed=5), quiet=True)
    a, b = arrays(out), arrays(fresh)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def _swallowed_interrupt():
    """Ctrl-C landing inside a ctypes callback, as in numba's first compile: ctypes prints the
    KeyboardInterrupt and drops it."""
    callback = ctypes.CFUNCTYPE(None)(lambda: signal.raise_signal(signal.SIGINT))
    callback()


def test_a_ctrl_c_swallowed_by_a_callback_still_stops_at_the_next_check():
    with InterruptsThatStick() as interrupts:
        _swallowed_interrupt()  # without the handler this returns as if nothing happened
        with pytest.raises(KeyboardInterrupt):
            interrupts.check()


def test_infer_stops_after_a_swallowed_ctrl_c_keeping_its_parts(trained, tmp_path, monkeypatch):
    store, run = trained
    out, parts = tmp_path / "out.zarr", tmp_path / ".out.zarr.parts"
    calls = []

    def compiling_then_interrupted(*args, **kwargs):
        if not calls:
            _swallowed_interrupt()
        calls.append(1)
        return real_infer_block(*args, **kwargs)

    real_infer_block = infer_module.infer_block
    with monkeypatch.context() as patch:
        patch.setattr(infer_module, "infer_block", compiling_then_interrupted)
        with pytest.raises(KeyboardInterrupt):
            infer(run, store, out, InferSettings(seed=5), quiet=True, part_tokens=2000)
    assert not out.exists() and len(list(parts.glob("part-*.npz"))) == 1
    summary = infer(run, store, out, InferSettings(seed=5), quiet=True, part_tokens=2000)
    assert summary["parts_reused"] == 1


def test_refuses_a_store_with_another_vocabulary(trained, tmp_path):
    _, run = trained
    other = tmp_path / "other.zarr"
    write_corpus(CorpusSpec(n_docs=30, n_topics=2, n_words=50, mean_length=10), other, "store")
    result = CliRunner().invoke(main, ["infer", str(run), str(other), "-o", str(tmp_path / "x.zarr"), "--quiet"])
    assert result.exit_code == 1
    assert "50 words" in result.output and "vocabulary" in result.output


def test_refuses_to_overwrite_without_the_flag(trained, tmp_path):
    store, run = trained
    out = tmp_path / "dt.zarr"
    out.mkdir()
    result = CliRunner().invoke(main, ["infer", str(run), str(store), "-o", str(out), "--quiet"])
    assert result.exit_code == 1 and "already exists" in result.output


def test_a_version_2_file_whose_rows_are_not_ascending_is_damaged(trained, tmp_path):
    store, run = trained
    out = tmp_path / "dt.zarr"
    infer(run, store, out, InferSettings(seed=3), quiet=True)
    group = zarr.open_group(out, mode="r+")
    indptr, topics = np.asarray(group["indptr"][:]), np.asarray(group["indices"][:])
    d = int(np.flatnonzero(np.diff(indptr) >= 2)[0])  # a document with two topics: swap them
    a = int(indptr[d])
    group["indices"][a:a + 2] = topics[a:a + 2][::-1].copy()
    with pytest.raises(StoreError, match=f"indices holds topic {topics[a]} after {topics[a + 1]} within a row at "
                                         f"position {a + 1:,}: not ascending"):
        list(DocTopics(out).iter_blocks())
