"""Stores that change, vanish or were crafted (issue 47): every read of store data is checked
against what the store declares, on every read and not only at open (bigtopics/checked.py).

- chunks that vanish while a command runs: an error naming the store, never documents read as
  empty (zarr v3 reads a missing chunk as its fill value); train stops with one line, leaves its
  checkpoints, and resumes to the model of a run never interrupted once the store is back;
- crafted values (word ids beyond V, offsets out of order or beyond the entries, counts of 0 or
  of 2^32 - 1, topic ids beyond K in document topics): one line naming the store, the array and
  the first bad position, never a segfault (the commands that would crash run in a subprocess, so
  a crash shows as rc -11 rather than killing pytest) nor a number read from outside the data;
- crafted attributes, arrays of the wrong dtype, a group in an array's place and deeply nested
  zarr.json: one line, exit status 1 (docs/commands.md).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from s3server import s3_fixture, s3_server_fixture  # noqa: F401 (the fixtures `s3` and `s3_server`)
from test_hardening_inputs import N_TOPICS, write_doc_topics, write_run

import bigtopics.trainer as trainer_module
from bigtopics.cli import main
from bigtopics.store import Store, StoreError, StoreWriter, open_store
from bigtopics.synth import CorpusSpec, write_corpus

SPEC = CorpusSpec(n_docs=300, n_topics=5, n_words=300, mean_length=40, alpha=0.1, eta=0.05, seed=5)
TRAIN = ["-k", "3", "--epochs", "1", "--seed", "1", "--quiet", "--scale-docs", "0"]
MODEL_ARRAYS = ("topic_totals", "topic_word/indptr", "topic_word/indices", "topic_word/data")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A store of V = 300 words in several chunks, a run holding a model over its vocabulary (no
    training: test_hardening_inputs.write_run) and document topics of it."""
    root = tmp_path_factory.mktemp("store47")
    store = root / "s.zarr"
    write_corpus(SPEC, store, "store", entries_per_chunk=2048)
    assert len(list((store / "indices" / "c").iterdir())) > 1
    run = write_run(root / "run", open_store(store).vocab.tolist())
    return {"root": root, "store": store, "run": run, "dt": write_doc_topics(root / "dt.zarr", store)}


