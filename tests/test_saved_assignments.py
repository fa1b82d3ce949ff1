"""exclude_own: each document's saved assignments, and the frozen topics without them."""

import json

import numpy as np
import pytest
from steps import run_step

from bigtopics import settings as settings_module
from bigtopics.assignments import SavedAssignments, previous_stats
from bigtopics.frozen import TableRows
from bigtopics.local_steps.gibbs import ONE_PASS, REVISITING
from bigtopics.reader import read_documents
from bigtopics.settings import MIN_MINIBATCHES, SMALLEST_REVISIT_BATCH, TrainSettings, revisit_batch_size
from bigtopics.stats import SparseStats
from bigtopics.store import open_store
from bigtopics.synth import CorpusSpec, write_corpus
from bigtopics.topic_word import TopicWordTable
from bigtopics.trainer import resume, train

from . import naive
from .test_topic_word import assert_same_state

SPEC = CorpusSpec(n_docs=600, n_topics=5, n_words=120, mean_length=40, alpha=0.1, eta=0.05, seed=7)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "synthetic.zarr"
    write_corpus(SPEC, path, "store")
    return path


def own_stats(dense_own):
    """dense_own (K x V) as SparseStats over word ids, each pair once, as saved assignments give them."""
    k, w = np.nonzero(dense_own)
    return SparseStats(w.astype(np.int64), k.astype(np.int64), dense_own[k, w])


def lazy_table(rng, n_topics, n_words):
    """A table after a few lazy updates (pi != 1) and the dense N it holds."""
    table = TopicWordTable(n_topics, n_words)
    dense = np.zeros((n_topics, n_words))
    for rho in (1.0, 0.5, 0.3):
        nhat = rng.gamma(0.5, 4.0, (n_topics, n_words)) * (rng.random((n_topics, n_words)) < 0.3)
        k, w = np.nonzero(nhat)
        order = np.lexsort((k, w))
        table.update(w[order], k[order], nhat[k, w][order], rho, 2.0)
        dense = (1 - rho) * dense + rho * 2.0 * nhat
    return table, dense


def dense_of(table):
    """N as a dense K x V array; unlike test_topic_word.dense it allows the zero entries that
    taking statistics out leaves in the table."""
    indptr, topics, values = table.to_csr()
    dense = np.zeros((table.n_topics, table.n_words))
    for w in range(table.n_words):
        dense[topics[indptr[w]:indptr[w + 1]], w] = values[indptr[w]:indptr[w + 1]]
    return dense


@pytest.mark.parametrize("estimate", ["mean", "geometric"])
def test_rows_without_own_statistics_are_the_clipped_difference_and_the_table_stays(estimate):
    rng = np.random.default_rng(1)
    n_topics, n_words, samples = 6, 40, 3
    table, dense = lazy_table(rng, n_topics, n_words)
    # own statistics: mostly below N's entries, some above (clipped at 0), some where N has none
    own = np.round(dense * rng.uniform(0, 1.5, dense.shape) * samples) / samples
    own[rng.random(dense.shape) < 0.5] = 0
    own[0, :5] = 2.0
    before = table.state()
    expected = np.maximum(dense - own, 0)
    rows = TableRows.from_table(table, np.arange(n_words)).without(own_stats(own))
    np.testing.assert_allclose(rows.topic_totals(), expected.sum(1), rtol=1e-12)
    words = np.arange(3, 35)
    frozen = rows.subset(words).freeze(0.3, estimate)
    rebuilt = np.repeat(frozen.smoothing[:, None], len(words), axis=1)
    for r in range(len(words)):
        lo, hi = frozen.row_indptr[r], frozen.row_indptr[r + 1]
        rebuilt[frozen.row_topics[lo:hi], r] += frozen.row_coef[lo:hi]
    np.testing.assert_allclose(rebuilt, naive.beta_estimate(expected, 0.3, estimate)[:, words], rtol=1e-9)
    assert_same_state(table.state(), before)  # the live table is never touched


