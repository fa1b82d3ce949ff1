"""Exact resume: interrupted runs, killed at random moments, end with the uninterrupted model."""

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from bigtopics.checkpoints import list_checkpoints
from bigtopics.model import load_model
from bigtopics.settings import TrainSettings
from bigtopics.synth import CorpusSpec, write_corpus
from bigtopics.trainer import Trainer, resume, train

SPEC = CorpusSpec(n_docs=3000, n_topics=6, n_words=300, mean_length=40, alpha=0.1, eta=0.05, seed=2)
# Enough minibatches (4 epochs x 30) that a process is still training when the kill test kills it.
SETTINGS = dict(n_topics=6, batch_size=100, epochs=4, seed=4, checkpoint_every="1", reset_below=0.5)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("resume") / "synthetic.zarr"
    write_corpus(SPEC, path, "store")
    return path


@pytest.fixture(scope="module")
def uninterrupted(corpus, tmp_path_factory):
    run = tmp_path_factory.mktemp("reference") / "run"
    train(corpus, run, TrainSettings(**SETTINGS), quiet=True)
    return model_arrays(run)


def model_arrays(run_dir):
    group = zarr.open_group(run_dir / "model.zarr", mode="r")
    return {name: group[name][:] for name in ("topic_totals", "topic_word/indptr", "topic_word/indices",
                                               "topic_word/data")}


def assert_same_model(run_dir, reference):
    got = model_arrays(run_dir)
    for name, values in reference.items():
        np.testing.assert_array_equal(got[name], values, err_msg=name)


def test_the_reference_run_resets_its_table(corpus, tmp_path):
    """The resume tests only mean something if resets happen between checkpoints."""
    trainer = Trainer(corpus, tmp_path / "run", TrainSettings(**SETTINGS), quiet=True)
    trainer.run()
    assert trainer.table.n_resets >= 3
    assert trainer.state.step == 30 * SETTINGS["epochs"]


def test_stopping_early_and_resuming_gives_the_same_model(corpus, tmp_path, uninterrupted):
    run = tmp_path / "run"
    train(corpus, run, TrainSettings(**(SETTINGS | {"max_docs": 1700})), quiet=True)
    assert list_checkpoints(run)[-1].step == 17
    resume(run, quiet=True, max_docs=10**9)
    assert_same_model(run, uninterrupted)


def test_resuming_from_an_older_checkpoint_after_damage_gives_the_same_model(corpus, tmp_path, uninterrupted):
    run = tmp_path / "run"
    train(corpus, run, TrainSettings(**(SETTINGS | {"max_docs": 2500})), quiet=True)
    newest = list_checkpoints(run)[-1].path
    newest.write_bytes(newest.read_bytes()[:100])  # a torn write
    with pytest.warns(UserWarning, match="falling back"):
        trainer = Trainer.resume(run, quiet=True, max_docs=10**9)
    assert trainer.state.step == 24
    trainer.run()
    assert_same_model(run, uninterrupted)


def test_a_run_resumes_from_its_first_checkpoint_written_before_any_minibatch(corpus, tmp_path, uninterrupted):
    run = tmp_path / "run"
    train(corpus, run, TrainSettings(**(SETTINGS | {"max_docs": 500, "keep_checkpoints": 100})), quiet=True)
    for info in list_checkpoints(run)[1:]:
        info.path.unlink()
    assert [c.step for c in list_checkpoints(run)] == [0]
    with open(run / "metrics.jsonl", "ab") as f:
        f.write(b'{"minibatch": 9, "epo' + b"\0" * 40)  # a line torn by a power cut
    resume(run, quiet=True, max_docs=10**9)
    assert_same_model(run, uninterrupted)


def test_two_trainers_never_share_a_run_directory(corpus, tmp_path):
    from bigtopics.rundir import RunLock

    run = tmp_path / "run"
    train(corpus, run, TrainSettings(**(SETTINGS | {"max_docs": 200})), quiet=True)
    holder = RunLock(run)
    holder.acquire()
    with pytest.raises(FileExistsError, match="in use by another"):
        Trainer.resume(run, quiet=True, max_docs=400)
    holder.release()
    Trainer.resume(run, quiet=True, max_docs=400).run()


@pytest.mark.slow
def test_more_epochs_continue_the_same_run(corpus, tmp_path):
    one = tmp_path / "one"
    # exclude_own and the priors' rate are settled when a run starts (by its epochs): a run meant to
    # grow asks for those of several epochs
    train(corpus, one, TrainSettings(**(SETTINGS | {"epochs": 1, "exclude_own": True, "optimize_passes": 1})),
          quiet=True)
    resume(one, quiet=True, epochs=SETTINGS["epochs"])
    two = tmp_path / "two"
    train(corpus, two, TrainSettings(**SETTINGS), quiet=True)
    assert_same_model(one, model_arrays(two))


