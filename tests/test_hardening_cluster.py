"""A lost worker costs nothing, a lost cluster stops the run in one line (issue 47, item 7).

On a real cluster of worker processes, a worker killed (kill -9) at any moment, in particular
while the warm-up plugin is being registered (the scheduler's broadcast of it fails when a worker
dies under it: what aborted runs before), is survived with the model of an uninterrupted run, bit
for bit; a scheduler killed under a run ends it with one line naming the resume command, and the
run resumed on a new cluster gives the uninterrupted model."""

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

distributed = pytest.importorskip("distributed")

from bigtopics.cluster import RETRIES, ClusterLost, ScatterFailed, may_try_again  # noqa: E402
from bigtopics.executors import DaskExecutor  # noqa: E402
from bigtopics.store import open_store  # noqa: E402

from .test_cluster import SETTINGS, train_with  # noqa: E402
from .test_golden_models import model_hash  # noqa: E402

pytestmark = pytest.mark.slow


def local_cluster(n_workers=2):
    return distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                    dashboard_address=None)


def kill_a_worker(client) -> int:
    pid = min(client.run(os.getpid).values())
    os.kill(pid, signal.SIGKILL)
    return pid


class KillsAtStart(DaskExecutor):
    """Kills a worker process while the plugin that compiles the kernels is being registered
    (`moment` "registering": from inside the scheduler's handler, once its broadcast to the
    workers is under way) or just after (`moment` "registered": as the first reads are submitted)."""

    def __init__(self, *args, moment: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.moment, self.killed = moment, []

    def warm_up(self, step):
        if self.moment == "registered":
            super().warm_up(step)
            self.killed.append(kill_a_worker(self.client))
            return
        scheduler = self.client.cluster.scheduler
        registering, pid = scheduler.handlers["register_worker_plugin"], min(self.client.run(os.getpid).values())

        async def killing_a_worker_meanwhile(comm, **kwargs):
            broadcast = asyncio.ensure_future(registering(comm, **kwargs))
            await asyncio.sleep(0.5)  # the workers are compiling (seconds)
            if not broadcast.done() and not self.killed:  # (once: the plugin is registered again)
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)
            return await broadcast

        scheduler.handlers["register_worker_plugin"] = killing_a_worker_meanwhile
        try:
            super().warm_up(step)
        finally:
            scheduler.handlers["register_worker_plugin"] = registering


@pytest.mark.parametrize("moment", ["registering", "registered"])
def test_a_worker_killed_as_the_run_starts_costs_nothing(demo_store, tmp_path, moment):
    with local_cluster() as cluster, distributed.Client(cluster) as client:
        executor = KillsAtStart(client, open_store(demo_store), moment=moment)
        survived, _ = train_with(demo_store, tmp_path / "killed", executor)
        assert executor.killed
    assert survived == train_with(demo_store, tmp_path / "local")[0]


# -- a cluster of `dask scheduler` and `dask worker` processes, as docs/distributed.md starts one --
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_cluster(log, n_workers=2):
    """A scheduler and `n_workers` nanny-kept workers, each in a process group of its own."""
    address = f"tcp://127.0.0.1:{free_port()}"
    port = address.rsplit(":", 1)[1]
    processes = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                   "--port", port, "--no-dashboard"], stdout=log, stderr=log,
                                  start_new_session=True)]
    processes += [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1",
                                    "--nthreads", "1", "--no-dashboard"], stdout=log, stderr=log,
                                   start_new_session=True) for _ in range(n_workers)]
    try:
        with distributed.Client(address, timeout="60s") as client:
            if n_workers:
                client.wait_for_workers(n_workers, timeout=120)
    except BaseException:
        stop(processes)
        raise
    return address, processes


def newest_checkpoint(run) -> int:
    return max((int(path.name.split("-")[1].split(".")[0]) for path in (run / "checkpoints").glob("step-*.ckpt")),
               default=-1)


def stop(processes):
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


TRAIN = ["-k", str(SETTINGS["n_topics"]), "--seed", str(SETTINGS["seed"]), "--max-docs", "2400", "--batch-size",
         str(SETTINGS["batch_size"]), "--checkpoint-every", "1", "--quiet"]


def test_a_lost_scheduler_ends_the_run_in_one_line_and_resume_gives_the_model(demo_store, tmp_path):
    run = tmp_path / "run"
    with open(tmp_path / "cluster.log", "w") as log:
        address, processes = start_cluster(log)
        try:
            driver = subprocess.Popen([sys.executable, "-m", "bigtopics.cli", "train", str(demo_store), "-o", str(run),
                                       *TRAIN, "--scheduler", address], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 300
            while newest_checkpoint(run) < 2 and time.monotonic() < deadline:
                assert driver.poll() is None, driver.stderr.read()
                time.sleep(0.1)
            os.killpg(processes[0].pid, signal.SIGKILL)  # the scheduler
            killed = time.monotonic()
            _, stderr = driver.communicate(timeout=180)
            assert time.monotonic() - killed < 120
        finally:
            stop(processes)
        assert driver.returncode == 1
        assert stderr.strip().count("\n") == 0, stderr
        assert f"scheduler {address} stopped answering" in stderr
        assert stderr.rstrip().endswith(f"resume with bigtopics train --resume {run} --scheduler {address}"), stderr
        address, processes = start_cluster(log)
        try:
            resumed = subprocess.run([sys.executable, "-m", "bigtopics.cli", "train", "--resume", str(run),
                                      "--scheduler", address, "--quiet"], capture_output=True, text=True, timeout=600)
        finally:
            stop(processes)
    assert resumed.returncode == 0, resumed.stderr
    assert model_hash(run) == train_with(demo_store, tmp_path / "local", max_docs=2400)[0]


def test_what_is_tried_again_and_what_ends_the_run(tmp_path):
    """may_try_again on a real scheduler: a lost worker's errors (a closed comm, a cancelled
    future, a scatter that missed, a connection that timed out) are tried again RETRIES times,
    then end the run as ClusterLost; a task's own error is raised as it is; once the scheduler is
    gone, ClusterLost, within Dask's reconnect timeout."""
    from distributed.comm import CommClosedError

    with open(tmp_path / "cluster.log", "w") as log:
        address, processes = start_cluster(log, n_workers=0)
        try:
            with distributed.Client(address, timeout="3s") as client:
                for error in (CommClosedError("in <TCP (closed) ConnectionPool.register_worker_plugin>: closed"),
                              distributed.client.FutureCancelledError("k", "lost"), ScatterFailed("gone"),
                              OSError("Timed out trying to connect to tcp://10.0.0.1:1234 after 30 s")):
                    assert may_try_again(client, error, 0)
                    with pytest.raises(ClusterLost, match=f"{RETRIES + 1} tries in a row"):
                        may_try_again(client, error, RETRIES)
                for error in (FileNotFoundError("no such chunk"), ValueError("corrupt"), KeyError("x")):
                    assert not may_try_again(client, error, 0)
                stop(processes)
                start = time.monotonic()
                with pytest.raises(ClusterLost, match=f"scheduler {address} stopped answering"):
                    may_try_again(client, CommClosedError("Stream is closed"), 0)
                assert time.monotonic() - start < 30
        finally:
            stop(processes)
