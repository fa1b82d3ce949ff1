"""Alias tables and the alias / Metropolis-Hastings Gibbs samplers against dense references."""

import numpy as np
import pytest
from numba import njit
from steps import gibbs_local_step

from bigtopics.kernels.alias import alias_draw, alias_table, row_alias_tables
from bigtopics.kernels.alias_gibbs import exact_topic, mh_topic
from bigtopics.kernels.prior import prior_running_sum
from bigtopics.kernels.rng import next_uniform
from bigtopics.minibatch import Minibatch
from bigtopics.model import load_model
from bigtopics.settings import TrainSettings
from bigtopics.synth import truth_path, write_corpus
from bigtopics.trainer import train

from . import naive
from .test_gibbs import counts_per_copy, freeze, short_document_copies, sparse_topic_word
from .test_train import SPEC


def chi_squared_z(counts: np.ndarray, probabilities: np.ndarray) -> float:
    """Pearson's chi-squared statistic of the counts against the probabilities, as a standard
    normal deviate (Wilson-Hilferty); bins of tiny expected count are pooled."""
    expected = probabilities * counts.sum()
    keep = expected >= 5
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    if expected[-1] < 5:  # nothing (or too little) pooled: drop the pool
        observed, expected = observed[:-1], expected[:-1]
    stat = ((observed - expected) ** 2 / expected).sum()
    df = len(expected) - 1
    return ((stat / df) ** (1 / 3) - (1 - 2 / (9 * df))) / np.sqrt(2 / (9 * df))


@njit
def alias_draws(prob, alias, lo, n, seed, n_draws):
    state = seed
    out = np.empty(n_draws, np.int64)
    for i in range(n_draws):
        state, u = next_uniform(state)
        out[i] = alias_draw(prob, alias, lo, n, u)
    return out


WEIGHT_CASES = {
    "gamma": np.random.default_rng(0).gamma(0.3, 1.0, 50),
    "with zeros": np.array([0.0, 3.0, 0.0, 1e-9, 2.0, 0.0, 7.5]),
    "one outcome": np.array([0.0, 0.0, 4.0, 0.0]),
    "equal": np.full(9, 0.25),
    "single": np.array([2.0]),
    "spread": np.geomspace(1e-12, 1e6, 2000),
}


@pytest.mark.parametrize("weights", WEIGHT_CASES.values(), ids=WEIGHT_CASES.keys())
def test_alias_table_gives_each_outcome_its_weight(weights):
    prob, alias, total = alias_table(weights)
    assert total == pytest.approx(weights.sum(), rel=1e-14)
    assert np.all((prob >= 0) & (prob <= 1)) and np.all((alias >= 0) & (alias < len(weights)))
    rebuilt = naive.alias_masses(prob, alias) * total / len(weights)
    np.testing.assert_allclose(rebuilt, weights, rtol=1e-9, atol=1e-12 * total)
    draws = alias_draws(prob, alias, 0, len(weights), np.uint64(7), 200_000)
    counts = np.bincount(draws, minlength=len(weights))
    assert counts[weights == 0].sum() == 0
    if np.count_nonzero(weights) > 1:
        assert abs(chi_squared_z(counts, weights / weights.sum())) < 4


@pytest.mark.slow
def test_row_tables_are_built_per_row():
    rng = np.random.default_rng(1)
    lengths = [3, 0, 1, 40, 7, 0, 12]
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    weights = rng.gamma(0.5, 1.0, indptr[-1])
    prob, alias, totals = row_alias_tables(indptr, weights)
    for r in range(len(lengths)):
        lo, hi = indptr[r], indptr[r + 1]
        assert totals[r] == pytest.approx(weights[lo:hi].sum(), rel=1e-14)
        if hi > lo:
            rebuilt = naive.alias_masses(prob[lo:hi], alias[lo:hi]) * totals[r] / (hi - lo)
            np.testing.assert_allclose(rebuilt, weights[lo:hi], rtol=1e-12)
            draws = alias_draws(prob, alias, lo, hi - lo, np.uint64(r), 1000)
            assert draws.min() >= 0 and draws.max() < hi - lo


# --- one token with the rest of its document fixed ------------------------------------------
N_TOPICS, N_WORDS, ALPHA, ETA = 30, 6, 0.2, 0.5
# a symmetric prior, and an asymmetric one spread over a factor 50 in no order of the topics
PRIORS = {"symmetric": ALPHA, "asymmetric": np.random.default_rng(9).permutation(np.geomspace(0.02, 1.0, N_TOPICS))}


