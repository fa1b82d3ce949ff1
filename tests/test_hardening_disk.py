"""A full disk, a checkpoint that cannot be read for a moment, and crafted checkpoints (issue 28).

Every way the disk can fill stops training with one line naming the place and what it needed,
leaves the newest good checkpoint and nothing half-written, and `train --resume` finishes with
the model of a run never interrupted once there is space. The full disk is a real one: a small
tmpfs, mounted when the tests run as root (skipped otherwise), filled by training or by a ballast
file at a chosen moment, and enlarged with `mount -o remount` to resume.
"""

import errno
import gc
import hashlib
import json
import os
import struct
import subprocess
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

import bigtopics.trainer as trainer_module
from bigtopics import checkpoints, resources
from bigtopics.atomic import DiskFullError
from bigtopics.checkpoints import (
    MAGIC,
    CheckpointDamaged,
    list_checkpoints,
    list_damaged,
    read_checkpoint,
    save_checkpoint,
)
from bigtopics.cli import main
from bigtopics.model import load_model
from bigtopics.rundir import read_metrics
from bigtopics.settings import TrainSettings
from bigtopics.store import open_store
from bigtopics.synth import CorpusSpec, write_corpus
from bigtopics.topic_word import TopicWordTable
from bigtopics.trainer import Trainer

SPEC = CorpusSpec(n_docs=1200, n_topics=20, n_words=3000, mean_length=60, alpha=0.1, eta=0.02, seed=5)
# Two epochs, so exclude-own keeps the saved assignments; a checkpoint after every minibatch.
ARGS = ["-k", "40", "--epochs", "2", "--batch-size", "200", "--seed", "3", "--checkpoint-every", "1",
        "--keep-checkpoints", "2", "--scale-docs", "0", "--samples", "4", "--quiet"]
# every document trained, 4 + 4 sweeps: the steps and the table's growth below are counted for them
MODEL_ARRAYS = ("topic_totals", "topic_word/indptr", "topic_word/indices", "topic_word/data", "word_topic/indptr",
                "word_topic/indices", "word_topic/data")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("disk") / "synthetic.zarr"
    write_corpus(SPEC, path, "store")
    return path


@pytest.fixture(scope="module")
def uninterrupted(corpus, tmp_path_factory):
    """The model of the run never interrupted, on a disk with room."""
    run = tmp_path_factory.mktemp("reference") / "run"
    result = CliRunner().invoke(main, ["train", str(corpus), "-o", str(run), *ARGS])
    assert result.exit_code == 0, result.output
    return model_arrays(run)


def model_arrays(run) -> dict:
    group = zarr.open_group(Path(run) / "model.zarr", mode="r")
    return {name: group[name][:] for name in MODEL_ARRAYS}


def assert_same_model(run, reference) -> None:
    got = model_arrays(run)
    for name, values in reference.items():
        assert got[name].dtype == values.dtype
        np.testing.assert_array_equal(got[name], values, err_msg=name)


def train_cli(*args):
    result = CliRunner().invoke(main, ["train", *map(str, args)])
    if result.exit_code == 1:
        # drop the frames of the failed run (its memory-mapped table among them), so that the files
        # it unlinked give their space back before the run resumes in this same process
        result.exc_info = result.exception = None
        gc.collect()
    return result


def error_line(result) -> str:
    """The one `error:` line of a command that failed at run time, status 1 (warnings may precede it)."""
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and result.stderr.rstrip().endswith(errors[0]), result.stderr
    assert "Traceback" not in result.output
    return errors[0]


def leftovers(run) -> list[str]:
    """Hidden temporary files anywhere in a run (the lock aside)."""
    return sorted(str(p.relative_to(run)) for p in Path(run).rglob(".*") if p.name != ".lock")


def newest_checkpoint_is_good(run) -> int:
    newest = list_checkpoints(run)[-1]
    read_checkpoint(newest.path)  # raises if damaged
    return newest.step


# -- a small disk ------------------------------------------------------------------------------
class SmallDisk:
    """A tmpfs mounted at `path`; `fill()` takes all its space, `resize()` remounts it."""

    def __init__(self, path: Path):
        self.path = path

    def resize(self, size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True, capture_output=True)

    def fill(self) -> Path:
        """A ballast file taking every free byte, so the next write that needs a new block fails."""
        ballast = self.path / "ballast"
        chunk = b"\xff" * (64 << 10)
        with open(ballast, "ab", buffering=0) as f:
            for size in (len(chunk), 4096, 512, 1):
                try:
                    while True:
                        f.write(chunk[:size])
                except OSError as e:
                    assert e.errno == errno.ENOSPC
        return ballast

    def free(self) -> int:
        return os.statvfs(self.path).f_bavail * os.statvfs(self.path).f_frsize


