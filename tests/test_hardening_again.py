"""Issue 47's trials run again on later code, and issue 46's CLI mistakes: what they still found.

- A run's settings.json that is damaged or crafted (not UTF-8 JSON, nested 100,000 deep, an array,
  a key of another type) is one line naming it in every command that reads it (info, evaluate,
  train --resume, ingest --vocabulary), not a traceback or json's bare "Expecting value".
- ingest --vocabulary of a store whose recorded tokenizer settings are crafted, or whose zarr.json
  is nested too deeply: one line.
- Every option that does not apply is refused with exit status 2, naming what was given: --mh-steps
  without --sampler mh, --warm-start without --exclude-own, export's --doc-topics-threshold,
  --doc-topics-max and --store without --doc-topics, report's --store without --doc-topics.
  MALLET's names bigtopics spells otherwise say what to use (--num-iterations: --epochs).
- A command given the wrong kind of folder names what it is: evaluate STORE, info on an export, a
  model.zarr described by info.
- topic_word.zarr of many small topics is written a chunk at a time (each chunk once; it used to
  be rewritten once per topic: 40 minutes at K = 20,000).
"""

import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict

import numpy as np
import psutil
import pytest
import zarr
from click.testing import CliRunner
from test_hardening_inputs import ODD_WORDS, one_line_error, write_doc_topics, write_run, write_store

from bigtopics.cli import main
from bigtopics.model import load_model
from bigtopics.settings import TrainSettings, recorded_settings


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def small(tmp_path):
    """A store and a run holding a model of its vocabulary (no training)."""
    store = write_store(tmp_path / "store.zarr", [f"d{i}" for i in range(30)], ODD_WORDS)
    return {"store": store, "run": write_run(tmp_path / "run", ODD_WORDS), "root": tmp_path}


# -- a run's settings.json, damaged or crafted ---------------------------------------------------
GOOD_RECORD = {"settings": {"n_topics": 3}, "store": "store.zarr", "store_fingerprint": {}, "n_training_docs": 30}
SETTINGS_CASES = {
    "not JSON": (b"garbage{", "it cannot be read as JSON (JSONDecodeError)"),
    "not UTF-8": (b"\xff\xfe\x00\x01", "it cannot be read as JSON (UnicodeDecodeError)"),
    "nested 100,000 deep": (b"[" * 100_000 + b"]" * 100_000, "it cannot be read as JSON (RecursionError)"),
    "an array": (b"[1, 2]", "it holds a JSON list, not an object"),
    "store a number": (json.dumps({**GOOD_RECORD, "store": 5}).encode(), "its store is '5', not a string"),
    "settings a string": (json.dumps({**GOOD_RECORD, "settings": "x"}).encode(), "its settings is 'x', not an object"),
    "no fingerprint": (json.dumps({k: v for k, v in GOOD_RECORD.items() if k != "store_fingerprint"}).encode(),
                       "its store_fingerprint is 'None', not an object"),
}


@pytest.mark.parametrize("case", list(SETTINGS_CASES))
def test_a_damaged_settings_json_is_one_line_naming_it_in_every_command(small, case):
    content, said = SETTINGS_CASES[case]
    run = small["run"]
    (run / "settings.json").write_bytes(content)
    for args in (["info", run], ["evaluate", run, "-o", small["root"] / "e.json", "--quiet"],
                 ["train", "--resume", run, "--quiet"],
                 ["ingest", small["root"] / "x.txt", "-o", small["root"] / "new.zarr", "--vocabulary", run]):
        (small["root"] / "x.txt").write_text("alpha beta gamma\n")
        line = one_line_error(cli(*args))
        assert line == f"error: {run / 'settings.json'} is damaged: {said}", (args, line)
    assert not (small["root"] / "e.json").exists() and not (small["root"] / "new.zarr").exists()


@pytest.mark.parametrize("change, said", [
    ({"bogus": 1}, "--bogus is not a training option"),
    ({"n_topics": -3}, "--topics"),
])
def test_settings_train_does_not_write_are_that_file_damaged_not_a_mistyped_option(small, change, said):
    """A key train never writes, or a value out of its range, in settings.json: exit 1 naming the
    file, where it said "--bogus is not a training option" (exit 2) as if the user had typed it."""
    run = small["run"]
    record = {**GOOD_RECORD, "settings": {**asdict(TrainSettings(n_topics=3)), **change}}
    (run / "settings.json").write_text(json.dumps(record))
    for args in (["info", run], ["train", "--resume", run, "--quiet"]):
        result = cli(*args)
        line = one_line_error(result)
        assert result.exit_code == 1 and line.startswith(f"error: {run / 'settings.json'} is damaged: "), line
        assert said in line