def test_a_moved_store_is_given_on_resume(corpus, tmp_path):
    import shutil

    store, run = tmp_path / "library.zarr", tmp_path / "run"
    shutil.copytree(corpus, store)
    train(store, run, TrainSettings(**(SETTINGS | {"max_docs": 200})), quiet=True)
    moved = store.rename(tmp_path / "elsewhere.zarr")
    with pytest.raises(FileNotFoundError, match="if it has moved, give its new place"):
        Trainer.resume(run, quiet=True, max_docs=400)
    resume(run, quiet=True, store=moved, max_docs=400)
    assert load_model(run).attrs["progress"]["docs_seen"] == 400
    resume(run, quiet=True, max_docs=600)  # the run now records where the store is


def test_resume_refuses_model_defining_changes_and_another_store(corpus, tmp_path):
    run = tmp_path / "run"
    train(corpus, run, TrainSettings(**(SETTINGS | {"max_docs": 300})), quiet=True)
    with pytest.raises(ValueError, match="cannot change eta, n_topics"):
        Trainer.resume(run, quiet=True, n_topics=7, eta=0.3)
    other = tmp_path / "other.zarr"
    write_corpus(CorpusSpec(**{**SPEC.__dict__, "seed": 99}), other, "store")
    import json

    settings = json.loads((run / "settings.json").read_text())
    settings["store"] = str(other)
    (run / "settings.json").write_text(json.dumps(settings))
    with pytest.raises(ValueError, match="changed since"):
        Trainer.resume(run, quiet=True)


# -- real processes, real signals ---------------------------------------------------------------

def cli(*args):
    return [sys.executable, "-m", "bigtopics.cli", *args]


def training_args(corpus, run) -> list[str]:
    """`bigtopics train` arguments of SETTINGS."""
    return ["train", str(corpus), "-o", str(run), "--quiet", "-k", "6", "--batch-size", "100",
            "--epochs", str(SETTINGS["epochs"]), "--seed", "4", "--checkpoint-every", "1", "--reset-below", "0.5"]


def start_training(corpus, run, resume_run=False):
    args = cli("train", "--resume", str(run), "--quiet") if resume_run else cli(*training_args(corpus, run))
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate, process, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.002)
    raise TimeoutError("training made no progress")


FAULT_HARNESS = Path(__file__).with_name("fault_harness.py")


@pytest.mark.slow
@pytest.mark.parametrize("event, nth", [("checkpoint-write", 7), ("checkpoint-rename", 12), ("model-aside", 9),
                                        ("reset", 2), ("epoch-end", 2)])
def test_kill_at_each_named_event_then_resume_gives_the_same_model(corpus, tmp_path, uninterrupted, event, nth):
    """kill -9 exactly between two of a run's writes (tests/fault_harness.py), then resume."""
    run = tmp_path / "run"
    args = [sys.executable, str(FAULT_HARNESS), event, str(nth), "--", *training_args(corpus, run)]
    killed = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, (event, killed.returncode, killed.stderr[-2000:])
    resume(run, quiet=True)
    assert_same_model(run, uninterrupted)
    assert not [p.name for p in (run / "checkpoints").iterdir() if p.name.startswith(".")]
    assert not [p.name for p in run.iterdir() if p.name.startswith(".model.zarr")]


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_gives_the_same_model(corpus, tmp_path, uninterrupted):
    """Kill -9 several times: after random delays and in the middle of a checkpoint write."""
    run = tmp_path / "run"
    rng = random.Random(12345)
    folder = run / "checkpoints"
    kills = 0
    for attempt in range(4):
        process = start_training(corpus, run, resume_run=attempt > 0)
        steps_before = list_checkpoints(run)[-1].step if list_checkpoints(run) else 0
        if attempt % 2 == 0:  # while a checkpoint is being written (a temporary file exists)
            seen = wait_for(lambda: folder.exists() and any(p.name.startswith(".") for p in folder.iterdir())
                            and list_checkpoints(run) and list_checkpoints(run)[-1].step > steps_before, process)
        else:  # at a random moment after training has made some progress
            seen = wait_for(lambda: list_checkpoints(run) and list_checkpoints(run)[-1].step > steps_before, process)
            time.sleep(rng.uniform(0.0, 0.3))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.wait()
        assert seen or process.returncode == 0, process.stderr.read()
    assert kills >= 3
    final = start_training(corpus, run, resume_run=True)
    assert final.wait() == 0, final.stderr.read()
    assert_same_model(run, uninterrupted)
    # what the killed checkpoint writes left behind was cleaned up by the resumes
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_ctrl_c_checkpoints_and_tells_how_to_resume(corpus, tmp_path, uninterrupted):
    run = tmp_path / "run"
    process = start_training(corpus, run)
    wait_for(lambda: list_checkpoints(run) and list_checkpoints(run)[-1].step >= 1, process)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert f"bigtopics train --resume {run}" in err
    stopped_at = list_checkpoints(run)[-1].step
    assert 1 <= stopped_at < 60
    # the model so far is readable at once (topics, evaluate, infer), tagged with where it stopped
    assert load_model(run).attrs["progress"]["step"] == stopped_at
    final = start_training(corpus, run, resume_run=True)
    assert final.wait() == 0, final.stderr.read()
    assert_same_model(run, uninterrupted)