def test_saved_assignments_give_back_each_documents_statistics(corpus, tmp_path):
    store = open_store(corpus)
    saved = SavedAssignments(store, n_topics=5, directory=tmp_path / "saved")
    table = TopicWordTable(5, store.n_words)
    rng = np.random.default_rng(2)
    nhat = rng.gamma(0.5, 4.0, (5, store.n_words))
    k, w = np.nonzero(nhat)
    order = np.lexsort((k, w))
    table.update(w[order], k[order], nhat[k, w][order], 1.0, 1.0)

    def previous(batch):
        return previous_stats(batch, saved.topics_of(batch.doc_numbers), saved.unvisited, saved.n_topics).stats()

    visited = read_documents(store, np.array([3, 17, 18, 250, 599]))
    frozen = TableRows.from_table(table, visited.distinct_words()).freeze(0.05)
    result = run_step("gibbs", visited, frozen, visited.doc_seeds(0, 0), alpha=0.1, burnin=1, samples=2,
                      exclude_own=True)
    assert len(previous(visited).words) == 0  # nothing saved yet
    saved.record(visited.doc_numbers, result.last_sweep)
    expected = last_sweep_counts(visited, result.last_sweep)
    assert as_dict(previous(visited)) == expected
    # a batch that mixes the visited documents with new ones gives back the visited ones' alone
    mixed = read_documents(store, np.array([0, 3, 17, 18, 100, 250, 599]))
    assert as_dict(previous(mixed)) == expected
    # the saved topics are kept per store document, whatever batch the document came in
    alone = previous(read_documents(store, np.array([250])))
    assert alone.values.sum() == visited.counts[visited.indptr[3]:visited.indptr[4]].sum()
    # and given back document after document in the order asked, the unvisited marked
    starts = visited.token_starts()
    of_doc = {int(d): result.last_sweep[starts[i]:starts[i + 1]] for i, d in enumerate(visited.doc_numbers)}
    asked = np.array([599, 3, 100, 250])
    expected_topics = [of_doc.get(int(d), np.full(int(saved.token_offsets[d + 1] - saved.token_offsets[d]),
                                                  saved.unvisited, saved.dtype)) for d in asked]
    np.testing.assert_array_equal(saved.topics_of(asked), np.concatenate(expected_topics))


def last_sweep_counts(batch, last_sweep):
    """{(word, topic): count} over the batch's documents' last sweep (tokens are the entries'
    words repeated, in entry order, one document after another)."""
    tokens = np.repeat(batch.words, batch.counts)
    out = {}
    for word, topic in zip(tokens.tolist(), last_sweep.tolist()):
        out[(word, topic)] = out.get((word, topic), 0.0) + 1.0
    return out


def as_dict(stats):
    """{(word, topic): value} of SparseStats."""
    return dict(zip(zip(stats.words.tolist(), stats.topics.tolist()), stats.values.tolist()))


def test_exclude_own_is_on_for_runs_of_several_epochs_of_gibbs():
    assert TrainSettings(n_topics=5, epochs=3).exclude_own
    assert not TrainSettings(n_topics=5, epochs=1).exclude_own
    assert not TrainSettings(n_topics=5, epochs=3, local_step="scvb0").exclude_own
    assert TrainSettings(n_topics=5, epochs=1, exclude_own=True).exclude_own
    with pytest.raises(ValueError, match="--exclude-own applies to --local-step gibbs, not vb"):
        TrainSettings(n_topics=5, local_step="vb", exclude_own=True)


