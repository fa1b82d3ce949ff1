"""Held-out likelihood and topic diagnostics against slow references (tests/naive.py)."""

import json
import math
import shutil
from dataclasses import replace

import naive
import numpy as np
import pytest
from click.testing import CliRunner

from bigtopics.cli import main
from bigtopics.diagnostics import top_word_ids, topic_diagnostics, umass_coherence
from bigtopics.heldout import heldout_loglik, split_tokens
from bigtopics.minibatch import Minibatch
from bigtopics.model import load_model, write_model
from bigtopics.settings import TrainSettings
from bigtopics.store import open_store
from bigtopics.synth import CorpusSpec, write_corpus
from bigtopics.trainer import train

ALPHA, ETA = 0.3, 0.05
# K = 3 topics over V = 5 words, sparse: zeros are unstored entries
N = np.array([[40.0, 25.0, 0.0, 0.0, 3.0],
              [0.0, 5.0, 30.0, 12.0, 0.0],
              [2.0, 0.0, 0.0, 20.0, 35.0]])


def dense_model(path, topic_word, alpha=ALPHA, eta=ETA):
    """Write a model holding the dense statistics `topic_word` (K x V)."""
    word_major = topic_word.T
    rows, topics = np.nonzero(word_major)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=word_major.shape[0]))])
    vocab = [f"w{i}" for i in range(topic_word.shape[1])]
    write_model(path, (indptr, topics, word_major[rows, topics]), topic_word.sum(1), vocab, alpha=alpha, eta=eta)
    return load_model(path)


def batch_of(docs, first=0):
    """A Minibatch of documents given as lists of word ids (one entry per distinct word)."""
    indptr, words, counts = [0], [], []
    for doc in docs:
        w, c = np.unique(doc, return_counts=True)
        words += w.tolist()
        counts += c.tolist()
        indptr.append(len(words))
    return Minibatch(np.arange(first, first + len(docs)), np.array(indptr), np.array(words), np.array(counts))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return dense_model(tmp_path_factory.mktemp("tiny") / "model.zarr", N)


@pytest.mark.slow
def test_left_to_right_matches_the_exact_evidence(tiny):
    """With many particles the estimate must be within 1% of log p(w) summed over all 3^5
    topic configurations, for each of two documents."""
    phi = naive.point_estimates(N, ETA)
    for doc in ([0, 1, 1, 3, 4], [2, 3, 3, 0, 2]):
        exact = naive.log_evidence(doc, ALPHA, phi)
        estimate, tokens = heldout_loglik(tiny, batch_of([doc]), alpha=ALPHA, eta=ETA, seed=1, particles=3000)
        assert tokens == len(doc)
        assert abs(estimate - exact) < 0.01 * abs(exact), (estimate, exact)
        # without resampling the estimate is rougher but must stay close
        rough, _ = heldout_loglik(tiny, batch_of([doc]), alpha=ALPHA, eta=ETA, seed=1, particles=3000,
                                  resample=False)
        assert abs(rough - exact) < 0.05 * abs(exact), (rough, exact)


def test_left_to_right_is_deterministic_and_independent_of_workers(tiny):
    docs = [[0, 1, 1, 3], [2, 2, 3, 4, 4, 4], [1], [0, 4, 2, 3, 1, 1]]
    runs = [heldout_loglik(tiny, batch_of(docs), alpha=ALPHA, eta=ETA, seed=5, particles=20, n_workers=w)
            for w in (1, 2, 1)]
    assert runs[0] == runs[1] == runs[2]
    other = heldout_loglik(tiny, batch_of(docs), alpha=ALPHA, eta=ETA, seed=6, particles=20)
    assert other != runs[0]


def test_split_tokens_partitions_each_document_whatever_the_batch():
    docs = [[0, 1, 1, 3, 4, 4, 4], [2, 3], [1, 1, 1, 1, 0, 0]]
    observed, held = split_tokens(batch_of(docs, first=10), 0.5, seed=3)
    for d, doc in enumerate(docs):
        o = np.repeat(observed.words[observed.indptr[d]:observed.indptr[d + 1]],
                      observed.counts[observed.indptr[d]:observed.indptr[d + 1]])
        h = np.repeat(held.words[held.indptr[d]:held.indptr[d + 1]], held.counts[held.indptr[d]:held.indptr[d + 1]])
        assert sorted(o.tolist() + h.tolist()) == sorted(doc)
        assert len(o) == len(doc) // 2
    alone, _ = split_tokens(batch_of(docs[2:], first=12), 0.5, seed=3)
    np.testing.assert_array_equal(alone.words, observed.words[observed.indptr[2]:])