@pytest.mark.parametrize("tokenizer, said", [
    ([1], "its tokenizer settings are a JSON list, not an object"),
    ({"evil": 1}, "its tokenizer settings hold 'evil', which is not a tokenizer setting"),
    ({"min_length": "three"}, "its tokenizer settings hold min_length = 'three', of the wrong type"),
    ({"token_pattern": "(unclosed"}, "its tokenizer settings hold a token_pattern that is not a regular expression"),
])
def test_ingest_with_the_vocabulary_of_a_store_with_crafted_tokenizer_settings_is_one_line(small, tokenizer, said):
    zarr.open_group(small["store"], mode="r+").attrs["settings"] = {"tokenizer": tokenizer}
    (small["root"] / "x.txt").write_text("alpha beta gamma\n")
    line = one_line_error(cli("ingest", small["root"] / "x.txt", "-o", small["root"] / "new.zarr",
                              "--vocabulary", small["store"]))
    assert said in line and str(small["store"]) in line, line


def test_ingest_with_the_vocabulary_of_a_store_nested_too_deeply_is_one_line(small):
    (small["store"] / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": '
                                              + "[" * 100_000 + "]" * 100_000 + "}")
    (small["root"] / "x.txt").write_text("alpha beta gamma\n")
    line = one_line_error(cli("ingest", small["root"] / "x.txt", "-o", small["root"] / "new.zarr",
                              "--vocabulary", small["store"]))
    assert "is a Zarr group bigtopics did not write, not a store" in line, line


# -- options that do not apply: exit status 2, naming what was given -------------------------------
@pytest.mark.parametrize("args, said", [
    (["train", "{store}", "-o", "{root}/r", "-k", 2, "--sampler", "buckets", "--mh-steps", 4],
     "--mh-steps applies to --sampler mh, not buckets (got --mh-steps 4)"),
    (["train", "{store}", "-o", "{root}/r", "-k", 2, "--mh-steps", 4],
     "--mh-steps applies to --sampler mh, not word-major (got --mh-steps 4)"),
    (["train", "{store}", "-o", "{root}/r", "-k", 2, "--epochs", 1, "--warm-start"],
     "--warm-start continues each document's chain from its previous visit, which only --exclude-own keeps"),
    (["export", "{run}", "-o", "{root}/r", "--doc-topics-threshold", 0.1],
     "--doc-topics-threshold 0.1 applies only with --doc-topics, which was not given"),
    (["export", "{run}", "-o", "{root}/r", "--doc-topics-max", 3, "--store", "{store}"],
     "--doc-topics-max 3, --store {store} apply only with --doc-topics, which was not given"),
    (["report", "{run}", "-o", "{root}/r", "--store", "{store}"],
     "--store {store} applies only with --doc-topics, which was not given"),
])
def test_an_option_that_does_not_apply_is_refused_as_a_usage_error(small, args, said):
    args = [str(a).format(**small) for a in args]
    line = one_line_error(cli(*args), status=2)
    assert said.format(**small) in line, line
    assert not (small["root"] / "r").exists()


def test_mh_steps_given_to_the_mh_sampler_are_taken():
    settings = TrainSettings(n_topics=3, sampler="mh", mh_steps=4)
    settings.validate()
    assert settings.step_options["mh_steps"] == 4 and TrainSettings(n_topics=3, sampler="mh").step.mh_steps == 2


def test_a_run_that_recorded_mh_steps_for_another_sampler_still_reads():
    # runs started before --mh-steps was refused recorded its default for every sampler
    step_options = {"sampler": "word-major", "beta_estimate": "mean", "mh_steps": 2, "init_order": "store",
                     "burnin": 3, "samples": 3, "warm_start": False, "exclude_own": False}
    record = {"settings": {"n_topics": 5, "local_step": "gibbs", "step_options": step_options}}
    settings = recorded_settings(record, "settings.json")
    settings.validate()
    assert settings.step_options["mh_steps"] is None and settings.step_options["sampler"] == "word-major"


def test_mallets_names_that_bigtopics_spells_otherwise_say_what_to_use(small):
    result = cli("train", small["store"], "-o", small["root"] / "r", "-k", 2, "--num-iterations", 100)
    assert result.exit_code == 2
    assert "--num-iterations is MALLET's; its sweeps over the corpus are --epochs here" in result.output
    assert "--num-threads" not in result.output
    result = cli("train", small["store"], "-o", small["root"] / "r", "-k", 2, "--epoch", 1)
    assert result.exit_code == 2 and "Did you mean '--epochs'?" in result.output  # click's help stays