def _mount(point: Path, size: str):
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "disk"
    point.mkdir()
    mounted = _mount(point, "8m")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield SmallDisk(point)
    finally:
        if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)


@pytest.fixture
def no_upfront_check(monkeypatch):
    """The up-front estimate would refuse these runs on a disk this small (it is tested on its
    own below): let them start, so that the disk fills while they train."""
    monkeypatch.setattr(trainer_module, "check_resources", lambda *args: None)


def fill_on(monkeypatch, owner, name, disk: SmallDisk, when=lambda *args, **kwargs: True):
    """Fill the disk just before the first call of owner.name for which when(...) holds."""
    original = getattr(owner, name)
    done = []

    def filling(*args, **kwargs):
        if not done and when(*args, **kwargs):
            done.append(disk.fill())
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, filling)
    return done


# -- the disk fills ----------------------------------------------------------------------------
def test_a_disk_filled_by_training_stops_in_one_line_and_resumes_to_the_same_model(
        corpus, small_disk, uninterrupted, no_upfront_check):
    run = small_disk.path / "run"
    small_disk.resize("1m")  # whichever of the table, a checkpoint, the assignments or the model comes first
    line = error_line(train_cli(corpus, "-o", run, *ARGS))
    assert "no space left on" in line.lower() and str(small_disk.path) in line and "needed" in line
    assert f"bigtopics train --resume {run}" in line
    assert not leftovers(run)
    if list_checkpoints(run):
        newest_checkpoint_is_good(run)
    small_disk.resize("64m")
    result = train_cli("--resume", run)
    assert result.exit_code == 0, result.output
    assert_same_model(run, uninterrupted)
    assert not leftovers(run)


@pytest.mark.parametrize("what", ["table", "checkpoint", "snapshot", "assignments"])
def test_a_full_disk_at_each_write_is_one_line_and_the_run_resumes(
        corpus, small_disk, uninterrupted, no_upfront_check, monkeypatch, what):
    run = small_disk.path / "run"
    small_disk.resize("32m")
    after_a_few = lambda *args, **kwargs: len(list_checkpoints(run)) and list_checkpoints(run)[-1].step >= 3  # noqa
    if what == "table":  # the memory-mapped table grows into the full disk: no SIGBUS
        fill_on(monkeypatch, TopicWordTable, "_resize_pool", small_disk,
                lambda table, length: after_a_few() and length > len(table._pool_topics))
        expected = f"no space left on {run / 'table'} for the topic-word table: it needed"
    elif what == "checkpoint":
        fill_on(monkeypatch, trainer_module, "save_checkpoint", small_disk, lambda run_dir, step, *a, **k: step == 5)
        expected = (f"writing checkpoint {run / 'checkpoints' / 'step-000000000005.ckpt'} failed (No space left on "
                    f"{run / 'checkpoints'}: it needed")
    elif what == "snapshot":  # the model written at the end (the first, after minibatch 1, fits)
        fill_on(monkeypatch, trainer_module, "write_model", small_disk, lambda *args, **kwargs: after_a_few())
        expected = f"no space left on {run} for the model model.zarr: it needed up to"
    else:  # before the first checkpoint: the resume starts the run again
        fill_on(monkeypatch, trainer_module, "SavedAssignments", small_disk)
        expected = f"no space left on {run / 'assignments'} for the saved assignments: it needed"
    line = error_line(train_cli(corpus, "-o", run, *ARGS))
    assert expected in line and line.endswith(f"; free space and resume with bigtopics train --resume {run}"), line
    assert not leftovers(run)
    if what == "checkpoint":
        assert [c.step for c in list_checkpoints(run)] == [3, 4]
    if what == "snapshot":  # the first snapshot stands, whole
        assert load_model(run).attrs["progress"]["step"] == 1
    if what == "assignments":
        assert not list_checkpoints(run)
    else:
        assert newest_checkpoint_is_good(run) >= 3
    small_disk.resize("96m")  # the ballast stays; the disk grows
    result = train_cli("--resume", run)
    assert result.exit_code == 0, result.output
    if what == "assignments":
        assert "from the start, as no checkpoint had been written" in result.output
    assert_same_model(run, uninterrupted)
    assert not leftovers(run)


