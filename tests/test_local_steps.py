"""The contract every local step keeps (local_steps/), one class run for each registered step
and sampler: a pure function of its inputs, the same result on any number of threads, one entry
per distinct (word, topic), statistics that add up to the documents' tokens, results that
survive a pickle round trip of the frozen rows and the step, and shards that merge into the
minibatch's result in document order."""

import pickle

import numpy as np
import pytest

from bigtopics.frozen import TableRows
from bigtopics.local_steps import LOCAL_STEPS
from bigtopics.minibatch import Minibatch
from bigtopics.stats import merge_results
from bigtopics.topic_word import TopicWordTable

N_TOPICS, N_WORDS = 12, 150
CASES = {
    "gibbs-buckets": ("gibbs", {"burnin": 1, "samples": 2}),
    "gibbs-alias": ("gibbs", {"burnin": 1, "samples": 2, "sampler": "alias"}),
    "gibbs-mh": ("gibbs", {"burnin": 1, "samples": 2, "sampler": "mh"}),
    "gibbs-word-major": ("gibbs", {"burnin": 1, "samples": 2, "sampler": "word-major"}),
    "gibbs-geometric": ("gibbs", {"burnin": 1, "samples": 2, "beta_estimate": "geometric"}),
    "gibbs-exclude-own": ("gibbs", {"burnin": 1, "samples": 2, "exclude_own": True}),
    "vb": ("vb", {"vb_iterations": 20}),
    "lsparse": ("lsparse", {"top_l": 3, "vb_iterations": 20}),
    "scvb0": ("scvb0", {"burnin": 2}),
}


def test_every_registered_step_has_a_case():
    assert {name for name, _ in CASES.values()} == set(LOCAL_STEPS)


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(3)
    table = TopicWordTable(N_TOPICS, N_WORDS)
    pairs = np.unique(rng.integers(0, N_WORDS, 900) * N_TOPICS + rng.integers(0, N_TOPICS, 900))
    table.update(pairs // N_TOPICS, pairs % N_TOPICS, rng.gamma(1.0, 20.0, len(pairs)), 1.0, 1.0)
    return table


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(5)
    rows = [np.unique(rng.integers(0, N_WORDS, rng.integers(1, 30))) for _ in range(157)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    return Minibatch(np.arange(4000, 4157), indptr, np.concatenate(rows), rng.integers(1, 6, indptr[-1]))


def arrays(result):
    return [result.words, result.topics, result.sums] + ([result.last_sweep] if result.last_sweep is not None else [])


def assert_same(a, b):
    assert a.divisor == b.divisor
    for x, y in zip(arrays(a), arrays(b), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("case", sorted(CASES))
class TestLocalStepContract:
    def setup_step(self, case, table, batch):
        name, options = CASES[case]
        step = LOCAL_STEPS[name](**options).resolved(epochs=1)
        step.validate(N_TOPICS)
        rows = TableRows.from_table(table, batch.distinct_words())
        return step, rows

    def run(self, step, rows, batch, seed=11, n_workers=1, eta=0.3):
        frozen = rows.freeze(eta, step.beta_estimate)
        return step.run(batch, frozen, batch.doc_seeds(seed, 2), alpha=0.1, n_workers=n_workers)

    def test_pure_function_of_its_inputs(self, case, table, batch):
        step, rows = self.setup_step(case, table, batch)
        before = [a.copy() for a in (batch.words, batch.counts, rows.pool_values, rows.topic_sums)]
        first = self.run(step, rows, batch)
        for a, b in zip(before, (batch.words, batch.counts, rows.pool_values, rows.topic_sums)):
            np.testing.assert_array_equal(a, b)
        assert_same(first, self.run(step, rows, batch))
        assert not np.array_equal(first.sums, self.run(step, rows, batch, seed=12).sums)

    def test_same_result_on_any_number_of_threads(self, case, table, batch):
        step, rows = self.setup_step(case, table, batch)
        one = self.run(step, rows, batch, n_workers=1)
        for n in (2, 3):
            assert_same(one, self.run(step, rows, batch, n_workers=n))

    def test_one_entry_per_distinct_pair_adding_up_to_the_tokens(self, case, table, batch):
        step, rows = self.setup_step(case, table, batch)
        result = self.run(step, rows, batch)
        keys = result.words * N_TOPICS + result.topics
        assert len(np.unique(keys)) == len(keys)
        assert np.all(np.diff(result.words) >= 0)  # grouped by word, ascending
        assert set(result.words.tolist()) <= set(batch.distinct_words().tolist())
        assert np.all(result.sums > 0)
        assert result.stats().values.sum() == pytest.approx(batch.n_tokens, rel=1e-9)
        if step.keeps_assignments:
            assert len(result.last_sweep) == batch.n_tokens and result.last_sweep.max() < N_TOPICS
        else:
            assert result.last_sweep is None

    def test_step_survives_a_pickle_round_trip(self, case, table, batch):
        """A cluster's workers receive the step pickled, and read rows of their own copy of the table."""
        step, rows = self.setup_step(case, table, batch)
        shipped_step = pickle.loads(pickle.dumps(step))
        assert shipped_step == step
        assert_same(self.run(step, rows, batch), self.run(shipped_step, rows, batch))

    def test_shards_with_their_own_rows_merge_in_document_order(self, case, table, batch):
        """A worker gets a shard's documents and only the rows of its words; the merge of the
        shards equals the whole minibatch exactly for a step with an exact merge, and to
        rounding otherwise (float sums grouped differently)."""
        step, rows = self.setup_step(case, table, batch)
        whole = self.run(step, rows, batch)
        seeds = batch.doc_seeds(11, 2)
        parts = []
        for lo, hi in ((0, 40), (40, 41), (41, 157)):
            shard = batch.slice(lo, hi)
            frozen = rows.subset(shard.distinct_words()).freeze(0.3, step.beta_estimate)
            parts.append(step.run(shard, frozen, seeds[lo:hi], alpha=0.1, n_workers=2))
        merged = merge_results(parts, N_TOPICS)
        np.testing.assert_array_equal(merged.words, whole.words)
        np.testing.assert_array_equal(merged.topics, whole.topics)
        if step.exact_merge:
            assert_same(merged, whole)
        else:
            np.testing.assert_allclose(merged.sums, whole.sums, rtol=1e-12)
