"""Training on a real Dask cluster of worker processes (executors/dask.py, and the cluster layer,
cluster.py): the same model, bit for bit, as in process, on one worker or two, after a worker is
killed mid-run, and after the driver is killed and the run resumed."""

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

distributed = pytest.importorskip("distributed")

from dask import config as dask_config  # noqa: E402
from dask.utils import key_split  # noqa: E402

from bigtopics.cli import main  # noqa: E402
from bigtopics.executors import DaskExecutor  # noqa: E402
from bigtopics.executors.dask import copies_that_do_not_fit  # noqa: E402
from bigtopics.settings import TrainSettings  # noqa: E402
from bigtopics.store import open_store  # noqa: E402
from bigtopics.trainer import Trainer  # noqa: E402

from .test_golden_models import model_hash  # noqa: E402

pytestmark = pytest.mark.slow

SETTINGS = {"n_topics": 12, "seed": 5, "max_docs": 1200, "batch_size": 300, "checkpoint_every": "1000"}


@pytest.fixture(scope="module")
def store(demo_store):
    return demo_store


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as client:
        yield client
    cluster.close()


def train_with(store, run, executor=None, **settings):
    trainer = Trainer(store, run, TrainSettings(**{**SETTINGS, **settings}), quiet=True, executor=executor)
    trainer.run()
    return model_hash(run), trainer


def dask(client, store):
    return DaskExecutor(client, open_store(store))


@pytest.mark.parametrize("settings", [{}, {"epochs": 2, "max_docs": 2400, "heldout": 30},
                                      {"local_step": "lsparse", "top_l": 3, "shard_docs": 100},
                                      {"local_step": "scvb0", "shard_docs": 128},
                                      {"epochs": 2, "max_docs": 2400, "optimize_burn_in": 1, "optimize_eta": True,
                                       "shard_docs": 100},
                                      {"epochs": 2, "max_docs": 2400, "sampler": "word-major", "warm_start": True,
                                       "shard_docs": 100}],
                         ids=["gibbs", "gibbs-exclude-own", "lsparse-shards", "scvb0-shards", "gibbs-learned-priors",
                              "word-major-warm-start-shards"])
def test_same_model_in_process_and_on_two_workers(store, client, tmp_path, settings):
    in_process, _ = train_with(store, tmp_path / "local", **settings)
    on_cluster, trainer = train_with(store, tmp_path / "dask", dask(client, store), **settings)
    assert on_cluster == in_process
    figures = trainer.executor.metrics()
    assert figures["workers"] == 2 and figures["bytes_sent_per_minibatch"] > 0
    assert figures["bytes_received_per_minibatch"] > 0


def test_same_model_on_one_worker(store, tmp_path):
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as one:
        alone, _ = train_with(store, tmp_path / "one", dask(one, store))
    cluster.close()
    assert alone == train_with(store, tmp_path / "local")[0]


