"""The sparse Gibbs local step against dense references."""


import numpy as np
import pytest
from numba import njit
from steps import gibbs_local_step

from bigtopics.frozen import FrozenTopics
from bigtopics.kernels import pieces
from bigtopics.kernels.doc_state import add_token as _add_token
from bigtopics.kernels.doc_state import document_scratch
from bigtopics.kernels.evaluate import word_mass
from bigtopics.kernels.frozen import lookup
from bigtopics.kernels.gibbs import (
    MAX_CHANGES,
    SCAN_PER_DOC_TOPIC,
    STALE_SHARE,
    cache_share,
    change_scratch,
    draw_token,
    draw_topic,
    forget_share,
    note_change,
    scans,
)
from bigtopics.kernels.rng import stream_seed
from bigtopics.kernels.sparse_stats import merge_pairs
from bigtopics.kernels.special import digamma
from bigtopics.minibatch import Minibatch

from . import naive


def sparse_topic_word(rng, n_topics, n_words, density=0.3):
    dense = rng.gamma(0.5, 10.0, size=(n_topics, n_words)) * (rng.random((n_topics, n_words)) < density)
    return dense


def freeze(dense, eta, estimate="geometric"):
    n_topics, n_words = dense.shape
    rows = [np.nonzero(dense[:, w])[0] for w in range(n_words)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    topics = np.concatenate(rows)
    values = np.concatenate([dense[r, w] for w, r in enumerate(rows)])
    return FrozenTopics.from_rows(np.arange(n_words), indptr, topics, values, dense.sum(1), eta, n_words, estimate)


def test_digamma_matches_reference():
    for x in [1e-3, 0.1, 0.5, 1.0, 2.5, 9.9, 10.0, 37.0, 1e6]:
        assert digamma(x) == pytest.approx(naive.digamma(x), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("estimate", ["mean", "geometric"])
def test_frozen_topics_split_equals_the_dense_estimate(estimate):
    rng = np.random.default_rng(1)
    dense = sparse_topic_word(rng, 7, 30)
    frozen = freeze(dense, 0.4, estimate)
    rebuilt = np.repeat(frozen.smoothing[:, None], 30, axis=1)
    for w in range(30):
        lo, hi = frozen.row_indptr[w], frozen.row_indptr[w + 1]
        rebuilt[frozen.row_topics[lo:hi], w] += frozen.row_coef[lo:hi]
    np.testing.assert_allclose(rebuilt, naive.beta_estimate(dense, 0.4, estimate), rtol=1e-11)


# Document topics for which every word's row is looked up (rows of ~28 topics > SCAN_PER_DOC_TOPIC
# x 1) or scanned (rows <= SCAN_PER_DOC_TOPIC x 20): the two ways a draw finds the word's mass.
BRANCH_DOC_TOPICS = {"lookup": [4], "scan": list(range(0, 40, 2))}


def conditional_case(branch, n_topics=40, doc_topic_ids=None):
    """(dense N, frozen view, other tokens' topics, n_dk, doc_topics, doc_mass) for V = 5 and the
    document topics of BRANCH_DOC_TOPICS[branch] unless given, holding 1, 2, 3, 1, ... tokens."""
    rng = np.random.default_rng(2)
    n_words = 5
    dense = sparse_topic_word(rng, n_topics, n_words, density=0.7)
    frozen = freeze(dense, eta=0.5)
    doc_topic_ids = BRANCH_DOC_TOPICS[branch] if doc_topic_ids is None else doc_topic_ids
    scanned = np.diff(frozen.row_indptr) <= SCAN_PER_DOC_TOPIC * len(doc_topic_ids)
    assert scanned.all() if branch == "scan" else not scanned.any()  # the case tests the branch it names
    other = np.repeat(doc_topic_ids, 1 + np.arange(len(doc_topic_ids)) % 3)
    n_dk = np.bincount(other, minlength=n_topics).astype(np.int32)
    doc_topics = np.zeros(n_topics, np.int32)
    doc_topics[: len(doc_topic_ids)] = doc_topic_ids
    doc_mass = float((n_dk * frozen.smoothing).sum())
    return dense, frozen, other, n_dk, doc_topics, doc_mass


@pytest.mark.parametrize("branch", BRANCH_DOC_TOPICS)
def test_draw_topic_follows_the_dense_conditional(branch):
    dense, frozen, other, n_dk, doc_topics, doc_mass = conditional_case(branch)
    n_topics, n_words = dense.shape
    alpha = 0.3
    weights = naive.exp_elog_beta(dense, 0.5)
    shared_cum, shared_topic, shared_coef = np.zeros(n_topics), np.zeros(n_topics, np.int32), np.zeros(n_topics)
    grid = (np.arange(100_000) + 0.5) / 100_000  # inverse-CDF sampling on an even grid
    view = frozen.kernel_view()
    n_doc_topics = len(BRANCH_DOC_TOPICS[branch])
    for w in range(n_words):
        draws = [draw_topic(u, w, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, view,
                            shared_cum, shared_topic, shared_coef) for u in grid]
        freq = np.bincount(draws, minlength=n_topics) / len(grid)
        np.testing.assert_allclose(freq, naive.gibbs_conditional(w, other, alpha, weights), atol=3e-5)


@njit
def draws_after_changes(n_draws, w, alpha, n_dk, doc_topics, n_doc_topics, doc_mass, changes, frozen):
    """n_draws topics for a token of word w drawn as the sampler draws the later tokens of an
    entry: the share summed for the counts given, then the changes (topic, +-1) applied to the
    counts and noted, then one draw (each from the same start, with its own random stream).
    A draw whose coef is not the topic's is returned as -1."""
    n_topics = n_dk.shape[0]
    smoothing = frozen[4]
    _, _, topic_slot, word_cum, word_topic, word_coef = document_scratch(n_topics, n_topics)
    change_slot, change_topics, change_counts, change_coef = change_scratch(n_topics)
    for j in range(n_doc_topics):
        topic_slot[doc_topics[j]] = j
    out = np.empty(n_draws, np.int64)
    for r in range(n_draws):
        counts, topics, slots, m, mass = n_dk.copy(), doc_topics.copy(), topic_slot.copy(), n_doc_topics, doc_mass
        share = cache_share(STALE_SHARE, w, scans(w, m, frozen), alpha, counts, topics, m, frozen,
                            word_cum, word_topic, word_coef, change_slot, change_topics)
        for c in range(changes.shape[0]):
            m = _add_token(changes[c, 0], changes[c, 1], counts, topics, slots, m)
            mass += changes[c, 1] * smoothing[changes[c, 0]]
            share = note_change(share, changes[c, 0], changes[c, 1], lookup(frozen[6:], w, changes[c, 0]),
                                change_slot, change_topics, change_counts, change_coef)
        _, out[r], coef, share = draw_token(stream_seed(1, 2, r), share, w, True, alpha, counts, topics, m, mass,
                                            frozen, word_cum, word_topic, word_coef, change_slot, change_topics,
                                            change_counts, change_coef)
        if coef != lookup(frozen[6:], w, out[r]):
            out[r] = -1  # the coef returned with the draw must be the topic's
        forget_share(share, change_slot, change_topics)
    return out


def change_lists(other, n_topics):
    """Changes an entry's later tokens make: topics losing their only token or one of two (items
    whose summed mass then overstates them, drawn only by rejection), others gaining, one
    losing and regaining, one new to the document; a topic left with no token (gone from the
    document's topics, its item never accepted) beside one new; and a gain in every topic, more
    than the share tracks (MAX_CHANGES of the row's topics), which makes it stale."""
    held, held_counts = np.unique(other, return_counts=True)
    single, double = held[held_counts == 1][0], held[held_counts == 2][0]
    absent = next(k for k in range(n_topics) if k not in held)
    mixed = [(single, -1), (held[-1], 1), (double, -1), (absent, 1), (single, 1), (absent, 1), (held[-1], -1)]
    lost = [(single, -1), (double, -1), (absent, 1)]
    overflow = [(k, 1) for k in range(n_topics)]
    return {name: np.array(changes, np.int64) for name, changes in
            [("mixed", mixed), ("lost", lost), ("overflow", overflow)]}


# With K = 120 rows hold about 84 topics: scanned for 20 document topics, looked up for 3.
TRACKED_DOC_TOPICS = {"lookup": [4, 9, 30], "scan": list(range(0, 40, 2))}


@pytest.mark.slow
@pytest.mark.parametrize("changes", ["mixed", "lost", "overflow"])
@pytest.mark.parametrize("branch", TRACKED_DOC_TOPICS)
def test_a_token_drawn_against_a_tracked_share_follows_the_dense_conditional(branch, changes):
    dense, frozen, other, n_dk, doc_topics, doc_mass = conditional_case(branch, 120, TRACKED_DOC_TOPICS[branch])
    n_topics, n_words = dense.shape
    alpha = 0.3
    weights = naive.exp_elog_beta(dense, 0.5)
    change = change_lists(other, n_topics)[changes]
    assert changes != "overflow" or min(np.diff(frozen.row_indptr)) > MAX_CHANGES
    after = list(other)
    for k, delta in change:
        after.remove(k) if delta < 0 else after.append(k)
    n_draws = 200_000
    for w in range(n_words):
        draws = draws_after_changes(n_draws, w, alpha, n_dk, doc_topics, len(TRACKED_DOC_TOPICS[branch]), doc_mass,
                                    change, frozen.kernel_view())
        assert draws.min() >= 0
        freq = np.bincount(draws, minlength=n_topics) / n_draws
        expected = naive.gibbs_conditional(w, np.array(after), alpha, weights)
        # binomial noise: 5 standard deviations of each topic's frequency
        np.testing.assert_array_less(np.abs(freq - expected), 5 * np.sqrt(expected * (1 - expected) / n_draws) + 1e-9)


@pytest.mark.parametrize("branch", BRANCH_DOC_TOPICS)
def test_word_mass_is_the_unnormalised_conditional_summed(branch):
    """The evaluator's sum_k (alpha + n_dk) beta[k, w] takes the same two branches as the draw."""
    dense, frozen, other, n_dk, doc_topics, doc_mass = conditional_case(branch)
    alpha = 0.3
    weights = naive.exp_elog_beta(dense, 0.5)
    for w in range(dense.shape[1]):
        got = word_mass(w, alpha, n_dk, doc_topics, len(BRANCH_DOC_TOPICS[branch]), doc_mass, frozen.kernel_view())
        assert got == pytest.approx(((alpha + n_dk) * weights[:, w]).sum(), rel=1e-11)


def replicated_batch(token_words, n_copies):
    words, counts = np.unique(token_words, return_counts=True)
    n = len(words)
    return Minibatch(np.arange(n_copies), np.arange(n_copies + 1) * n, np.tile(words, n_copies),
                     np.tile(counts, n_copies))


def short_document_copies(token_words, n_topics, density, alpha, eta, n_copies, estimate="geometric", seed=3):
    """n_copies of one short document (word ids below 4), the frozen `estimate` of a random sparse
    K x 4 table, and the exact expected (word, topic) counts of one copy under it (tests/naive.py)."""
    dense = sparse_topic_word(np.random.default_rng(seed), n_topics, 4, density=density)
    token_words = np.asarray(token_words)
    beta = naive.exp_elog_beta(dense, eta) if estimate == "geometric" else naive.mean_beta(dense, eta)
    return (replicated_batch(token_words, n_copies), freeze(dense, eta, estimate),
            naive.expected_word_topic_counts(token_words, alpha, beta))


def counts_per_copy(words, topics, counts, n_copies, n_topics):
    """Sampled (word, topic) counts summed over the copies, per copy: (4, K)."""
    estimate = np.zeros((4, n_topics))
    np.add.at(estimate, (words, topics), counts / n_copies)
    return estimate


@pytest.mark.slow
# The documents repeat words, so their later tokens are drawn against a tracked share. With K = 3
# every row is scanned. Full rows of 20 topics are looked up while the other tokens of the
# document hold one topic (a row is scanned up to 16 times the document's topics), so an entry's
# tokens switch between the branches; of 40, always looked up. The per-draw exactness of either
# branch is test_a_token_drawn_against_a_tracked_share_follows_the_dense_conditional's: a
# document of one repeated word is too forgiving to show a share left stale (tried).
@pytest.mark.parametrize("token_words, n_topics, density", [([0, 0, 1, 3], 3, 0.6), ([0, 0, 0, 1, 1, 3, 3], 3, 0.6),
                                                            ([0, 0, 0, 1], 20, 1.0), ([0, 0, 0], 40, 1.0)])
def test_gibbs_marginals_match_exact_posterior_of_a_short_document(token_words, n_topics, density):
    alpha, n_copies = 0.2, 20_000
    batch, frozen, exact = short_document_copies(token_words, n_topics, density, alpha, 0.5, n_copies)
    # 30 burn-in sweeps: after 8 the longer document still carries 0.015 of its start in both samplers
    stats = gibbs_local_step(batch, frozen, batch.doc_seeds(7, 0), alpha=alpha, burnin=30, samples=4, n_workers=2)
    estimate = counts_per_copy(stats.words, stats.topics, stats.values, n_copies, n_topics)
    np.testing.assert_allclose(estimate, exact, atol=0.012)
    # every token is counted once per saved sweep
    assert stats.values.sum() == pytest.approx(len(token_words) * n_copies)


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_merge_pairs_equals_the_serial_sum_in_segment_order(dtype):
    rng = np.random.default_rng(5)
    words = rng.integers(0, 40, 6000).astype(np.int32)
    topics = rng.integers(0, 7, 6000).astype(np.int32)
    values = (rng.integers(1, 9, 6000) if dtype == np.int32 else rng.random(6000) * 1e3).astype(dtype)
    sizes = rng.integers(0, 90, 60)  # segments with gaps between them, some empty
    starts = np.cumsum(np.concatenate([[0], sizes[:-1] + 2]))
    expected = naive.merge_pairs(words, topics, values, starts, sizes)
    for threads in (1, 2):  # the segments and words split over as many ranges as threads
        with pieces.threads_set_to(threads):
            got = merge_pairs(words, topics, values, starts, sizes, 40, 7)
        for part, want in zip(got, expected):
            np.testing.assert_array_equal(part, want)  # bit for bit: sums in segment order