@pytest.fixture(scope="module")
def token_problem():
    """Frozen topics, and a document of other tokens spread over several topics; word 5's row
    is empty (no topic has seen it) so only the dense table can propose for it."""
    rng = np.random.default_rng(2)
    dense = sparse_topic_word(rng, N_TOPICS, N_WORDS, density=0.4)
    dense[:, 5] = 0
    frozen = freeze(dense, ETA)
    other = np.repeat([2, 3, 7, 11, 12, 20, 29], [5, 1, 3, 1, 2, 4, 1]).astype(np.int32)
    return frozen, naive.exp_elog_beta(dense, ETA), other


@njit
def exact_draws(w, alpha, n_dk, doc_topics, n_doc_topics, view, seed, n_draws):
    state = seed
    doc_cum = np.zeros(n_dk.shape[0])
    out = np.empty(n_draws, np.int64)
    for i in range(n_draws):
        state, out[i] = exact_topic(state, w, alpha, n_dk, doc_topics, n_doc_topics, view, doc_cum)
    return out


def document_state(other):
    n_dk = np.bincount(other, minlength=N_TOPICS).astype(np.int32)
    doc_topics = np.zeros(N_TOPICS, np.int32)
    present = np.flatnonzero(n_dk).astype(np.int32)
    doc_topics[: len(present)] = present
    return n_dk, doc_topics, len(present)


@pytest.mark.slow
@pytest.mark.parametrize("prior", sorted(PRIORS))
@pytest.mark.parametrize("w", range(N_WORDS))
def test_exact_alias_draw_follows_the_dense_conditional(token_problem, w, prior):
    frozen, weights, other = token_problem
    n_dk, doc_topics, n_doc_topics = document_state(other)
    view, alpha = frozen.alias_prior_view(PRIORS[prior])
    draws = exact_draws(w, alpha, n_dk, doc_topics, n_doc_topics, view, np.uint64(w), 200_000)
    counts = np.bincount(draws, minlength=N_TOPICS)
    assert abs(chi_squared_z(counts, naive.gibbs_conditional(w, other, PRIORS[prior], weights))) < 4


@njit
def mh_chains(starts, seeds, w, i, n_counted, alpha, alpha_cum, n_steps, n_dk, z, view):
    out = np.empty(starts.shape[0], np.int64)
    for c in range(starts.shape[0]):
        _, out[c] = mh_topic(seeds[c], starts[c], w, i, n_counted, alpha, alpha_cum, n_steps, n_dk, z, view)
    return out


def mh_from(starts, seeds, w, i, n_counted, prior, n_steps, n_dk, z, frozen):
    view, alpha = frozen.alias_prior_view(prior)
    return mh_chains(starts, seeds, w, i, n_counted, alpha, prior_running_sum(alpha), n_steps, n_dk, z, view)


@pytest.mark.slow
@pytest.mark.parametrize("prior", sorted(PRIORS))
@pytest.mark.parametrize("w", [0, 3, 5])
@pytest.mark.parametrize("n_steps", [1, 2, 3])
@pytest.mark.parametrize("during_initialisation", [False, True])
def test_mh_steps_leave_the_conditional_invariant(token_problem, w, n_steps, during_initialisation, prior):
    """Independent chains started from the conditional are still distributed by it after the
    steps: a wrong acceptance ratio, or a doc proposal counting the token itself, shows here."""
    frozen, weights, other = token_problem
    n_chains = 200_000
    rng = np.random.default_rng(3)
    i = 4  # the token; z[i] holds a stale topic that neither the target nor the proposal may see
    if during_initialisation:  # the tokens after i are not initialised yet
        z = np.concatenate([other[:i], [1], rng.integers(0, N_TOPICS, 10)]).astype(np.int32)
        counted = other[:i]
    else:
        z = np.concatenate([other[:i], [1], other[i:]]).astype(np.int32)
        counted = other
    n_dk = np.bincount(counted, minlength=N_TOPICS).astype(np.int32)
    target = naive.gibbs_conditional(w, counted, PRIORS[prior], weights)
    starts = rng.choice(N_TOPICS, n_chains, p=target)
    seeds = rng.integers(0, 2**63, n_chains).astype(np.uint64)
    after = mh_from(starts, seeds, w, i, len(counted), PRIORS[prior], n_steps, n_dk, z, frozen)
    assert abs(chi_squared_z(np.bincount(after, minlength=N_TOPICS), target)) < 4
    # the chains did move: the result is not just the start
    assert np.mean(after != starts) > 0.2


@pytest.mark.parametrize("prior", sorted(PRIORS))
def test_mh_chain_from_no_topic_converges_to_the_conditional(token_problem, prior):
    frozen, weights, other = token_problem
    z = np.concatenate([[0], other]).astype(np.int32)
    n_dk = np.bincount(other, minlength=N_TOPICS).astype(np.int32)
    seeds = np.arange(100_000, dtype=np.uint64) * np.uint64(7919)
    after = mh_from(np.full(len(seeds), -1), seeds, 1, 0, len(other), PRIORS[prior], 40, n_dk, z, frozen)
    target = naive.gibbs_conditional(1, other, PRIORS[prior], weights)
    assert abs(chi_squared_z(np.bincount(after, minlength=N_TOPICS), target)) < 4