@pytest.mark.slow
def test_document_completion_matches_the_exact_posterior_mean(tiny):
    """Gibbs-fitted theta with many saved sweeps must score the held-out half within 0.03 nats
    of the exact posterior mean of theta (enumerating the observed half's configurations)."""
    phi = naive.point_estimates(N, ETA)
    doc = [0, 1, 1, 3, 4, 4, 2, 3]
    batch = batch_of([doc])
    observed, held = split_tokens(batch, 0.5, seed=2)
    exact = naive.completion_log_likelihood(np.repeat(observed.words, observed.counts),
                                            np.repeat(held.words, held.counts), ALPHA, phi)
    estimate, tokens = heldout_loglik(tiny, batch, alpha=ALPHA, eta=ETA, seed=2, method="completion",
                                      burnin=20, samples=4000)
    assert tokens == 4
    assert abs(estimate - exact) < 0.03, (estimate, exact)


def test_a_flat_model_scores_minus_log_v_per_token(tmp_path):
    """Every p(w|k) = 1/V: both methods must give exactly -log V per token."""
    flat = dense_model(tmp_path / "flat.zarr", np.zeros_like(N))
    batch = batch_of([[0, 1, 1, 3, 4], [2, 2, 3]])
    for method in ("left-to-right", "completion"):
        loglik, tokens = heldout_loglik(flat, batch, alpha=ALPHA, eta=ETA, seed=0, method=method, particles=3)
        assert loglik / tokens == pytest.approx(-math.log(N.shape[1]))


def test_unknown_method_is_refused(tiny):
    with pytest.raises(ValueError, match="unknown held-out method"):
        heldout_loglik(tiny, batch_of([[0]]), alpha=ALPHA, eta=ETA, seed=0, method="harmonic-mean")


# -- diagnostics over a store -------------------------------------------------------------------
SPEC = CorpusSpec(n_docs=1500, n_topics=5, n_words=120, mean_length=40, alpha=0.1, eta=0.05, seed=4)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    store = root / "corpus.zarr"
    write_corpus(SPEC, store, "store", entries_per_chunk=4096)  # many blocks
    run = root / "run"
    train(store, run, TrainSettings(n_topics=SPEC.n_topics, epochs=3, batch_size=250, tau0=1, seed=2), quiet=True)
    return store, run


@pytest.mark.slow
def test_coherence_matches_brute_force_counting(trained):
    store_path, run = trained
    store, model = open_store(store_path), load_model(run)
    top = np.stack([top_word_ids(model, k, 6) for k in range(model.n_topics)])
    coherence, _ = umass_coherence(store, top)
    docs = [set(block.indices[block.indptr[i]:block.indptr[i + 1]].tolist())
            for block in store.iter_blocks() for i in range(block.n_docs)]
    np.testing.assert_allclose(coherence, naive.umass_coherence(docs, top))
    assert len(list(store.iter_blocks())) > 3


def test_topic_diagnostics_entropy_size_and_prominence(trained):
    store_path, run = trained
    model = load_model(run)
    records = topic_diagnostics(model, open_store(store_path), top_n=5, sample_docs=400)
    dense = np.stack([model.word_probabilities(k) for k in range(model.n_topics)])
    np.testing.assert_allclose([r["entropy"] for r in records], -(dense * np.log(dense)).sum(1))
    np.testing.assert_allclose([r["tokens"] for r in records], model.topic_totals())
    assert sum(r["top_topic_docs"] for r in records) == pytest.approx(1.0)  # every sampled doc has a top topic
    assert all(r["prominent_docs"] >= r["top_topic_docs"] for r in records)
    assert all(r["coherence"] < 0 for r in records)


def test_evaluate_command_prints_a_table_and_writes_json(trained, tmp_path):
    store_path, run = trained
    out = tmp_path / "eval.json"
    result = CliRunner().invoke(main, ["evaluate", str(run), "--store", str(store_path), "--heldout-store",
                                       str(store_path), "--heldout-docs", "100", "--particles", "5", "-o", str(out),
                                       "--quiet"])
    assert result.exit_code == 0, result.output
    assert "coherence" in result.output and "held-out left-to-right" in result.output
    record = json.loads(out.read_text())
    assert len(record["topics"]) == SPEC.n_topics
    for method in ("left-to-right", "completion"):
        # a trained model must do far better than a flat one (-log V per token)
        assert record["heldout"][method]["loglik_per_token"] > -math.log(SPEC.n_words) + 0.5


