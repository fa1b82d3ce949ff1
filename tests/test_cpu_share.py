"""The threads a run uses and the CPU share it got (bigtopics/cpu_share.py), in the progress line
and the metrics log; and the progress line's tokens per second from the first minibatch on."""

import io
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from bigtopics.cores import thread_count
from bigtopics.cpu_share import CpuShare
from bigtopics.progress import Progress
from bigtopics.rundir import read_metrics
from bigtopics.settings import TrainSettings
from bigtopics.trainer import Trainer


class Clocks:
    """A wall clock and a CPU clock the test moves by hand."""

    def __init__(self):
        self.wall = self.cpu = 0.0

    def advance(self, wall: float, cpu: float) -> None:
        self.wall += wall
        self.cpu += cpu


def test_the_share_is_cpu_seconds_over_wall_seconds_times_threads():
    c = Clocks()
    share = CpuShare(lambda: 2, wall_clock=lambda: c.wall, cpu_clock=lambda: c.cpu)
    c.advance(wall=10, cpu=19.4)
    assert share.sample() == pytest.approx(0.97)
    assert share.record() == {"threads": 2, "cpu_share": 0.97}  # nothing more since: 0 / 0 wall
    c.advance(wall=4, cpu=4)  # one core's worth of two
    assert share.record() == {"threads": 2, "cpu_share": 0.5}
    c.advance(wall=2, cpu=1)
    assert share.postfix() == {"threads": 2, "cpu": "25%"}


def test_a_short_interval_keeps_the_last_completed_share():
    c = Clocks()
    share = CpuShare(lambda: 2, min_seconds=1.0, wall_clock=lambda: c.wall, cpu_clock=lambda: c.cpu)
    c.advance(wall=0.2, cpu=0.4)
    assert share.sample() == pytest.approx(1.0)  # none completed: the share so far
    c.advance(wall=0.8, cpu=0.6)
    assert share.sample() == pytest.approx(0.5)  # the interval of 1 s completes: (0.4 + 0.6) / (1 x 2)
    c.advance(wall=0.3, cpu=0.6)
    assert share.sample() == pytest.approx(0.5)  # 0.3 s is too short to show alone
    c.advance(wall=0.7, cpu=0.0)
    assert share.sample() == pytest.approx(0.6 / 2)


def test_the_real_clocks_agree_with_os_times():
    """Sleeping takes no CPU; spinning takes what os.times (the kernel's own count) says."""
    share = CpuShare(lambda: 1)
    time.sleep(0.3)
    assert share.sample() < 0.1
    before, start = os.times(), time.monotonic()
    share = CpuShare(lambda: 1)
    while time.monotonic() - start < 0.5:
        pass
    measured = share.sample()
    after, wall = os.times(), time.monotonic() - start
    by_os_times = (after.user + after.system - before.user - before.system) / wall
    assert measured == pytest.approx(by_os_times, abs=0.05)


@pytest.fixture(scope="module")
def run(demo_store, tmp_path_factory):
    """A run whose progress bar asks for its fields after every minibatch (a terminal), every
    field recorded with the run's state at that moment."""
    settings = TrainSettings(n_topics=8, batch_size=16, epochs=1, max_docs=160, seed=4, checkpoint_every="1000")
    trainer = Trainer(demo_store, tmp_path_factory.mktemp("share") / "run", settings, report_seconds=0)
    shown, postfix = [], trainer._postfix

    def recording_postfix():
        fields = postfix()
        shown.append((fields, trainer.state.tokens_seen, trainer.state.seconds))
        return fields

    trainer._postfix = recording_postfix

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stderr, sys.stderr = sys.stderr, Terminal()
    cpu_before, wall_before = time.process_time(), time.monotonic()
    try:
        trainer.run(overwrite=True)
    finally:
        sys.stderr = stderr
    return trainer, shown, time.process_time() - cpu_before, time.monotonic() - wall_before


def test_tokens_per_second_count_the_minibatch_just_trained(run):
    """The first minibatch's line showed tokens / 0 s (an absurd rate) while the training time was
    set after the progress line had asked for it."""
    trainer, shown, _, _ = run
    assert len(shown) == 10
    for fields, tokens, seconds in shown:
        assert seconds > 0 and tokens > 0
        assert fields["tok/s"] == f"{tokens / seconds:,.0f}"


def test_the_progress_line_shows_the_threads_and_their_cpu_share(run):
    """By default the threads are all the cores the run may use, fewer while other processes keep
    some busy (free_cores.py): each line shows those of its moment."""
    trainer, shown, _, _ = run
    most = thread_count(0)
    assert most == min(len(os.sched_getaffinity(0)), 2)  # conftest: NUMBA_NUM_THREADS=2
    for fields, _, _ in shown:
        assert 1 <= fields["threads"] <= most
        assert fields["cpu"].endswith("%") and 0 <= int(fields["cpu"][:-1]) <= 150
    line = Progress("train", postfix=trainer._postfix, log_interval=0, stream=io.StringIO()).line()
    assert f"threads={trainer.executor.n_threads}, cpu=" in line


def test_the_metrics_log_records_the_share_the_run_got(run):
    """Summed over the records, share x wall seconds x threads is the CPU the loop used: at most
    the process's CPU over the whole run (which adds starting and finishing) and most of it."""
    trainer, _, cpu_used, _ = run
    records = [r for r in read_metrics(trainer.run_dir / "metrics.jsonl") if not r.get("final")]
    assert len(records) == 10  # report_seconds=0: one record a minibatch
    assert all(1 <= r["threads"] <= thread_count(0) and 0 <= r["cpu_share"] <= 1.5 for r in records)
    seconds = [0.0] + [r["seconds"] for r in records]
    loop_cpu = sum(r["cpu_share"] * (b - a) * r["threads"] for r, a, b in zip(records, seconds, seconds[1:]))
    assert 0 < loop_cpu <= cpu_used * 1.1 + 0.05


def test_the_cli_uses_the_cores_it_may_use_and_records_them(demo_store, tmp_path):
    """`bigtopics train` under taskset -c 0 (one core) trains on 1 thread and says so."""
    if shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs taskset and 2 cores")
    subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "bigtopics.cli", "train", str(demo_store),
                    "-o", str(tmp_path / "run"), "-k", "5", "--epochs", "1", "--max-docs", "64", "--quiet"],
                   check=True, capture_output=True)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert records and all(r["threads"] == 1 and 0 <= r["cpu_share"] <= 1.5 for r in records)