@pytest.mark.slow
# --- whole minibatches -------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.2, np.array([0.05, 0.2, 0.8])], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("sampler", ["alias", "mh", "word-major"])
def test_marginals_match_exact_posterior_of_a_short_document(sampler, alpha):
    n_copies = 20_000
    batch, frozen, exact = short_document_copies([0, 0, 1, 3], 3, 0.6, alpha, 0.5, n_copies)
    stats = gibbs_local_step(batch, frozen, batch.doc_seeds(7, 0), alpha=alpha, burnin=8, samples=4,
                             sampler=sampler, n_workers=2)
    estimate = counts_per_copy(stats.words, stats.topics, stats.values, n_copies, 3)
    np.testing.assert_allclose(estimate, exact, atol=0.012)
    assert stats.values.sum() == pytest.approx(4 * n_copies)


def random_batch(rng, n_docs, n_words, first_doc=0, max_entries=30):
    rows = [np.unique(rng.integers(0, n_words, rng.integers(1, max_entries))) for _ in range(n_docs)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    return Minibatch(np.arange(first_doc, first_doc + n_docs), indptr, np.concatenate(rows),
                     rng.integers(1, 5, indptr[-1]))


@pytest.mark.slow
def test_statistics_agree_with_the_bucket_sampler_in_distribution():
    """Many copies of a few documents; the noise level is the largest difference between two
    runs of buckets with different seeds.
    alias runs the same Markov chain as buckets, so their average Nhat agree after any number of
    sweeps; mh has the same stationary distribution but mixes more slowly per sweep, so they
    agree once both chains have converged (after 2 burn-in sweeps they differ by several times
    the noise, which shows the comparison can tell chains apart)."""
    rng = np.random.default_rng(5)
    n_topics, n_words, n_copies = 12, 40, 300
    frozen = freeze(sparse_topic_word(rng, n_topics, n_words, density=0.3), 0.5)
    base = random_batch(rng, 10, n_words, max_entries=12)
    batch = Minibatch(np.arange(10 * n_copies),
                      np.concatenate([[0], np.cumsum(np.tile(np.diff(base.indptr), n_copies))]),
                      np.tile(base.words, n_copies), np.tile(base.counts, n_copies))

    def average_nhat(sampler, seed, burnin):
        stats = gibbs_local_step(batch, frozen, batch.doc_seeds(seed, 0), alpha=0.1, burnin=burnin, samples=2,
                                 sampler=sampler, n_workers=2)
        out = np.zeros((n_words, n_topics))
        np.add.at(out, (stats.words, stats.topics), stats.values / n_copies)
        return out

    def distance(a, b):
        return np.abs(a - b).max()

    for sampler, burnin in (("alias", 2), ("word-major", 2), ("mh", 30)):
        reference = average_nhat("buckets", 1, burnin)
        noise = distance(average_nhat("buckets", 2, burnin), reference)
        assert distance(average_nhat(sampler, 3, burnin), reference) < 2.5 * noise, sampler


def test_unknown_sampler_is_refused():
    rng = np.random.default_rng(6)
    frozen = freeze(sparse_topic_word(rng, 4, 10), 0.5)
    batch = random_batch(rng, 3, 10)
    with pytest.raises(ValueError, match="unknown sampler 'gumbel'"):
        gibbs_local_step(batch, frozen, batch.doc_seeds(0, 0), alpha=0.1, burnin=1, samples=1, sampler="gumbel")


# --- training end to end --------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("alias_train") / "synthetic.zarr"
    write_corpus(SPEC, path, "store")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["alias", "mh", "word-major"])
def test_training_recovers_the_true_topics(corpus, tmp_path, sampler):
    """As tests/test_train.py: mean best-match cosine of learned to true p(w|k) at least 0.9."""
    settings = TrainSettings(n_topics=SPEC.n_topics, epochs=4, batch_size=250, tau0=1, seed=3, sampler=sampler)
    train(corpus, tmp_path / "run", settings, quiet=True)
    model = load_model(tmp_path / "run")
    learned = np.stack([model.word_probabilities(k) for k in range(model.n_topics)])
    similarity = naive.best_match_cosine(learned, np.load(truth_path(corpus) / "beta.npy"))
    assert similarity.mean() >= 0.9, similarity


def test_mh_steps_must_be_positive(corpus, tmp_path):
    with pytest.raises(ValueError, match="mh-steps must be at least 1"):
        train(corpus, tmp_path / "run", TrainSettings(n_topics=5, sampler="mh", mh_steps=0), quiet=True)
    assert not (tmp_path / "run").exists()
