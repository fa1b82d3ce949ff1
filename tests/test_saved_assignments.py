"""exclude_own: each document's saved assignments, and the frozen topics without them."""

import json

import numpy as np
import pytest

from bigtopics.assignments import SavedAssignments
from bigtopics.frozen import FrozenTopics
from bigtopics.reader import read_documents
from bigtopics.stats import SparseStats
from steps import gibbs_local_step
from bigtopics.store import open_store
from bigtopics.synth import CorpusSpec, write_corpus
from bigtopics.topic_word import TopicWordTable
from bigtopics.settings import SAMPLING_DEFAULTS, TrainSettings
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
def test_a_table_without_own_statistics_is_the_clipped_difference_then_exactly_as_before(estimate):
    rng = np.random.default_rng(1)
    n_topics, n_words, samples = 6, 40, 3
    table, dense = lazy_table(rng, n_topics, n_words)
    # own statistics: mostly below N's entries, some above (clipped at 0), some where N has none
    own = np.round(dense * rng.uniform(0, 1.5, dense.shape) * samples) / samples
    own[rng.random(dense.shape) < 0.5] = 0
    own[0, :5] = 2.0
    before = table.state()
    expected = np.maximum(dense - own, 0)
    with table.without(own_stats(own)):
        np.testing.assert_allclose(dense_of(table), expected, atol=1e-9)
        np.testing.assert_allclose(table.topic_totals(), expected.sum(1), rtol=1e-12)
        words = np.arange(3, 35)
        frozen = FrozenTopics.from_table(table, words, 0.3, estimate)
        rebuilt = np.repeat(frozen.smoothing[:, None], len(words), axis=1)
        for r in range(len(words)):
            lo, hi = frozen.row_indptr[r], frozen.row_indptr[r + 1]
            rebuilt[frozen.row_topics[lo:hi], r] += frozen.row_coef[lo:hi]
        np.testing.assert_allclose(rebuilt, naive.beta_estimate(expected, 0.3, estimate)[:, words], rtol=1e-9)
    assert_same_state(table.state(), before)  # bit for bit


def test_saved_assignments_give_back_each_documents_statistics(corpus, tmp_path):
    store = open_store(corpus)
    saved = SavedAssignments(store, n_topics=5, samples=2, directory=tmp_path / "saved")
    table = TopicWordTable(5, store.n_words)
    rng = np.random.default_rng(2)
    nhat = rng.gamma(0.5, 4.0, (5, store.n_words))
    k, w = np.nonzero(nhat)
    order = np.lexsort((k, w))
    table.update(w[order], k[order], nhat[k, w][order], 1.0, 1.0)
    visited = read_documents(store, np.array([3, 17, 18, 250, 599]))
    frozen = FrozenTopics.from_table(table, visited.distinct_words(), 0.05)
    stats = gibbs_local_step(visited, frozen, visited.doc_seeds(0, 0), alpha=0.1, burnin=1, samples=2)
    assert len(saved.previous_stats(visited).words) == 0  # nothing saved yet
    saved.record(visited, stats.assignments)
    expected = last_sweep_counts(visited, stats.assignments, samples=2)
    assert as_dict(saved.previous_stats(visited)) == expected
    # a batch that mixes the visited documents with new ones gives back the visited ones' alone
    mixed = read_documents(store, np.array([0, 3, 17, 18, 100, 250, 599]))
    assert as_dict(saved.previous_stats(mixed)) == expected
    # the saved topics are kept per store document, whatever batch the document came in
    alone = saved.previous_stats(read_documents(store, np.array([250])))
    assert alone.values.sum() == visited.counts[visited.indptr[3]:visited.indptr[4]].sum()
    # a checkpoint of the first version kept every sweep: it opens with the last one
    every_sweep = np.full(store.n_tokens * 2, saved.unvisited, saved.dtype)
    starts = saved.token_offsets[visited.doc_numbers] * 2
    token_starts = visited.token_starts()
    for d, start in enumerate(starts):
        n = token_starts[d + 1] - token_starts[d]
        every_sweep[start:start + 2 * n] = stats.assignments[token_starts[d] * 2:token_starts[d + 1] * 2]
    reopened = SavedAssignments(store, n_topics=5, samples=2, directory=tmp_path / "old", saved=every_sweep)
    np.testing.assert_array_equal(reopened.topics, saved.topics)


def last_sweep_counts(batch, assignments, samples):
    """{(word, topic): count} over the batch's documents' last saved sweep (the sampler's layout:
    samples sweeps of each document's tokens from token_starts[d] * samples; tokens are the
    entries' words repeated, in entry order)."""
    out = {}
    token_starts = batch.token_starts()
    for d in range(batch.n_docs):
        lo, hi = batch.indptr[d], batch.indptr[d + 1]
        tokens = np.repeat(batch.words[lo:hi], batch.counts[lo:hi])
        n = len(tokens)
        last = assignments[token_starts[d] * samples + (samples - 1) * n:][:n]
        for word, topic in zip(tokens.tolist(), last.tolist()):
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
    with pytest.raises(ValueError, match="exclude-own needs the gibbs local step"):
        TrainSettings(n_topics=5, local_step="vb", exclude_own=True).validate()


def test_minibatch_size_and_sweeps_default_by_exclude_own_and_given_values_win():
    def sampling(**given):
        s = TrainSettings(n_topics=5, **given)
        return s.batch_size, s.burnin, s.samples

    one_visit, revisits = SAMPLING_DEFAULTS[False], SAMPLING_DEFAULTS[True]
    assert one_visit != revisits
    assert sampling(epochs=1) == one_visit
    assert sampling(epochs=3) == revisits
    assert sampling(epochs=3, exclude_own=False) == one_visit
    assert sampling(epochs=1, exclude_own=True) == revisits
    assert sampling(epochs=3, local_step="scvb0") == one_visit
    assert sampling(epochs=3, batch_size=100, burnin=0, samples=2) == (100, 0, 2)
    assert sampling(epochs=3, burnin=0) == (revisits[0], 0, revisits[2])  # each one given wins alone


def test_a_run_from_before_the_option_resumes_without_it(corpus, tmp_path):
    run = tmp_path / "run"
    train(corpus, run, TrainSettings(n_topics=5, epochs=2, max_docs=300, batch_size=100, exclude_own=False), quiet=True)
    record = json.loads((run / "settings.json").read_text())
    del record["settings"]["exclude_own"]
    (run / "settings.json").write_text(json.dumps(record))
    resume(run, quiet=True, max_docs=900)
    assert json.loads((run / "settings.json").read_text())["settings"]["exclude_own"] is False
    assert not (run / "assignments").exists()


def test_a_run_with_exclude_own_keeps_the_assignments_in_its_checkpoints(corpus, tmp_path):
    run = tmp_path / "run"
    train(corpus, run, TrainSettings(n_topics=5, epochs=2, batch_size=200, checkpoint_every="2"), quiet=True)
    from bigtopics.checkpoints import load_latest_checkpoint

    _, arrays, _ = load_latest_checkpoint(run)
    saved = arrays["saved_assignments"]
    assert saved.dtype == np.uint16 and len(saved) == open_store(corpus).n_tokens
    assert np.all(saved < 5)  # every document visited, every slot a topic
