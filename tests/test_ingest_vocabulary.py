"""`ingest --vocabulary`: new text ingested with the vocabulary (word ids) of a store, run or model."""

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from test_ingest import store_docs

from bigtopics import StoreError, open_store
from bigtopics.cli import main
from bigtopics.doc_topics import DocTopics
from bigtopics.infer import infer
from bigtopics.ingest import Pruning, ingest, read_vocabulary
from bigtopics.settings import TrainSettings
from bigtopics.synth import CorpusSpec, write_corpus
from bigtopics.tokenizer import TokenizerSettings
from bigtopics.trainer import train

SPEC = CorpusSpec(n_docs=1300, n_topics=4, n_words=400, mean_length=30, seed=3)
TOKENIZER = TokenizerSettings(min_length=4, stoplist="none")  # not the defaults: must be inherited
NO_PRUNING = Pruning(min_df=1, max_df=1.0, max_vocab=None)
# Words the training text never has: one document is only these (dropped once they are), one mixes them in.
OOV_ONLY = {"id": "oov-only", "text": "zzzunseen qqqnever zzzunseen"}
OOV_MIXED = "qqqnever"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(root, old store trained into run/, new text): 1000 documents to train on, 300 new ones."""
    root = tmp_path_factory.mktemp("vocabulary")
    write_corpus(SPEC, root / "all.jsonl", "jsonl")
    lines = (root / "all.jsonl").read_text().splitlines(keepends=True)
    (root / "old.jsonl").write_text("".join(lines[:1000]))
    new = [json.loads(line) for line in lines[1000:]]
    new[0]["text"] += f" {OOV_MIXED}"
    (root / "new.jsonl").write_text("".join(json.dumps(d) + "\n" for d in new + [OOV_ONLY]))
    # max_vocab below the words used: many words of the new text are outside the old vocabulary
    ingest(root / "old.jsonl", root / "old.zarr", tokenizer=TOKENIZER, pruning=Pruning(min_df=2, max_vocab=300),
           workers=1, quiet=True)
    train(root / "old.zarr", root / "run", TrainSettings(n_topics=4, batch_size=200, max_docs=1000), quiet=True)
    return root


@pytest.mark.slow
def test_new_store_has_the_old_ids_and_drops_other_words(corpus, tmp_path):
    old = open_store(corpus / "old.zarr")
    report = ingest(corpus / "new.jsonl", tmp_path / "new.zarr", vocabulary=corpus / "old.zarr", workers=1,
                    quiet=True)
    new = open_store(tmp_path / "new.zarr")
    assert list(new.vocab) == list(old.vocab)
    assert new.settings["tokenizer"] == TOKENIZER.to_dict()
    assert new.settings["vocabulary_from"] == str((corpus / "old.zarr").resolve()) and new.settings["pruning"] is None

    # Reference: the same text ingested with nothing pruned, restricted to the old vocabulary.
    ingest(corpus / "new.jsonl", tmp_path / "full.zarr", tokenizer=TOKENIZER, pruning=NO_PRUNING, workers=1,
           quiet=True)
    full = open_store(tmp_path / "full.zarr")
    known = set(old.vocab)
    outside = {w: c for w, c in zip(full.vocab, full.term_counts) if w not in known}
    assert OOV_MIXED in outside and len(outside) > 2
    assert report.pruned["out_of_vocabulary"] == (len(outside), sum(int(c) for c in outside.values()))
    expected = {doc: {w: c for w, c in row.items() if w in known} for doc, row in store_docs(full.path).items()}
    assert store_docs(new.path) == {doc: row for doc, row in expected.items() if row}
    assert report.stats["empty_docs_dropped"] == 1 and "oov-only" not in set(new.doc_ids())
    assert f"{len(outside):,} words" in report.summary() and "out of it dropped" in report.summary()

    # term_counts and doc_freqs are the new text's own, zero for words it never uses
    rows = list(store_docs(new.path).values())
    index = {w: i for i, w in enumerate(new.vocab)}
    counts, dfs = np.zeros(new.n_words, np.int64), np.zeros(new.n_words, np.int64)
    for row in rows:
        for w, c in row.items():
            counts[index[w]] += c
            dfs[index[w]] += 1
    assert np.array_equal(new.term_counts, counts) and np.array_equal(new.doc_freqs, dfs)
    assert (counts == 0).any()


def test_store_run_and_model_give_the_same_vocabulary(corpus, tmp_path):
    sources = [corpus / "old.zarr", corpus / "run", corpus / "run" / "model.zarr"]
    vocabularies = [read_vocabulary(s) for s in sources]
    for v in vocabularies:
        assert v.words == list(open_store(corpus / "old.zarr").vocab) and v.tokenizer == TOKENIZER
    # a run whose store is gone is read through its model
    moved = tmp_path / "run"
    shutil.copytree(corpus / "run", moved)
    settings = json.loads((moved / "settings.json").read_text())
    (moved / "settings.json").write_text(json.dumps(settings | {"store": str(tmp_path / "gone.zarr")}))
    assert read_vocabulary(moved) == read_vocabulary(moved / "model.zarr")
    shutil.rmtree(moved / "model.zarr")
    with pytest.raises(StoreError, match="gone.zarr is gone and the run has no model"):
        read_vocabulary(moved)


def test_cli_round_trip_infers_new_text_with_the_old_model(corpus, tmp_path):
    new = tmp_path / "new.zarr"
    result = CliRunner().invoke(main, ["ingest", str(corpus / "new.jsonl"), "-o", str(new),
                                       "--vocabulary", str(corpus / "run"), "--min-length", "3", "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "out of it dropped" in result.output
    # an explicit tokenizer option overrides the recorded one, the others are inherited
    assert open_store(new).settings["tokenizer"] == TOKENIZER.to_dict() | {"min_length": 3}
    result = CliRunner().invoke(main, ["infer", str(corpus / "run"), str(new), "-o", str(tmp_path / "dt.zarr"),
                                       "--quiet"])
    assert result.exit_code == 0, result.output
    doc_topics = DocTopics(tmp_path / "dt.zarr")
    assert (doc_topics.n_docs, doc_topics.n_topics) == (open_store(new).n_docs, 4)
    # the Python API gives the same
    infer(corpus / "run", new, tmp_path / "dt2.zarr", quiet=True)
    assert DocTopics(tmp_path / "dt2.zarr").n_docs == doc_topics.n_docs


def test_pruning_options_are_refused(corpus, tmp_path):
    for option in (["--min-df", "2"], ["--max-vocab", "10"]):
        result = CliRunner().invoke(main, ["ingest", str(corpus / "new.jsonl"), "-o", str(tmp_path / "x.zarr"),
                                           "--vocabulary", str(corpus / "old.zarr"), *option])
        assert result.exit_code == 2 and f"{option[0]} cannot be used with --vocabulary" in result.output
    with pytest.raises(ValueError, match="does not apply with a fixed --vocabulary"):
        ingest(corpus / "new.jsonl", tmp_path / "x.zarr", vocabulary=corpus / "old.zarr", pruning=Pruning())
    assert not (tmp_path / "x.zarr").exists()


def test_a_source_that_is_not_a_store_run_or_model_is_a_clear_error(corpus, tmp_path):
    (tmp_path / "plain").mkdir()
    result = CliRunner().invoke(main, ["ingest", str(corpus / "new.jsonl"), "-o", str(tmp_path / "x.zarr"),
                                       "--vocabulary", str(tmp_path / "plain")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "is not a store, a run directory or a model.zarr" in result.output
    with pytest.raises(StoreError, match="is not a store, a run directory or a model"):
        ingest(corpus / "new.jsonl", tmp_path / "x.zarr", vocabulary=tmp_path / "plain")
