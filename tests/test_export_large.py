"""Exports of a model past the size limits of the readers' files (K x V > 2^21 = pyldavis.MAX_CELLS),
opened in their real readers and checked against the model and against what the readers show
given the whole vocabulary."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from test_export_readers import (
    assert_pyldavis_shows_the_whole_vocabularys_view,
    assert_pyldavis_terms_are_the_naive_ones,
)

from bigtopics.cli import main
from bigtopics.export import pyldavis as module
from bigtopics.model import load_model
from bigtopics.settings import TrainSettings
from bigtopics.synth import CorpusSpec, write_corpus
from bigtopics.trainer import train

SPEC = CorpusSpec(n_docs=1500, n_topics=100, n_words=22_000, mean_length=60, alpha=0.1, eta=0.05, seed=11)


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    root = tmp_path_factory.mktemp("large")
    store, run = root / "corpus.zarr", root / "run"
    write_corpus(SPEC, store, "store")
    train(store, run, TrainSettings(n_topics=SPEC.n_topics, epochs=1, batch_size=500), quiet=True)
    model = load_model(run)
    assert model.n_topics * model.n_words > module.MAX_CELLS
    return model, root


def test_pyldavis_terms_at_library_size_are_those_of_a_naive_ranking(large):
    assert_pyldavis_terms_are_the_naive_ones(large[0])


@pytest.mark.slow
def test_pyldavis_at_library_size_shows_what_the_whole_vocabulary_shows(large):
    """No term lumps the rest of the vocabulary (it topped every topic): pyLDAvis lists, for every
    topic at every lambda and in its default view, the terms and numbers it lists given the whole
    vocabulary, with the model's p(w|k) and term frequencies, topics numbered from 1."""
    pyldavis = pytest.importorskip("pyLDAvis")
    model, root = large
    result = CliRunner().invoke(main, ["export", str(model.path.parent), "-o", str(root / "out")])
    assert result.exit_code == 0, result.output
    payload = json.loads((root / "out" / "pyldavis.json").read_text())
    assert payload["start_index"] == 1 and payload["R"] == module.R
    n_rest = sum(w.startswith("(rest of the vocabulary") for w in payload["vocab"])
    assert 0 < n_rest and len(payload["vocab"]) - n_rest < model.n_words // 2
    np.testing.assert_allclose(np.array(payload["topic_term_dists"]).sum(axis=1), 1.0, atol=1e-9)
    assert_pyldavis_shows_the_whole_vocabularys_view(pyldavis, model, payload, result.output)