def test_minibatch_size_and_sweeps_default_by_exclude_own_and_given_values_win():
    def sampling(**given):
        s = TrainSettings(n_topics=5, **given)
        return s.batch_size, s.step_options.get("burnin"), s.step_options.get("samples")

    one_visit = (ONE_PASS.batch_size, ONE_PASS.burnin, ONE_PASS.samples)
    revisits = (None, REVISITING.burnin, REVISITING.samples)  # None: settled later
    assert one_visit[1:] != revisits[1:]
    assert sampling(epochs=1) == one_visit
    assert sampling(epochs=3) == revisits
    assert sampling(epochs=3, exclude_own=False) == one_visit
    assert sampling(epochs=1, exclude_own=True) == revisits
    assert sampling(epochs=3, local_step="scvb0") == (one_visit[0], one_visit[1], None)
    assert sampling(epochs=3, batch_size=100, burnin=0, samples=2) == (100, 0, 2)
    assert sampling(epochs=3, burnin=0) == (None, 0, revisits[2])  # each one given wins alone


def test_a_revisiting_run_takes_the_largest_batch_that_leaves_it_enough_minibatches():
    largest = REVISITING.batch_size
    assert revisit_batch_size(10**9) == largest
    assert revisit_batch_size(MIN_MINIBATCHES * 1000) == 1000
    assert revisit_batch_size(MIN_MINIBATCHES * 10) == SMALLEST_REVISIT_BATCH
    settled = TrainSettings(n_topics=5, epochs=10, max_docs=MIN_MINIBATCHES * 600)
    settled.settle_batch_size(100_000)
    assert settled.batch_size == 600  # max_docs bounds the visits
    given = TrainSettings(n_topics=5, epochs=10, batch_size=7)
    given.settle_batch_size(10**9)
    assert given.batch_size == 7


def test_a_resumed_run_keeps_the_batch_size_it_started_with(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(settings_module, "MIN_MINIBATCHES", 1)  # so that small runs settle other sizes
    monkeypatch.setattr(settings_module, "SMALLEST_REVISIT_BATCH", 1)
    run = tmp_path / "run"
    train(corpus, run, TrainSettings(n_topics=5, epochs=2, max_docs=150, checkpoint_every="1"), quiet=True)
    resume(run, quiet=True, max_docs=300)  # settled again, the size would be 300
    assert json.loads((run / "settings.json").read_text())["settings"]["batch_size"] == 150
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert (metrics[-1]["minibatch"], metrics[-1]["docs_seen"]) == (2, 300)


def test_the_settled_batch_size_is_what_the_run_records_and_uses(corpus, tmp_path):
    run = tmp_path / "run"
    settings = TrainSettings(n_topics=5, epochs=2, heldout=10, checkpoint_every="1000000")
    train(corpus, run, settings, quiet=True)
    n_training = open_store(corpus).n_docs - 10
    expected = revisit_batch_size(2 * n_training)
    assert json.loads((run / "settings.json").read_text())["settings"]["batch_size"] == expected
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["minibatch"] == 2 * -(-n_training // expected)


def test_a_run_from_before_the_step_options_is_refused_with_a_clear_message(corpus, tmp_path):
    run = tmp_path / "run"
    train(corpus, run, TrainSettings(n_topics=5, max_docs=100, batch_size=100), quiet=True)
    record = json.loads((run / "settings.json").read_text())
    flat = {**record["settings"], **record["settings"].pop("step_options")}
    del flat["step_options"]
    (run / "settings.json").write_text(json.dumps({**record, "settings": flat}))
    with pytest.raises(ValueError, match="started by an earlier bigtopics"):
        resume(run, quiet=True, max_docs=300)


def test_a_run_with_exclude_own_keeps_the_assignments_in_its_checkpoints(corpus, tmp_path):
    run = tmp_path / "run"
    train(corpus, run, TrainSettings(n_topics=5, epochs=2, batch_size=200, checkpoint_every="2"), quiet=True)
    from bigtopics.checkpoints import load_latest_checkpoint

    _, arrays, _ = load_latest_checkpoint(run)
    saved = arrays["saved_assignments"]
    assert saved.dtype == np.uint16 and len(saved) == open_store(corpus).n_tokens
    assert np.all(saved < 5)  # every document visited, every slot a topic
