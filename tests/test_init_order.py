"""gibbs --init-order: the sequential initialisation from the store's first token (the most
frequent word) or from its last (the rarest), for every sampler (kernels/gibbs.py,
kernels/alias_gibbs.py)."""

import numpy as np
import pytest
from steps import gibbs_local_step

from bigtopics.settings import TrainSettings

from .test_gibbs import counts_per_copy, freeze, replicated_batch, short_document_copies

SAMPLER_OPTIONS = [{"sampler": "buckets"}, {"sampler": "alias"}, {"sampler": "mh", "mh_steps": 4},
                   {"sampler": "word-major"}]


@pytest.mark.parametrize("options", SAMPLER_OPTIONS)
def test_rare_first_places_a_shared_word_with_the_rare_words_topic(options):
    # Word 0 is equally likely in both topics (a function word), word 1 only in topic 1. A document
    # of twenty 0s and one 1: placed in store order, the 0s pile into whichever topic the first
    # drew (half the documents: topic 0) and one sweep cannot move the pile; placed rarest first,
    # the 1 goes to topic 1 and the 0s follow it.
    dense = np.array([[50.0, 0.0, 50.0], [50.0, 50.0, 0.0]])
    frozen = freeze(dense, eta=0.001, estimate="mean")
    batch = replicated_batch(np.array([0] * 20 + [1]), 400)
    share = {}
    for order in ("store", "rare-first"):
        stats = gibbs_local_step(batch, frozen, batch.doc_seeds(3, 0), alpha=0.01, burnin=0, samples=1,
                                 init_order=order, **options)
        in_topic = {k: stats.values[(stats.words == 0) & (stats.topics == k)].sum() for k in (0, 1)}
        share[order] = in_topic[1] / (in_topic[0] + in_topic[1])
    assert share["rare-first"] > 0.95
    assert 0.3 < share["store"] < 0.7


@pytest.mark.parametrize("options", SAMPLER_OPTIONS)
def test_rare_first_samples_the_same_posterior(options):
    alpha, n_copies = 0.2, 6000
    batch, frozen, exact = short_document_copies([0, 0, 1, 3], 3, 0.6, alpha, 0.5, n_copies, estimate="mean")
    stats = gibbs_local_step(batch, frozen, batch.doc_seeds(7, 0), alpha=alpha, burnin=20,
                             samples=4, init_order="rare-first", n_workers=2, **options)
    estimate = counts_per_copy(stats.words, stats.topics, stats.values, n_copies, 3)
    np.testing.assert_allclose(estimate, exact, atol=0.03)
    assert stats.values.sum() == pytest.approx(4 * n_copies)


def test_an_unknown_init_order_is_one_line_naming_the_option():
    settings = TrainSettings(n_topics=4, init_order="shuffled")
    with pytest.raises(ValueError, match="--init-order: unknown order 'shuffled'; choose one of store, rare-first"):
        settings.validate()
    assert TrainSettings(n_topics=4).step_options["init_order"] == "store"