def test_a_model_zarr_is_evaluated_with_its_runs_store_and_a_lone_model_says_what_it_lacks(trained, tmp_path):
    """RUN/model.zarr reads RUN's settings as RUN does (its store: coherence and document shares);
    a model.zarr with no run beside it says that those need --store instead of leaving them out."""
    store_path, run = trained
    by_run = CliRunner().invoke(main, ["evaluate", str(run), "-o", str(tmp_path / "a.json"), "--quiet"])
    by_model = CliRunner().invoke(main, ["evaluate", str(run / "model.zarr"), "-o", str(tmp_path / "b.json"),
                                         "--quiet"])
    assert by_run.exit_code == by_model.exit_code == 0, by_model.output
    first, second = (json.loads((tmp_path / name).read_text()) for name in ("a.json", "b.json"))
    assert first["topics"] == second["topics"] and "coherence" in second["topics"][0]
    lone = tmp_path / "lone" / "model.zarr"
    shutil.copytree(run / "model.zarr", lone)
    result = CliRunner().invoke(main, ["evaluate", str(lone)])
    assert result.exit_code == 0, result.output
    assert "coherence and document shares need --store" in result.output
    assert "coherence" not in json.loads((lone.parent / "evaluation.json").read_text())["topics"][0]


def test_evaluate_refuses_a_store_with_another_vocabulary(trained, tmp_path):
    _, run = trained
    other = tmp_path / "other.zarr"
    write_corpus(CorpusSpec(n_docs=50, n_topics=2, n_words=60, mean_length=10), other, "store")
    result = CliRunner().invoke(main, ["evaluate", str(run), "--store", str(other), "--quiet"])
    assert result.exit_code == 1 and "vocabulary" in result.output


@pytest.mark.slow
# -- evaluation.json and the model it scored --------------------------------------------------------
def test_export_and_report_use_evaluation_json_only_for_the_model_it_scored(trained, tmp_path):
    """Evaluate, train further: export and report must leave the stale figures out and say so;
    the same for an evaluation.json that does not record its model, and for a retrained run."""
    from bigtopics.evaluate import EVALUATION_NAME, evaluate
    from bigtopics.export import export
    from bigtopics.report import build_report
    from bigtopics.trainer import resume

    store_path, _ = trained
    run = tmp_path / "run"
    settings = TrainSettings(n_topics=SPEC.n_topics, epochs=1, batch_size=250, tau0=1, seed=2)
    train(store_path, run, settings, quiet=True)
    evaluate(run, sample_docs=200, quiet=True)
    record = json.loads((run / EVALUATION_NAME).read_text())
    steps = -(-SPEC.n_docs // 250)
    assert record["scored_model"]["step"] == steps

    def exported(name):
        notices = []
        export(run, tmp_path / name, log=notices.append)
        topics = [json.loads(line) for line in (tmp_path / name / "topics.jsonl").read_text().splitlines()]
        page = build_report(run, tmp_path / f"{name}.html", log=notices.append).read_text()
        return topics, page, notices

    topics, page, notices = exported("fresh")
    assert notices == [] and all("coherence" in t for t in topics)
    assert f'{record["topics"][0]["coherence"]:.1f}' in page

    resume(run, quiet=True, epochs=2)
    model = load_model(run)
    topics, page, notices = exported("stale")
    assert len(notices) == 2 and f"is from an earlier model (step {steps}, now {2 * steps})" in notices[0]
    assert "rerun bigtopics evaluate" in notices[0] and "earlier model" in page
    assert not any("coherence" in t for t in topics)
    np.testing.assert_allclose([t["tokens"] for t in topics], model.topic_totals())  # the model's own, not stale
    assert f'{record["topics"][0]["coherence"]:.1f}</td>' not in page

    from bigtopics.evaluate import current_evaluation

    evaluate(run, sample_docs=200, quiet=True)
    assert current_evaluation(run, model)[1] is None
    record = json.loads((run / EVALUATION_NAME).read_text())
    del record["scored_model"]  # as written before evaluation.json recorded its model
    (run / EVALUATION_NAME).write_text(json.dumps(record))
    assert current_evaluation(run, model)[0] == {}
    assert "does not record which model it scored" in current_evaluation(run, model)[1]

    evaluate(run, sample_docs=200, quiet=True)  # scores the model at step 2 * steps
    other = tmp_path / "other"  # another model at the same step: only the fingerprint tells them apart
    train(store_path, other, replace(settings, epochs=2, seed=3), quiet=True)
    evaluations, notice = current_evaluation(run, load_model(other))
    assert evaluations == {} and f"is from another model with the same step ({2 * steps})" in notice