class KillsWorkers(DaskExecutor):
    """Kills `victims` worker processes (their nannies start new ones) while the third
    minibatch's shards are being sampled."""

    def __init__(self, *args, victims: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.victims, self.killed = victims, False

    def _gather(self, futures):
        if self.figures["minibatches"] == 2 and not self.killed:
            self.killed = True
            for pid in sorted(self.client.run(os.getpid).values())[:self.victims]:
                os.kill(pid, signal.SIGKILL)
        return super()._gather(futures)


@pytest.mark.parametrize("victims, settings", [(1, {}), (2, {}), (2, {"epochs": 2})],
                         ids=["one-worker", "every-worker", "every-worker-exclude-own"])
def test_same_model_after_workers_are_killed_mid_run(store, tmp_path, victims, settings):
    """Killing every worker loses every copy of the scattered updates (and of `own`), as
    killing the one worker left holding them does once Dask's memory manager has dropped the
    other copies: the minibatch is submitted again."""
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as client:
        from bigtopics.store import open_store

        executor = KillsWorkers(client, open_store(store), victims=victims)
        survived, _ = train_with(store, tmp_path / "killed", executor, max_docs=2400, **settings)
        assert executor.killed
        if victims == 2:
            assert executor.metrics()["minibatches_submitted_again"] >= 1
    cluster.close()
    assert survived == train_with(store, tmp_path / "local", max_docs=2400, **settings)[0]


def test_a_lost_scatter_is_tried_again_and_a_task_error_is_not(monkeypatch):
    """run() submits a minibatch again after a cancellation or a failed scatter, RETRIES times
    at most (then ClusterLost), and never after an error of the step's own tasks (a store that
    cannot be read)."""
    from bigtopics.cluster import RETRIES, ClusterLost, ScatterFailed
    from bigtopics.executors.dask import ClusterWork

    def fails_with(*errors):
        errors = iter(errors)

        def attempt(*args):
            error = next(errors, None)
            if error is not None:
                raise error
            return "merged"
        return attempt

    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        executor, work = DaskExecutor(client, store=None), ClusterWork(None, [], [], [])
        monkeypatch.setattr(executor, "_run_shards", fails_with(
            ScatterFailed("gone"), distributed.client.FutureCancelledError("k", "lost")))
        assert executor.run(work, None, None) == "merged"
        assert executor.figures["minibatches_submitted_again"] == 2
        monkeypatch.setattr(executor, "_run_shards", fails_with(FileNotFoundError("no such chunk")))
        with pytest.raises(FileNotFoundError):
            executor.run(work, None, None)
        assert executor.figures["minibatches_submitted_again"] == 2
        monkeypatch.setattr(executor, "_run_shards", fails_with(*[ScatterFailed("gone")] * (RETRIES + 1)))
        with pytest.raises(ClusterLost, match="tries in a row"):
            executor.run(work, None, None)
        assert executor.figures["minibatches_submitted_again"] == 2 + RETRIES


def test_a_scatter_to_a_worker_removed_before_the_scheduler_heard_of_it_is_sent_again():
    """The race CI met: a direct scatter's data reached a worker, the scheduler removed the
    worker, and then the scatter told the scheduler where the data was (KeyError in
    Scheduler.update_data). Forced here on a real scheduler: the removal happens inside
    update_data's handler, before the real one runs. The scatter is sent again, to the workers
    left."""
    from bigtopics.cluster import ScatterFailed, scatter_until_sent, scattered

    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        scheduler = cluster.scheduler
        update_data, removed = scheduler.handlers["update_data"], []

        async def removing_a_holder_first(who_has, **kwargs):
            if not removed:
                holder = sorted({w for workers in who_has.values() for w in workers})[0]
                removed.append(holder)
                await scheduler.remove_worker(holder, stimulus_id="test-race", close=False)
            return update_data(who_has=who_has, **kwargs)

        scheduler.handlers["update_data"] = removing_a_holder_first
        with pytest.raises(ScatterFailed, match="left the cluster"):
            scattered(client.scatter, np.arange(5), broadcast=True, direct=True, hash=False)
        removed.clear()
        sent = scatter_until_sent(client, np.arange(7))
        assert len(removed) == 1 and np.array_equal(sent.result(), np.arange(7))


def test_every_scatter_has_its_own_keys(store, client, tmp_path, monkeypatch):
    """Two runs on one cluster each send the workers a whole table: scattered under keys of their
    own, never under the table's field names, which a second scatter would claim as a copy of
    the first's data; and named for the dashboard, which groups keys by what key_split gives, as
    the merged slices of each update are."""
    keys = []
    scatter = client.scatter

    def note(sent):
        for future in sent if isinstance(sent, (list, tuple)) else sent.values() if isinstance(sent, dict) else [sent]:
            keys.append(future.key)
        return sent

    async def noted(sending):
        return note(await sending)

    def recording(data, *args, **kwargs):
        sent = scatter(data, *args, **kwargs)
        return noted(sent) if kwargs.get("asynchronous") else note(sent)

    monkeypatch.setattr(client, "scatter", recording)
    for run in ("first", "second"):
        _, trainer = train_with(store, tmp_path / run, dask(client, store), max_docs=600)
        assert trainer.executor.figures.get("tables_sent", 0) >= 1
        keys += [future.key for _, slices, _, _ in trainer.executor.updates for future in slices]
    assert len(keys) == len(set(keys))
    assert {key_split(key) for key in keys} == {"topic-word-update", "topic-word-table"}, keys


def test_infer_parts_are_the_same_after_every_worker_is_killed(store, tmp_path):
    """The model rows scattered for each part are lost with the workers; the parts in flight
    are sent them again."""
    from bigtopics.infer import InferSettings, infer_block, infer_parts
    from bigtopics.model import load_model
    from bigtopics.store import open_store

    train_with(store, tmp_path / "run")
    model, docs = load_model(tmp_path / "run"), open_store(store)
    ranges = [(start, min(start + 100, docs.n_docs)) for start in range(0, docs.n_docs, 100)]
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as client:
        results = infer_parts(client, model, docs, ranges, InferSettings(seed=3))
        survived = dict([next(results)])
        for pid in client.run(os.getpid).values():
            os.kill(pid, signal.SIGKILL)
        survived.update(results)
    cluster.close()
    assert sorted(survived) == [start for start, _ in ranges]
    for start, stop in ranges:
        expected = infer_block(model, docs.read_docs(start, stop), InferSettings(seed=3), 1)
        assert expected.keys() == survived[start].keys()
        for name, values in expected.items():
            assert np.array_equal(values, survived[start][name]), (start, name)


def test_same_model_after_the_driver_is_killed_and_the_run_resumed(store, tmp_path):
    run = tmp_path / "run"
    command = [sys.executable, "-m", "bigtopics.cli", "train", str(store), "-o", str(run), "-k", "12", "--seed", "5",
               "--epochs", "2", "--max-docs", "2400", "--batch-size", "300", "--checkpoint-every", "1",
               "--cluster", "local:2", "--quiet"]
    driver = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while not any((run / "checkpoints").glob("*00003*")) and time.monotonic() < deadline:
        assert driver.poll() is None, driver.stderr.read().decode()
        time.sleep(0.2)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and the cluster it started
    driver.wait()
    result = subprocess.run([sys.executable, "-m", "bigtopics.cli", "train", "--resume", str(run), "--cluster",
                             "local:2"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "training on the Dask cluster at tcp://127.0.0.1:" in result.stderr, result.stderr
    assert "(2 workers); its dashboard: http://127.0.0.1:" in result.stderr, result.stderr
    expected, _ = train_with(store, tmp_path / "local", epochs=2, max_docs=2400)
    assert model_hash(run) == expected


def test_a_local_cluster_serves_its_dashboard(store):
    """--cluster local:N starts Dask's dashboard (bokeh comes with the distributed extra) on a free
    port, and the executor says where it is."""
    with DaskExecutor.from_options(open_store(store), workers=0, window_blocks=16, cluster="local:1",
                                   scheduler=None) as executor:
        where = executor.where()
        assert where.startswith("on the Dask cluster at tcp://") and "(1 worker);" in where, where
        with urllib.request.urlopen(where.split("its dashboard: ")[1], timeout=60) as page:
            assert page.status == 200 and b"Dask" in page.read()


def test_cluster_option_errors_are_one_line(store, tmp_path):
    result = CliRunner().invoke(main, ["train", str(store), "-o", str(tmp_path / "r"), "-k", "3", "--cluster",
                                       "remote:2"])
    assert result.exit_code == 2 and "give local:N" in result.output
    result = CliRunner().invoke(main, ["train", str(store), "-o", str(tmp_path / "r"), "-k", "3", "--cluster",
                                       "local:1", "--scheduler", "tcp://127.0.0.1:1"])
    assert result.exit_code == 2 and "not both" in result.output


def test_an_unreachable_scheduler_is_one_line(store, tmp_path):
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "bigtopics.cli", "train", str(store), "-o", str(tmp_path / "r"),
                             "-k", "3", "--scheduler", "tcp://127.0.0.1:9", "--quiet"], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "error:" in result.stderr, result.stderr
    assert time.monotonic() - start < 60
    assert not Path(tmp_path / "r" / "model.zarr").exists()


def test_a_worker_paused_below_its_copy_of_the_table_stops_the_run_in_one_line(store, tmp_path):
    """A worker that Dask pauses (here at 10% of 1 GiB, below what Python and numba take) runs no
    task: the run used to wait on it forever. It stops with one line and the resume command."""
    memory = {"distributed.worker.memory.pause": 0.1, "distributed.worker.memory.target": False,
              "distributed.worker.memory.spill": False, "distributed.worker.memory.terminate": False}
    with dask_config.set(memory), distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                                           memory_limit="1GiB", dashboard_address=None) as cluster:
        command = [sys.executable, "-m", "bigtopics.cli", "train", str(store), "-o", str(tmp_path / "r"), "-k", "3",
                   "--max-docs", "600", "--scheduler", cluster.scheduler_address, "--quiet"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: worker tcp://127.0.0.1:") and "cannot hold its copy of the topic-word table" in line
    assert "Dask pauses it at 10% of its memory limit of 1.0 GiB" in line, line
    resume = f"resume with bigtopics train --resume {tmp_path / 'r'} --scheduler {cluster.scheduler_address}"
    assert line.endswith(resume), line


def test_what_a_worker_needs_for_its_copy_of_the_table():
    gib = 1 << 30
    workers = {"tcp://a:1": {"memory_limit": 4 * gib, "metrics": {"memory": 2 * gib}},
               "tcp://b:1": {"memory_limit": 0, "metrics": {"memory": 10 * gib}}}
    fits = copies_that_do_not_fit(workers, {"tcp://a:1": 0.8}, int(1.2 * gib))
    assert fits == ""  # 2 + 1.2 = 3.2 GiB, Dask's pause at 80% of 4 GiB
    refusal = copies_that_do_not_fit(workers, {"tcp://a:1": 0.8}, int(1.21 * gib))
    assert refusal.startswith("worker tcp://a:1 cannot hold") and "3.2 GiB in all" in refusal, refusal
    assert copies_that_do_not_fit(workers, {"tcp://a:1": False}, 100 * gib) == ""  # it never pauses


def test_infer_on_a_running_cluster_gives_the_same_document_topics(store, client, tmp_path):
    import numpy as np
    import zarr

    from bigtopics.infer import infer

    train_with(store, tmp_path / "run")
    infer(tmp_path / "run", store, tmp_path / "local.zarr", part_tokens=40_000, quiet=True)
    infer(tmp_path / "run", store, tmp_path / "cluster.zarr", part_tokens=40_000, quiet=True,
          scheduler=client.scheduler.address)
    local, remote = (zarr.open_group(tmp_path / name, mode="r") for name in ("local.zarr", "cluster.zarr"))
    for name in ("indptr", "indices", "data", "doc_lengths"):
        np.testing.assert_array_equal(local[name][:], remote[name][:])


def test_evaluate_on_a_running_cluster_gives_the_same_scores(store, client, tmp_path):
    """The sampled documents' topics (document shares) and the held-out scores, inferred on the
    workers from the rows of each part's words, equal the in-process evaluation."""
    from bigtopics.evaluate import evaluate

    train_with(store, tmp_path / "run", heldout=40)  # scores the documents held out of training
    options = dict(store=store, sample_docs=300, heldout_docs=40, particles=2, quiet=True)
    local = evaluate(tmp_path / "run", output=tmp_path / "local.json", **options)
    remote = evaluate(tmp_path / "run", output=tmp_path / "cluster.json", scheduler=client.scheduler.address,
                      **options)
    assert local["heldout"]["n_docs"] == 40 and local["heldout"]["completion"]["tokens"] > 0
    for method in ("left-to-right", "completion"):
        assert remote["heldout"][method] == local["heldout"][method]
    assert [t["prominent_docs"] for t in remote["topics"]] == [t["prominent_docs"] for t in local["topics"]]
    assert [t["top_topic_docs"] for t in remote["topics"]] == [t["top_topic_docs"] for t in local["topics"]]
    assert sum(t["top_topic_docs"] for t in local["topics"]) == pytest.approx(1.0)


def test_evaluate_on_a_local_cluster_from_the_cli(store, tmp_path):
    train_with(store, tmp_path / "run")
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path / "run"), "--store", str(store), "--sample-docs",
                                       "200", "--cluster", "local:1", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "npmi" in result.output.lower() or "coherence" in result.output.lower()