def test_a_metrics_line_cut_by_a_full_disk_is_taken_back(corpus, tmp_path, monkeypatch):
    trainer = Trainer(corpus, tmp_path / "run", TrainSettings(n_topics=5, max_docs=200, batch_size=100), quiet=True)
    trainer.run()
    path = tmp_path / "run" / "metrics.jsonl"
    before = path.read_bytes()
    real_open = open

    class HalfWrites:
        """A file whose writes stop halfway with ENOSPC."""

        def __init__(self, *args, **kwargs):
            self.f = real_open(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            if len(data) > 8:
                return self.f.write(bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(trainer_module, "open", HalfWrites, raising=False)
    with pytest.raises(DiskFullError, match=f"no space left on {tmp_path / 'run'} for the metrics log metrics.jsonl: "
                                            "it needed .* more"):
        trainer._log_metrics(trainer._metrics_record())
    assert path.read_bytes() == before


def test_the_upfront_check_counts_disk_as_disk_and_not_memory(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(resources, "available_bytes", lambda: 1 << 50)  # memory does not hold the table
    monkeypatch.setattr(resources.shutil, "disk_usage", lambda path: type("U", (), {"free": 100_000})())
    result = train_cli(corpus, "-o", tmp_path / "run", *ARGS)
    line = error_line(result)
    assert "of disk (the table " in line and "the saved assignments" in line and "3 checkpoints" in line
    assert "the model twice" in line and f"{tmp_path / 'run'} has only 97.7 KiB free" in line
    disk, memory = resources.resource_estimate(open_store(corpus),
                                               TrainSettings(n_topics=40, epochs=2, keep_checkpoints=2))
    assert set(disk) == {"the table", "the saved assignments", "3 checkpoints", "the model twice"}
    assert memory > 0


def test_a_minibatch_too_big_for_the_memory_is_refused_before_any_work(corpus, tmp_path, monkeypatch):
    store = open_store(corpus)
    tokens, needed = resources.minibatch_memory(store, TrainSettings(n_topics=40, batch_size=store.n_docs))
    assert tokens == store.n_tokens and needed >= 64 * store.n_tokens
    monkeypatch.setattr(resources, "available_bytes", lambda: needed - 1)
    line = error_line(train_cli(corpus, "-o", tmp_path / "big", "-k", "40", "--batch-size", str(store.n_docs)))
    assert f"a minibatch of {store.n_docs:,} documents (about {tokens:,} tokens)" in line
    assert "use a smaller --batch-size" in line and not (tmp_path / "big").exists()
    smaller = train_cli(corpus, "-o", tmp_path / "small", "-k", "40", "--batch-size", str(store.n_docs // 4),
                        "--max-docs", str(store.n_docs // 4))
    assert smaller.exit_code == 0, smaller.output


def test_the_upfront_check_refuses_a_run_too_big_for_a_small_disk(corpus, small_disk):
    line = error_line(train_cli(corpus, "-o", small_disk.path / "run", *ARGS[:-1], "-k", "2000"))
    assert "may need up to" in line and str(small_disk.path / "run") in line


# -- read errors that may pass -----------------------------------------------------------------
@pytest.fixture
def stopped_run(corpus, tmp_path):
    """A run stopped halfway (6 of 12 minibatches), its two newest checkpoints kept."""
    run = tmp_path / "run"
    result = train_cli(corpus, "-o", run, *ARGS, "--max-docs", "1200")
    assert result.exit_code == 0, result.output
    assert [c.step for c in list_checkpoints(run)] == [5, 6]
    return run


@pytest.mark.parametrize("error", [PermissionError(errno.EACCES, "Permission denied"),
                                   OSError(errno.EIO, "Input/output error")])
def test_a_checkpoint_that_cannot_be_read_for_a_moment_is_left_as_it_is(stopped_run, uninterrupted, monkeypatch,
                                                                        error):
    run = stopped_run
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    real_open = os.open
    failures = []

    def open_(path, *args, **kwargs):  # the reader opens a checkpoint with os.open (never a FIFO's blocking open)
        if str(path).endswith(".ckpt") and not failures:
            failures.append(Path(path))
            raise error
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    line = error_line(train_cli("--resume", run, "--max-docs", "100000"))
    assert failures == [run / "checkpoints" / "step-000000000006.ckpt"]
    assert f"{failures[0]} cannot be read ({error.strerror})" in line
    assert "left as they are" in line and f"bigtopics train --resume {run}" in line
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before and not list_damaged(run)
    # once it can be read, the run goes on from the newest checkpoint
    result = train_cli("--resume", run, "--max-docs", "100000")
    assert result.exit_code == 0 and "step-000000000006.ckpt" in result.output, result.output
    assert_same_model(run, uninterrupted)


def test_a_checkpoint_folder_that_cannot_be_listed_is_not_taken_for_an_empty_one(stopped_run, monkeypatch):
    real_listdir = os.listdir

    def listdir(path="."):
        if Path(path).name == "checkpoints":
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", listdir)
    line = error_line(train_cli("--resume", stopped_run))
    assert "cannot be listed (Permission denied)" in line and "left as they are" in line
    monkeypatch.undo()
    assert [c.step for c in list_checkpoints(stopped_run)] == [5, 6]
    assert read_metrics(stopped_run / "metrics.jsonl")[-1]["minibatch"] == 6


# -- a run with no checkpoint, and damage ------------------------------------------------------
def test_a_run_stopped_before_its_first_checkpoint_resumes_from_the_start(corpus, tmp_path, uninterrupted):
    run = tmp_path / "run"
    trainer = Trainer(corpus, run, TrainSettings(n_topics=40, epochs=2, batch_size=200, seed=3, checkpoint_every="1",
                                                 keep_checkpoints=2, scale_docs=0, samples=4), quiet=True)  # as ARGS
    trainer.start()  # settings, table and assignments written: killed here, before the first checkpoint
    trainer.lock.release()
    trainer.executor.close()
    assert (run / "settings.json").exists() and not list_checkpoints(run)
    line = error_line(train_cli(corpus, "-o", run, *ARGS))
    assert "--resume" in line and "--overwrite" in line
    result = train_cli("--resume", run)
    assert result.exit_code == 0, result.output
    assert "from the start, as no checkpoint had been written" in result.output
    assert_same_model(run, uninterrupted)


def test_a_run_whose_checkpoints_are_gone_says_what_to_type(stopped_run):
    for info in list_checkpoints(stopped_run):
        info.path.unlink()
    line = error_line(train_cli("--resume", stopped_run))
    assert "has no checkpoints, yet it had trained 6 minibatches" in line
    assert f"rm -r {stopped_run / 'model.zarr'} {stopped_run / 'metrics.jsonl'} && bigtopics train --resume " \
           f"{stopped_run}" in line


def test_a_lone_damaged_checkpoint_speaks_of_no_previous_one(stopped_run):
    older, newest = list_checkpoints(stopped_run)
    older.path.unlink()
    newest.path.write_bytes(newest.path.read_bytes()[:1000])
    with pytest.warns(UserWarning) as warned:
        result = train_cli("--resume", stopped_run)
    line = error_line(result)
    assert len(warned) == 1 and "there is no earlier checkpoint" in str(warned[0].message)
    said = str(warned[0].message) + result.stderr
    assert "previous" not in said and "falling back" not in said
    assert "none of the 1 checkpoints" in line
    assert f"rm {stopped_run / 'checkpoints'}/*.damaged && bigtopics train --resume {stopped_run}" in line
    assert [p.name for p in list_damaged(stopped_run)] == ["step-000000000006.ckpt.damaged"]


# -- crafted checkpoints -----------------------------------------------------------------------
def write_raw(path: Path, meta: dict, arrays: list[tuple[str, str, list, list[bytes]]]) -> None:
    """A checkpoint file with any manifest and pieces, and a good SHA-256 (as anyone can write)."""
    manifest = json.dumps({"meta": meta, "arrays": [
        {"name": name, "dtype": dtype, "shape": shape, "pieces": [len(b) for b in blobs]}
        for name, dtype, shape, blobs in arrays]}).encode()
    body = MAGIC + struct.pack("<Q", len(manifest)) + manifest + b"".join(b for *_, blobs in arrays for b in blobs)
    path.write_bytes(body + hashlib.sha256(body).digest())


def encoded(array) -> list[bytes]:
    return [checkpoints._CODEC.encode(np.ascontiguousarray(array))]


def with_header(blob: bytes, nbytes: int | None = None, cbytes: int | None = None) -> bytes:
    """A Blosc piece whose header declares other sizes."""
    header = bytearray(blob[:16])
    if nbytes is not None:
        header[4:8] = struct.pack("<I", nbytes)
    if cbytes is not None:
        header[12:16] = struct.pack("<I", cbytes)
    return bytes(header) + blob[16:]


def craft(path: Path, how: str) -> None:
    meta, arrays = read_checkpoint(path)
    entries = [(name, a.dtype.str, list(a.shape), encoded(a)) for name, a in arrays.items()]
    at = {name: i for i, (name, *_) in enumerate(entries)}
    if how == "huge n_words":  # the table would be 15 TB of sparse files
        meta["table_scalars"]["n_words"] = 10**12
    elif how == "huge declared shape":  # 2^30 saved topics (2 GiB), in 32 real pieces of 64 MiB of zeros
        name, dtype, _, _ = entries[at["saved_assignments"]]
        entries[at["saved_assignments"]] = (name, dtype, [1 << 30], encoded(np.zeros(32 << 20, np.uint16)) * 32)
    elif how == "piece larger than declared":  # the header says a few bytes, the piece holds 64 MiB of zeros
        name, dtype, shape, _ = entries[at["topic_sums"]]
        entries[at["topic_sums"]] = (name, dtype, shape, encoded(np.zeros(8 << 20)))
    elif how == "lying piece header":  # a small piece whose header claims 2 GiB
        name, dtype, shape, blobs = entries[at["stored_values"]]
        entries[at["stored_values"]] = (name, dtype, shape, [with_header(blobs[0], nbytes=2 << 30)])
    elif how == "lying piece sizes":  # the manifest's piece sizes do not match the pieces
        name, dtype, shape, blobs = entries[at["topics"]]
        entries[at["topics"]] = (name, dtype, shape, [with_header(blobs[0], cbytes=len(blobs[0]) + 100)])
    elif how == "topic out of range":
        name, dtype, shape, _ = entries[at["topics"]]
        entries[at["topics"]] = (name, dtype, shape, encoded(arrays["topics"] + 1000))
    write_raw(path, meta, entries)


CRAFTED = ["huge n_words", "huge declared shape", "piece larger than declared", "lying piece header",
           "lying piece sizes", "topic out of range"]


@pytest.mark.parametrize("how", CRAFTED)
def test_a_crafted_checkpoint_fails_in_one_line_without_allocating(stopped_run, how):
    older, newest = list_checkpoints(stopped_run)
    older.path.unlink()
    craft(newest.path, how)
    tracemalloc.start()
    try:
        with pytest.warns(UserWarning) as warned:
            result = train_cli("--resume", stopped_run)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    line = error_line(result)
    assert "none of the 1 checkpoints" in line
    assert len(warned) == 1 and str(warned[0].message).startswith(f"{newest.path}: ")
    assert peak < 200 << 20, f"{how}: {peak / 2**20:.0f} MiB allocated"
    table = stopped_run / "table"
    on_disk = sum(p.stat().st_blocks * 512 for p in table.rglob("*")) if table.exists() else 0
    assert on_disk < 50 << 20 and sum(p.stat().st_size for p in table.rglob("*")) < 50 << 20


@pytest.mark.parametrize("how", CRAFTED)
def test_a_crafted_newest_checkpoint_is_set_aside_for_the_one_before(stopped_run, uninterrupted, how):
    craft(list_checkpoints(stopped_run)[-1].path, how)
    with pytest.warns(UserWarning, match="falling back to the previous checkpoint, step-000000000005.ckpt"):
        result = train_cli("--resume", stopped_run, "--max-docs", "100000")
    assert result.exit_code == 0, result.output
    assert_same_model(stopped_run, uninterrupted)


def test_the_reader_checks_pieces_before_decompressing(tmp_path):
    good = save_checkpoint(tmp_path, 1, {"step": 1}, {"values": np.arange(1000.0)})
    meta, arrays = read_checkpoint(good, limits={"values": 1000})
    np.testing.assert_array_equal(arrays["values"], np.arange(1000.0))
    with pytest.raises(CheckpointDamaged, match="declares 1,000 elements, at most 999"):
        read_checkpoint(good, limits={"values": 999})
    with pytest.raises(CheckpointDamaged, match="unexpected array values"):
        read_checkpoint(good, limits={"other": 10})
    bomb = tmp_path / "bomb.ckpt"
    write_raw(bomb, {}, [("values", "<f8", [1000], encoded(np.zeros(8 << 20)))])
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointDamaged, match="decompress to 67,108,864 bytes for an array of 8,000"):
            read_checkpoint(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 << 20
