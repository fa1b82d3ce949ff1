"""gibbs --sampler word-major (kernels/word_major.py): each document runs its own chain, whatever
else the minibatch holds; its draws follow the conditional (the exact-posterior and
bucket-sampler comparisons in tests/test_alias_gibbs.py, the contract in tests/test_local_steps.py)."""

import numpy as np
import pytest
from steps import gibbs_local_step

from bigtopics.local_steps.gibbs import gibbs_sample
from bigtopics.minibatch import Minibatch
from bigtopics.settings import TrainSettings

from .test_alias_gibbs import random_batch
from .test_gibbs import freeze, sparse_topic_word


def document_output(tallies, d, n_tokens):
    """Document d's saved sweeps and its (word, topic, count) pairs, as arrays."""
    start = tallies.starts[d]
    pairs = slice(start, start + tallies.sizes[d])
    return (tallies.assignments[start: start + tallies.samples * n_tokens], tallies.words[pairs],
            tallies.topics[pairs], tallies.counts[pairs])


@pytest.mark.parametrize("alpha", [0.1, np.linspace(0.02, 0.4, 30)], ids=["symmetric", "asymmetric"])
def test_a_document_samples_the_same_alone_or_among_others(alpha):
    """Word by word, the tokens of all a worker's documents interleave; a document's draws must
    still depend only on itself, its seed and the topics (so on no worker count or neighbour)."""
    rng = np.random.default_rng(11)
    n_topics, n_words = 30, 80
    frozen = freeze(sparse_topic_word(rng, n_topics, n_words, density=0.4), 0.5, "mean")
    batch = random_batch(rng, 40, n_words, max_entries=40)
    seeds = batch.doc_seeds(3, 0)
    together = gibbs_sample(batch, frozen, seeds, alpha=alpha, burnin=2, samples=3, sampler="word-major",
                            n_workers=2)
    token_starts = batch.token_starts()
    for d in (0, 17, 39):
        lo, hi = batch.indptr[d], batch.indptr[d + 1]
        alone = Minibatch(batch.doc_numbers[d: d + 1], np.array([0, hi - lo]), batch.words[lo:hi],
                          batch.counts[lo:hi])
        single = gibbs_sample(alone, frozen, seeds[d: d + 1], alpha=alpha, burnin=2, samples=3,
                              sampler="word-major")
        n_tokens = int(token_starts[d + 1] - token_starts[d])
        for got, want in zip(document_output(single, 0, n_tokens), document_output(together, d, n_tokens)):
            np.testing.assert_array_equal(got, want)



def test_a_warm_start_skips_the_initialisation_of_visited_documents_only():
    """Documents with previous topics start from them; the others (-1) sample exactly as in a
    minibatch without any previous topics."""
    rng = np.random.default_rng(13)
    n_topics = 12
    frozen = freeze(sparse_topic_word(rng, n_topics, 50, density=0.4), 0.5, "mean")
    batch = random_batch(rng, 20, 50)
    seeds = batch.doc_seeds(5, 0)
    token_starts = batch.token_starts()
    initial = rng.integers(0, n_topics, int(token_starts[-1])).astype(np.int32)
    cold_docs = [0, 7, 19]
    for d in cold_docs:
        initial[token_starts[d]: token_starts[d + 1]] = -1

    def run(initial):
        return gibbs_sample(batch, frozen, seeds, alpha=0.1, burnin=0, samples=1, sampler="word-major",
                            n_workers=2, initial=initial)

    cold, warm = run(None), run(initial)
    for d in range(batch.n_docs):
        n_tokens = int(token_starts[d + 1] - token_starts[d])
        same = all(np.array_equal(a, b) for a, b in zip(document_output(cold, d, n_tokens),
                                                          document_output(warm, d, n_tokens)))
        assert same == (d in cold_docs), d


@pytest.mark.slow
def test_a_chain_started_anywhere_reaches_the_exact_posterior():
    """Copies of a short document, each started from an arbitrary assignment: after the burn-in
    the saved sweeps follow the exact posterior (as tests/test_alias_gibbs.py's cold starts)."""
    from .test_gibbs import counts_per_copy, short_document_copies

    alpha, n_copies = 0.2, 20_000
    batch, frozen, exact = short_document_copies([0, 0, 1, 3], 3, 0.6, alpha, 0.5, n_copies, seed=14)
    initial = np.zeros(4 * n_copies, np.int32)  # every token in topic 0
    # 30 burn-in sweeps, as the cold starts there: after 8 the start still shows (0.02 here)
    stats = gibbs_local_step(batch, frozen, batch.doc_seeds(7, 0), alpha=alpha, burnin=30, samples=4,
                             sampler="word-major", n_workers=2, previous_topics=initial)
    estimate = counts_per_copy(stats.words, stats.topics, stats.values, n_copies, 3)
    np.testing.assert_allclose(estimate, exact, atol=0.012)


@pytest.mark.parametrize("options, message", [
    ({"sampler": "buckets", "warm_start": True}, "--warm-start: the buckets sampler starts every chain afresh"),
    ({"warm_start": True, "exclude_own": False}, "--warm-start continues each document's chain"),
])
def test_a_warm_start_that_cannot_be_kept_is_refused_before_training(options, message):
    with pytest.raises(ValueError, match=message):
        TrainSettings(n_topics=5, epochs=2, **options).validate()


def test_warm_starts_are_the_default_of_revisiting_runs_only():
    assert TrainSettings(n_topics=5, epochs=2).step.warm_start
    assert not TrainSettings(n_topics=5, epochs=1).step.warm_start
    assert not TrainSettings(n_topics=5, epochs=2, sampler="buckets").step.warm_start