# -- the wrong kind of folder, named --------------------------------------------------------------
def test_evaluate_of_a_store_names_it_a_store(small):
    line = one_line_error(cli("evaluate", small["store"], "--quiet"))
    assert line == f"error: {small['store']} is a store, not a training run or a model"
    assert not (small["store"] / "evaluation.json").exists()


def test_info_describes_a_model_and_names_an_export(small):
    run, export = small["run"], small["root"] / "export"
    result = cli("info", run / "model.zarr")
    assert result.exit_code == 0, result.output
    model = load_model(run)
    assert f"topics      {model.n_topics:,}" in result.output and f"words       {model.n_words:,}" in result.output
    assert f"entries     {model.n_entries:,}" in result.output and "alpha       0.1 each topic" in result.output
    assert cli("export", run, "-o", export).exit_code == 0
    line = one_line_error(cli("info", export))
    assert line == (f"error: {export} is an export (written by bigtopics export); info describes a store, a training "
                    "run or a model")
    for command in ("evaluate", "report", "topics"):
        assert one_line_error(cli(command, export)) == f"error: {export} is an export, not a training run or a model"


# -- topic_word.zarr of many small topics --------------------------------------------------------
def test_topic_word_of_many_small_topics_is_written_a_chunk_at_a_time(tmp_path, monkeypatch):
    from zarr.storage import LocalStore

    n_topics, n_words = 5000, 20_000  # 8 entries a topic
    vocab = [f"w{i}" for i in range(n_words)]
    run = write_run(tmp_path / "run", vocab, n_topics=n_topics)
    writes = Counter()
    original = LocalStore.set

    async def counted(self, key, value, *args, **kwargs):
        writes[(self.root.name, key)] += 1
        return await original(self, key, value, *args, **kwargs)

    monkeypatch.setattr(LocalStore, "set", counted)
    result = cli("export", run, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    chunks = {key: n for key, n in writes.items() if key[0] == "topic_word.zarr" and "/c/" in key[1]}
    assert chunks and set(chunks.values()) == {1}, max(chunks.values())  # every chunk written once
    group = zarr.open_group(tmp_path / "out" / "topic_word.zarr", mode="r")
    model = load_model(run)
    indptr, indices, data = (np.asarray(group[name][:]) for name in ("indptr", "indices", "data"))
    assert indptr[-1] == len(indices) == len(data) == model.n_entries
    totals = model.topic_totals()
    for k in (0, 1, 2499, n_topics - 1):
        words, values = model.topic_entries(k)
        np.testing.assert_array_equal(indices[indptr[k]:indptr[k + 1]], words)
        np.testing.assert_allclose(data[indptr[k]:indptr[k + 1]],
                                   (model.eta + values) / (n_words * model.eta + totals[k]), rtol=1e-6)


# -- a per-document column shorter than the store's documents --------------------------------------
@pytest.mark.parametrize("command", ["export", "site", "report"])
def test_a_store_whose_ids_are_fewer_than_its_documents_is_one_line(small, command):
    zarr.open_group(small["store"], mode="r+")["doc_ids"].resize((3,))
    dt = write_doc_topics(small["root"] / "doc_topics.zarr", small["store"])
    out = small["root"] / ("out.html" if command == "report" else "out")
    line = one_line_error(cli(command, small["run"], "--doc-topics", dt, "-o", out,
                              *(["--quiet"] if command == "site" else [])))
    assert line == f"error: {small['store']} is damaged: doc_ids holds 3 values for 30 documents (ingest it again)"
    assert not out.exists()


# -- a killed export not yet reaped by its parent --------------------------------------------------
def test_the_next_export_removes_what_a_killed_export_left_before_its_parent_reaped_it(small):
    process = subprocess.Popen([sys.executable, "-c", "pass"])  # exits, and is not waited for yet
    try:
        while psutil.Process(process.pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.05)
        out = small["root"] / "out"
        killed = small["root"] / f".out.tmp-{process.pid}-0123abcd"  # what kill -9 mid-export leaves
        (killed / "topic_word.zarr").mkdir(parents=True)
        result = cli("export", small["run"], "-o", out)
        assert result.exit_code == 0, result.output
        assert f"removed {killed.name}, left beside out by an interrupted export" in result.output
        assert not killed.exists() and (out / "topic_keys.tsv").is_file()
    finally:
        process.wait()