def cli(*args) -> subprocess.CompletedProcess:
    """The real CLI in its own process: a segfault is rc -11 here, not the end of pytest."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "bigtopics.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)


def one_line(rc: int, stderr: str, stdout: str = "") -> str:
    """The one `error:` line of a command that failed at run time (status 1), nothing else on stderr."""
    assert rc == 1, (rc, stderr[-3000:])
    text = stderr.strip()
    assert text.count("\n") == 0 and text.startswith("error: "), text[-3000:]
    assert "Traceback" not in stderr + stdout
    return text


def in_process(*args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return one_line(result.exit_code, result.stderr, result.stdout)


def crafted(made, tmp_path, change) -> Path:
    store = shutil.copytree(made["store"], tmp_path / "crafted.zarr")
    change(store)
    return store


def set_values(name, position, value):
    def change(store):
        array = zarr.open_array(store / name, mode="r+")
        array[position] = value(array) if callable(value) else value
    return change


def retype(name, dtype, position=None, value=None):
    """Write the array `name` again with another dtype (and one value changed)."""
    def change(store):
        group = zarr.open_group(store, mode="r+")
        old = group[name]
        values = old[:].astype(dtype)
        if position is not None:
            values[position] = value
        chunks = old.chunks
        del group[name]
        group.create_array(name, shape=values.shape, chunks=chunks, dtype=dtype,
                           config={"write_empty_chunks": True})[:] = values
    return change


def set_attribute(name, value, path="zarr.json"):
    def change(store):
        meta = json.loads((store / path).read_text())
        meta["attributes"][name] = value
        (store / path).write_text(json.dumps(meta))
    return change


def nest_deeply(path):
    """A zarr.json holding a list nested 100,000 deep (json's parser runs out of stack)."""
    def change(store):
        text = (store / path).read_text()
        (store / path).write_text(text.replace("{", '{"x": ' + "[" * 100_000 + "]" * 100_000 + ", ", 1))
    return change


def group_in_place_of(name):
    """The array `name` moved one level down, a group in its place."""
    def change(store):
        shutil.move(store / name, store / "moved")
        (store / name).mkdir()
        shutil.move(store / "moved", store / name / name)
        (store / name / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
    return change


# -- ITEM 4: values read from the store, checked before any kernel -----------------------------
VALUE_CASES = {
    "word id 65535": (set_values("indices", 0, 65535), "indices holds id 65535 at position 0, beyond the 300"),
    "word id 2000": (set_values("indices", 0, 2000), "indices holds id 2000 at position 0, beyond the 300"),
    "indptr[3] = -100": (set_values("indptr", 3, -100), "indptr is not an ascending offset array"),
    "indptr[-1] + 100000": (set_values("indptr", -1, lambda a: a[-1] + 100_000), "position 300 holds"),
    "a count of 0": (set_values("data", 5, 0), "data holds 0 at position 5; counts are at least 1"),
    "a count of 2^32 - 1": (retype("data", np.uint32, 0, 2**32 - 1), "more than the store's n_tokens"),
}


# the cases that crashed the process (SIGSEGV) in issue 47, each in its own process
CRASHED = {("word id 65535", "evaluate"), ("indptr[3] = -100", "infer"), ("indptr[-1] + 100000", "evaluate")}


@pytest.mark.parametrize("case", VALUE_CASES)
def test_crafted_values_are_one_line_in_evaluate_and_infer(made, tmp_path, case):
    change, said = VALUE_CASES[case]
    store = crafted(made, tmp_path, change)
    for args in (["evaluate", made["run"], "--store", store, "-o", tmp_path / "evaluation.json"],
                 ["infer", made["run"], store, "-o", tmp_path / "dt.zarr", "--quiet"]):
        if (case, args[0]) in CRASHED:
            done = cli(*args)
            text = one_line(done.returncode, done.stderr, done.stdout)
        else:
            text = in_process(*args)
        assert f"{store} is damaged: " in text and said in text, (args[0], text)
    assert not (tmp_path / "evaluation.json").exists() and not (tmp_path / "dt.zarr").exists()


@pytest.mark.parametrize("case", VALUE_CASES)
def test_crafted_values_are_one_line_in_train(made, tmp_path, case):
    change, said = VALUE_CASES[case]
    store = crafted(made, tmp_path, change)
    text = in_process("train", store, "-o", tmp_path / "run", *TRAIN)
    assert f"{store} is damaged: " in text and said in text, text


@pytest.mark.parametrize("change, said", [
    (set_values("indices", 4, N_TOPICS), f"indices holds id {N_TOPICS} at position 4, beyond the {N_TOPICS} there"),
    (set_values("indptr", 2, -7), "indptr is not an ascending offset array"),
    (set_values("data", 1, np.nan), "data holds nan at position 1, not a weight"),
])
def test_crafted_document_topics_are_one_line_in_export_evaluate_report_and_site(made, tmp_path, change, said):
    dt = shutil.copytree(made["dt"], tmp_path / "dt.zarr")
    change(dt)
    for args in (["export", made["run"], "--doc-topics", dt, "-o", tmp_path / "export"],
                 ["evaluate", made["run"], "--doc-topics", dt, "-o", tmp_path / "evaluation.json"],
                 ["report", made["run"], "--doc-topics", dt, "-o", tmp_path / "report.html"],
                 ["site", made["run"], "--doc-topics", dt, "-o", tmp_path / "site"]):
        text = in_process(*args)
        assert f"{dt} is damaged: " in text and said in text, (args[0], text)


# -- ITEM 8: crafted attributes, dtypes and metadata: one line, exit status 1 -------------------
STRUCTURE_CASES = {
    "n_docs text": (set_attribute("n_docs", "abc"), "its attribute n_docs is 'abc', not a whole number"),
    "n_docs object": (set_attribute("n_docs", {"a": 1}), "its attribute n_docs is \"{'a': 1}\""),
    "n_tokens list": (set_attribute("n_tokens", [1]), "its attribute n_tokens is '[1]'"),
    "n_tokens below nnz": (set_attribute("n_tokens", 3), "n_tokens 3 cannot be the sum of"),
    "settings text": (set_attribute("settings", "x"), "its attribute settings is str"),
    "float indices": (retype("indices", np.float64, 0, 0.5), "indices holds float64 values, not whole numbers"),
    "float indptr": (retype("indptr", np.float64), "indptr holds float64 values"),
    "a group for indices": (group_in_place_of("indices"), "indices is a group, not a 1-D array"),
    "nested store zarr.json": (nest_deeply("zarr.json"), "is a Zarr group bigtopics did not write, not a store"),
    "nested indices zarr.json": (nest_deeply("indices/zarr.json"), "indices/zarr.json cannot be read"),
}


@pytest.mark.parametrize("case", STRUCTURE_CASES)
def test_crafted_structure_is_one_line_in_every_command(made, tmp_path, case):
    change, said = STRUCTURE_CASES[case]
    store = crafted(made, tmp_path, change)
    for args in (["info", store], ["evaluate", made["run"], "--store", store, "-o", tmp_path / "e.json"],
                 ["infer", made["run"], store, "-o", tmp_path / "dt.zarr", "--quiet"],
                 ["export", made["run"], "--doc-topics", made["dt"], "--store", store, "-o", tmp_path / "export"],
                 ["train", store, "-o", tmp_path / "run", *TRAIN]):
        text = in_process(*args)
        assert str(store) in text and said in text, (args[0], text)


def test_a_store_holding_more_tokens_than_the_memory_is_refused_before_allocating(made, tmp_path):
    """data = 2^32 - 1 and n_tokens agreeing with it: the block's tokens are checked against the
    memory available before anything is sized from them."""
    store = crafted(made, tmp_path, retype("data", np.uint32, 0, 2**32 - 1))
    set_attribute("n_tokens", open_store(made["store"]).n_tokens + 2**32 - 2)(store)
    done = cli("infer", made["run"], store, "-o", tmp_path / "dt.zarr", "--quiet")
    text = one_line(done.returncode, done.stderr, done.stdout)
    assert "documents 0-" in text and "4,294,9" in text and "of memory to sample" in text


# -- ITEM 2: chunks that vanish while in use -------------------------------------------------
def test_iter_blocks_raises_when_chunks_vanish_after_opening(made, tmp_path):
    path = shutil.copytree(made["store"], tmp_path / "s.zarr")
    store = open_store(path)
    assert sum(int(b.data.sum()) for b in store.iter_blocks()) == store.n_tokens
    for name in ("indices", "data"):
        shutil.rmtree(path / name / "c")
    with pytest.raises(StoreError, match=r"is damaged: chunk indices/c/0 is missing"):
        sum(int(b.data.sum()) for b in store.iter_blocks())
    with pytest.raises(StoreError, match=r"is damaged: chunk"):
        store.read_docs(0, 10)
    shutil.rmtree(path)
    with pytest.raises(StoreError, match=r"s\.zarr is gone: it was moved or deleted while in use"):
        store.read_docs(0, 10)
    with pytest.raises(StoreError, match=r"is gone"):
        store.doc_ids(0, 10)


def model_arrays(run) -> dict:
    group = zarr.open_group(Path(run) / "model.zarr", mode="r")
    return {name: group[name][:] for name in MODEL_ARRAYS} | {"alpha": np.asarray(group.attrs["alpha"])}


def test_chunks_vanishing_mid_train_stop_it_and_resume_gives_the_uninterrupted_model(tmp_path, monkeypatch):
    """Chunks removed after the first checkpoint of a run: one line, status 1, the checkpoints
    stand; with the chunks back, --resume ends with the model of a run never interrupted."""
    store = tmp_path / "s.zarr"
    write_corpus(CorpusSpec(n_docs=600, n_topics=5, n_words=300, mean_length=30, alpha=0.1, eta=0.05, seed=6),
                 store, "store", entries_per_chunk=256)
    args = ["-k", "3", "--epochs", "1", "--batch-size", "100", "--seed", "2", "--checkpoint-every", "1",
            "--scale-docs", "40", "--quiet"]
    reference = tmp_path / "reference"
    assert CliRunner().invoke(main, ["train", str(store), "-o", str(reference), *args]).exit_code == 0

    aside = tmp_path / "aside"
    real = trainer_module.Trainer.write_checkpoint
    calls = []

    def write_checkpoint(self):
        path = real(self)
        calls.append(path)
        if len(calls) == 2:  # the first after a minibatch: the chunks go
            aside.mkdir()
            for name in ("indptr", "indices", "data"):
                shutil.move(store / name / "c", aside / name)
        return path

    monkeypatch.setattr(trainer_module.Trainer, "write_checkpoint", write_checkpoint)
    run = tmp_path / "run"
    text = in_process("train", store, "-o", run, *args)
    assert f"{store} is damaged: chunk " in text and f"bigtopics train --resume {run}" in text, text
    metrics = (run / "metrics.jsonl").read_text().splitlines() if (run / "metrics.jsonl").exists() else []
    assert not any(json.loads(line).get("final") for line in metrics), "the run did not end on documents read as empty"
    monkeypatch.undo()

    for name in ("indptr", "indices", "data"):
        shutil.move(aside / name, store / name / "c")
    result = CliRunner().invoke(main, ["train", "--resume", str(run), "--quiet"])
    assert result.exit_code == 0, result.output
    got, want = model_arrays(run), model_arrays(reference)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_a_store_moved_away_mid_read_is_one_line_in_infer(made, tmp_path, monkeypatch):
    """The whole store gone between two parts of `infer`: one line, nothing written."""
    store = shutil.copytree(made["store"], tmp_path / "s.zarr")
    real = Store.read_docs
    calls = []

    def read_docs(self, start, stop):
        block = real(self, start, stop)
        calls.append(start)
        if len(calls) == 1:
            shutil.move(store, tmp_path / "moved.zarr")
        return block

    monkeypatch.setattr(Store, "read_docs", read_docs)
    text = in_process("infer", made["run"], store, "-o", tmp_path / "dt.zarr", "--part-tokens", "1000", "--quiet")
    assert f"{store} is gone: it was moved or deleted while in use" in text, text
    assert len(calls) >= 1 and not (tmp_path / "dt.zarr").exists()


# -- object storage: the same checks through a real S3 endpoint (moto) -------------------------

def test_objects_and_bucket_vanishing_from_s3_after_opening_raise(made, s3):
    url = s3.url("books.zarr")
    source = open_store(made["store"])
    with StoreWriter(url, entries_per_chunk=2048, docs_per_chunk=source.docs_per_block) as writer:
        for block in source.iter_blocks():
            writer.append(block.indptr, block.indices, block.data,
                          source.doc_ids(block.start, block.start + block.n_docs))
        writer.commit(source.vocab, source.term_counts, source.doc_freqs)
    store = open_store(url)
    assert sum(int(b.data.sum()) for b in store.iter_blocks()) == store.n_tokens
    client = s3.client()
    for key in s3.keys("books.zarr/indices/c/") + s3.keys("books.zarr/data/c/"):
        client.delete_object(Bucket=s3.bucket, Key=key)
    with pytest.raises(StoreError, match=r"books\.zarr is damaged: chunk indices/c/0 is missing"):
        sum(int(b.data.sum()) for b in store.iter_blocks())
    for key in s3.keys():
        client.delete_object(Bucket=s3.bucket, Key=key)
    client.delete_bucket(Bucket=s3.bucket)
    with pytest.raises(StoreError, match=r"books\.zarr is gone"):
        store.read_docs(0, 10)
