"""The contract every executor (executors/base.py) keeps, as one suite each registered executor
passes (zarr-python's StoreTests pattern): driven through its interface as the trainer drives it,
over a tiny store and three plans (a first visit, a second first visit, and a revisit that
continues chains from the saved assignments), it gives LocalThreads' words, tokens, previous-visit
statistics, step results and table, bit for bit."""

import numpy as np
import pytest

from bigtopics.assignments import SavedAssignments
from bigtopics.executors import EXECUTORS, LocalThreads, StepTask
from bigtopics.local_steps import LOCAL_STEPS
from bigtopics.plan import MinibatchPlan
from bigtopics.stats import SparseStats
from bigtopics.store import open_store
from bigtopics.topic_word import TopicWordTable

N_TOPICS = 8
PLANS = [MinibatchPlan(0, 0, np.arange(0, 240, dtype=np.int64)),
         MinibatchPlan(0, 1, np.arange(400, 560, dtype=np.int64)[::-1].copy()),  # any order of documents
         MinibatchPlan(1, 0, np.arange(100, 300, dtype=np.int64))]  # half of it visited before


def drive(executor, store, tmp_path, *, give_saved: bool = True, take_all_first: bool = False) -> list:
    """Everything the executor gives back for PLANS, in order, stepping the table as the trainer
    does; the saved assignments handed to `minibatches` (which may tally previous visits ahead)
    unless not `give_saved`; every work item taken before the first step if `take_all_first`."""
    step = LOCAL_STEPS["gibbs"](sampler="word-major", burnin=2, samples=2).resolved(epochs=2)
    task = StepTask(step=step, alpha=0.1, eta=0.01, seed=11, shard_docs=50)
    table = TopicWordTable(N_TOPICS, store.n_words)
    saved = SavedAssignments(store, N_TOPICS, tmp_path / "saved")
    seen = []
    try:
        works = executor.minibatches(iter(PLANS), task, saved if give_saved else None)
        for t, work in enumerate(list(works) if take_all_first else works, start=1):
            plan = executor.plan_of(work)
            previous = executor.previous_stats(work, saved)
            rows = executor.rows(work, table, previous.stats())
            result = executor.run(work, rows, task)
            saved.record(plan.doc_numbers, result.last_sweep)
            stats = result.stats()
            executor.global_step(table, stats, (1.0 + t) ** -0.51, store.n_docs / plan.n_docs)
            seen.append({"plan": plan.doc_numbers, "words": executor.words(work), "tokens": executor.n_tokens(work),
                         "previous": (previous.words, previous.topics, previous.sums),
                         "result": (result.words, result.topics, result.sums, result.divisor, result.last_sweep)})
        executor.settle()
        seen.append({"table": table.state()})
    finally:
        saved.close()
    return seen


def assert_identical(got, expected, where="") -> None:
    if isinstance(expected, dict):
        assert sorted(got) == sorted(expected), where
        for key in expected:
            assert_identical(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), where
        for i, (a, b) in enumerate(zip(got, expected)):
            assert_identical(a, b, f"{where}[{i}]")
    elif isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == expected.dtype and np.array_equal(got, expected), where
    else:
        assert got == expected, where


@pytest.fixture(scope="module")
def store(demo_store):
    return open_store(demo_store)


@pytest.fixture(scope="module")
def reference(store, tmp_path_factory):
    return drive(LocalThreads(store, workers=1), store, tmp_path_factory.mktemp("reference"), give_saved=False)


class ExecutorContract:
    """Subclass with `make(store)` for each executor; every test here then runs on it."""

    def make(self, store):
        raise NotImplementedError

    def test_gives_what_local_threads_gives_bit_for_bit(self, store, reference, tmp_path):
        executor = self.make(store)
        try:
            assert_identical(drive(executor, store, tmp_path), reference)
        finally:
            executor.close()

    def test_work_taken_ahead_of_its_steps_gives_the_same(self, store, reference, tmp_path):
        """The third plan revisits documents of the first, of the epoch before: whatever it read
        ahead, it must see the topics the first plan's step recorded."""
        executor = self.make(store)
        try:
            assert_identical(drive(executor, store, tmp_path, take_all_first=True), reference)
        finally:
            executor.close()

    def test_the_words_and_tokens_are_the_plans_documents(self, store, reference):
        for record in reference[:-1]:
            block = [store.read_docs(int(d), int(d) + 1) for d in record["plan"]]
            assert np.array_equal(record["words"], np.unique(np.concatenate([b.indices for b in block])))
            assert record["tokens"] == sum(int(b.data.sum()) for b in block)

    def test_a_global_step_that_fails_raises_by_the_time_it_settles(self, store):
        """An executor may take the global step in the background; what fails there is not lost."""
        executor = self.make(store)
        table = TopicWordTable(N_TOPICS, store.n_words)
        beyond = SparseStats(np.array([store.n_words]), np.array([0]), np.array([1.0]))
        try:
            with pytest.raises(ValueError, match="word"):
                executor.global_step(table, beyond, 0.5, 1.0)
                executor.settle()
            executor.settle()  # raised once, then settled
        finally:
            executor.close()

    def test_reports_its_metrics_as_a_dict(self, store):
        executor = self.make(store)
        try:
            assert isinstance(executor.metrics(), dict)
        finally:
            executor.close()


class TestLocalThreadsOnTwoThreads(ExecutorContract):
    def make(self, store):
        return LocalThreads(store, workers=2)


class TestDaskExecutor(ExecutorContract):
    pytestmark = pytest.mark.slow

    @pytest.fixture(autouse=True)
    def _client(self, dask_client):
        self.client = dask_client

    def make(self, store):
        return EXECUTORS["dask"](self.client, store)


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as client:
        yield client
    cluster.close()


def test_every_registered_executor_has_a_contract_case():
    cases = {"threads": TestLocalThreadsOnTwoThreads, "dask": TestDaskExecutor}
    assert set(cases) == set(EXECUTORS)
    assert all(issubclass(case, ExecutorContract) for case in cases.values())
