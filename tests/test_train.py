"""The trainer end to end: topic recovery, determinism across workers, bad settings."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr

from bigtopics.model import load_model
from bigtopics.rundir import read_metrics
from bigtopics.settings import TrainSettings
from bigtopics.store import StoreError, StoreWriter, open_store
from bigtopics.synth import CorpusSpec, truth_path, write_corpus
from bigtopics.trainer import Trainer, resume, train

from . import naive

SPEC = CorpusSpec(n_docs=4000, n_topics=8, n_words=400, mean_length=60, alpha=0.1, eta=0.02, seed=1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("train") / "synthetic.zarr"
    write_corpus(SPEC, path, "store")
    return path


def model_arrays(run_dir):
    group = zarr.open_group(run_dir / "model.zarr", mode="r")
    return {name: group[name][:] for name in ("topic_totals", "topic_word/indptr", "topic_word/indices",
                                               "topic_word/data")}


@pytest.mark.slow
def test_recovers_the_true_topics_of_a_synthetic_corpus(corpus, tmp_path):
    """Mean best-match cosine similarity between true and learned p(w|k) must reach 0.9."""
    settings = TrainSettings(n_topics=SPEC.n_topics, epochs=4, batch_size=250, tau0=1, seed=3, scale_docs=0)
    train(corpus, tmp_path / "run", settings, quiet=True)
    model = load_model(tmp_path / "run")
    learned = np.stack([model.word_probabilities(k) for k in range(model.n_topics)])
    np.testing.assert_allclose(learned.sum(1), 1.0)
    # the synthetic vocabulary is in expected-frequency order: the store keeps those ids
    truth = np.load(truth_path(corpus) / "beta.npy")
    similarity = naive.best_match_cosine(learned, truth)
    assert similarity.mean() >= 0.9, similarity
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["final"] and records[-1]["docs_seen"] == 4 * SPEC.n_docs
    assert records[-1]["table_entries"] > 0


@pytest.mark.parametrize("epochs", [1, 2])  # 2: with exclude_own
def test_same_seed_same_model_whatever_the_number_of_workers(corpus, tmp_path, epochs):
    runs = []
    for workers in (1, 2):
        settings = TrainSettings(n_topics=6, batch_size=500, epochs=epochs, max_docs=2500 * epochs, seed=9,
                                 workers=workers)
        train(corpus, tmp_path / f"w{workers}", settings, quiet=True)
        runs.append(model_arrays(tmp_path / f"w{workers}"))
    for name in runs[0]:
        np.testing.assert_array_equal(runs[0][name], runs[1][name])
    other_seed = tmp_path / "seed10"
    train(corpus, other_seed, TrainSettings(n_topics=6, batch_size=500, max_docs=2500, seed=10), quiet=True)
    assert not np.array_equal(model_arrays(other_seed)["topic_word/data"], runs[0]["topic_word/data"])


@pytest.mark.parametrize("change, message", [
    ({"n_topics": 0}, "number of topics must be at least 1"),
    ({"alpha": 0.0}, "alpha must be positive"),
    ({"kappa": 0.4}, "kappa must be in"),
    ({"batch_size": 0}, "batch size"),
    ({"checkpoint_every": "soon"}, "checkpoint interval"),
])
def test_bad_settings_fail_before_any_work(corpus, tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        train(corpus, tmp_path / "run", TrainSettings(**({"n_topics": 5} | change)), quiet=True)
    assert not (tmp_path / "run").exists()


def test_an_empty_store_is_refused(tmp_path):
    with StoreWriter(tmp_path / "empty.zarr") as writer:
        writer.commit(["word"], [0], [0])
    with pytest.raises(ValueError, match="no documents"):
        train(tmp_path / "empty.zarr", tmp_path / "run", TrainSettings(n_topics=5), quiet=True)


def test_a_store_of_another_format_version_is_refused(corpus, tmp_path):
    copy = tmp_path / "old.zarr"
    shutil.copytree(corpus, copy)
    group = zarr.open_group(copy, mode="r+")
    group.attrs["format_version"] = 99
    with pytest.raises(StoreError, match="a store of format version 99; this bigtopics reads version 1"):
        train(copy, tmp_path / "run", TrainSettings(n_topics=5), quiet=True)


def test_a_model_given_for_a_store_and_the_reverse_are_named(corpus, tmp_path):
    train(corpus, tmp_path / "run", TrainSettings(n_topics=4, max_docs=250, batch_size=250), quiet=True)
    with pytest.raises(StoreError, match="model.zarr is a model, not a store"):
        open_store(tmp_path / "run" / "model.zarr")
    with pytest.raises(StoreError, match="is a store, not a training run or a model"):
        load_model(corpus)


def test_a_table_that_cannot_fit_is_refused(corpus, tmp_path, monkeypatch):
    import bigtopics.resources as resources

    monkeypatch.setattr(resources, "available_bytes", lambda: 1000)
    monkeypatch.setattr(resources.shutil, "disk_usage", lambda path: type("U", (), {"free": 1000})())
    with pytest.raises(ValueError, match="may need up to"):
        Trainer(corpus, tmp_path / "run", TrainSettings(n_topics=50), quiet=True).run()


def test_an_existing_run_is_not_overwritten(corpus, tmp_path):
    train(corpus, tmp_path / "run", TrainSettings(n_topics=4, max_docs=500, batch_size=250), quiet=True)
    with pytest.raises(FileExistsError, match="already holds a run"):
        train(corpus, tmp_path / "run", TrainSettings(n_topics=4, max_docs=500), quiet=True)
    train(corpus, tmp_path / "run", TrainSettings(n_topics=4, max_docs=250, batch_size=250), quiet=True,
          overwrite=True)
    assert read_metrics(tmp_path / "run" / "metrics.jsonl")[-1]["docs_seen"] == 250


def test_resuming_a_finished_run_says_so_and_changes_nothing(corpus, tmp_path):
    from click.testing import CliRunner

    from bigtopics.cli import main

    train(corpus, tmp_path / "run", TrainSettings(n_topics=4, max_docs=250, batch_size=250), quiet=True)
    before = (tmp_path / "run" / "metrics.jsonl").read_text()
    result = CliRunner().invoke(main, ["train", "--resume", str(tmp_path / "run")])
    assert result.exit_code == 0 and "already finished (250 documents seen)" in result.output
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == before
    resume(tmp_path / "run", quiet=True)  # the Python API alike: no second final record
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == before
    # a crash between the last checkpoint and the model: the resume writes the model
    shutil.rmtree(tmp_path / "run" / "model.zarr")
    result = CliRunner().invoke(main, ["train", "--resume", str(tmp_path / "run")])
    assert result.exit_code == 0 and load_model(tmp_path / "run").attrs["progress"]["docs_seen"] == 250


def test_overwrite_never_deletes_a_users_folder(corpus, tmp_path):
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "draft.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not bigtopics output"):
        train(corpus, folder, TrainSettings(n_topics=4, max_docs=250), quiet=True, overwrite=True)
    assert (folder / "draft.txt").read_text() == "mine"
    (folder / "settings.json").write_text('{"theme": "dark"}')  # a name other tools use too
    with pytest.raises(FileExistsError, match="not bigtopics output"):
        train(corpus, folder, TrainSettings(n_topics=4, max_docs=250), quiet=True, overwrite=True)
    from bigtopics.rundir import RunLock

    busy = tmp_path / "busy"
    train(corpus, busy, TrainSettings(n_topics=4, max_docs=250, batch_size=250), quiet=True)
    holder = RunLock(busy)
    holder.acquire()  # as a trainer still running would
    with pytest.raises(FileExistsError, match="in use by another"):
        train(corpus, busy, TrainSettings(n_topics=4, max_docs=250), quiet=True, overwrite=True)
    holder.release()
    assert (busy / "settings.json").exists()
    left = tmp_path / "refused"  # a start refused before any work leaves only its lock
    left.mkdir()
    (left / ".lock").touch()
    train(corpus, left, TrainSettings(n_topics=4, max_docs=250, batch_size=250), quiet=True)
    with pytest.raises(ValueError, match="holds the input"):
        train(corpus, Path(corpus).parent, TrainSettings(n_topics=4, max_docs=250), quiet=True, overwrite=True)
    assert open_store(corpus).n_docs == SPEC.n_docs


def test_heldout_documents_are_scored_as_training_goes(corpus, tmp_path):
    settings = TrainSettings(n_topics=SPEC.n_topics, epochs=2, batch_size=250, tau0=1, heldout=300,
                             heldout_every="4", scale_docs=0)
    trainer = Trainer(corpus, tmp_path / "run", settings, quiet=True)
    trainer.run()
    assert trainer.n_training_docs == SPEC.n_docs - 300
    assert trainer.state.docs_seen == 2 * (SPEC.n_docs - 300)
    scores = [r["heldout_loglik"]
              for r in map(json.loads, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())
              if r["heldout_loglik"] is not None]
    assert len(scores) >= 4
    # better than a uniform model over the vocabulary, and better at the end than after one minibatch
    assert -np.log(SPEC.n_words) < scores[0] < scores[-1] < 0
    # `bigtopics evaluate` on the training store scores exactly the documents held out
    from bigtopics.evaluate import evaluate

    result = evaluate(tmp_path / "run", store=corpus, methods=["left-to-right"], particles=5, resample=False,
                      quiet=True)
    assert result["heldout"]["n_docs"] == 300
    assert result["heldout"]["left-to-right"]["loglik_per_token"] == pytest.approx(scores[-1], abs=0.05)
