"""Threads that follow the cores other processes leave free (bigtopics/free_cores.py): the
decision on made-up clocks, the real clocks, and a run beside real busy processes."""

import os
import subprocess
import sys
import time

import pytest

from bigtopics.free_cores import Clocks, FreeCoreThreads, _busy_by_cpu, own_cpus, read_clocks
from bigtopics.rundir import read_metrics
from bigtopics.settings import TrainSettings
from bigtopics.trainer import Trainer

from .test_hardening_disk import assert_same_model, model_arrays


class Machine:
    """Two cores, this process and a neighbour, their clocks moved by hand: each second the run
    uses `own` cores and the neighbour `others`."""

    def __init__(self):
        self.now = Clocks(0.0, 0.0, 0.0)

    def run(self, seconds: float, own: float, others: float) -> Clocks:
        n = self.now
        self.now = Clocks(n.wall + seconds, n.own_cpu + own * seconds, n.busy_cpu + (own + others) * seconds)
        return self.now


def follow(machine, **options):
    return FreeCoreThreads(max_threads=2, n_cores=2, start=machine.now, window=2.0, probe_every=30.0, **options)


def test_a_quiet_machine_keeps_every_thread():
    m = Machine()
    f = follow(m)
    for _ in range(20):
        assert f.observe(m.run(1.0, own=1.9, others=0.3)) == 2  # a daemon's 0.3 of a core leaves 1.7: 2


def test_a_neighbour_on_one_core_leaves_one_thread_after_a_window_and_its_leaving_gives_it_back():
    m = Machine()
    f = follow(m)
    assert f.observe(m.run(1.5, own=1.0, others=1.0)) == 2  # the window is not over
    assert f.observe(m.run(0.5, own=1.0, others=1.0)) == 1  # 2 s: the neighbour used a core of two
    assert f.others == pytest.approx(1.0)
    for _ in range(5):
        assert f.observe(m.run(2.0, own=1.0, others=1.0)) == 1
    assert f.observe(m.run(2.0, own=1.1, others=0.0)) == 2  # gone


def test_two_neighbours_leave_one_thread():
    m = Machine()
    f = follow(m)
    assert f.observe(m.run(2.0, own=0.67, others=1.33)) == 1


def test_a_neighbour_that_yields_gives_the_cores_back_at_the_probe():
    """A niced neighbour takes the core the run leaves idle and looks busy; asked for it (the
    probe, every 30 s), it gives it back and the run keeps all its threads."""
    m = Machine()
    f = follow(m)
    assert f.observe(m.run(2.0, own=1.0, others=1.0)) == 1
    threads = [f.observe(m.run(2.0, own=1.0, others=1.0)) for _ in range(14)]  # 28 s more
    assert threads == [1] * 14
    assert f.observe(m.run(2.0, own=1.0, others=1.0)) == 2  # 30 s after it went down: the probe
    for _ in range(10):
        assert f.observe(m.run(2.0, own=1.95, others=0.05)) == 2  # the neighbour yields


def test_a_neighbour_that_keeps_its_core_fails_the_probe_and_the_next_comes_later():
    m = Machine()
    f = follow(m)
    assert f.observe(m.run(2.0, own=1.0, others=1.0)) == 1
    threads = [f.observe(m.run(2.0, own=1.0, others=1.0)) for _ in range(40)]
    assert threads.count(2) == 2  # one window at 2 threads every 30 s, back to 1 after each
    first, second = [i for i, t in enumerate(threads) if t == 2]
    assert (second - first) * 2.0 == pytest.approx(32.0)  # 30 s after the failed probe, at a window's end
    assert threads[first + 1] == 1


def test_a_run_of_one_thread_stays_at_one_and_no_thread_is_refused():
    m = Machine()
    f = FreeCoreThreads(max_threads=1, n_cores=2, start=m.now, window=2.0)
    assert all(f.observe(m.run(2.0, own=0.2, others=0.0)) == 1 for _ in range(5))
    with pytest.raises(ValueError):
        FreeCoreThreads(max_threads=0, n_cores=2, start=m.now)


def test_the_real_clocks_count_this_process_busy():
    """Spinning here for 0.5 s: the cores' busy time grows by at least what this process used
    (it runs on them), and this process's CPU time by about the wall time."""
    cpus = own_cpus()
    assert cpus and set(cpus) <= set(range(os.cpu_count()))
    before = read_clocks(cpus)
    while time.monotonic() - before.wall < 0.5:
        pass
    after = read_clocks(cpus)
    own, busy = after.own_cpu - before.own_cpu, after.busy_cpu - before.busy_cpu
    assert own == pytest.approx(after.wall - before.wall, rel=0.3)
    assert busy >= own - 0.05  # /proc/stat counts in 10 ms ticks


def test_busy_time_is_read_by_cpu_number_with_a_cpu_offline():
    """/proc/stat lists online CPUs only: with CPU 1 offline its lines are cpu0, cpu2, cpu3; busy is
    user + nice + system + irq + softirq + steal (not idle, iowait, or guest, already in user)."""
    tick = os.sysconf("SC_CLK_TCK")
    stat = ("cpu  900 0 90 9000 9 0 0 0 0 0\n"
            "cpu0 100 10 20 1000 50 1 2 3 40 0\n"
            "cpu2 200 0 0 3000 0 0 0 0 0 0\n"
            "cpu3 7 0 0\n"  # an old kernel's shorter line
            "intr 12345 0 0\nctxt 999\n")
    busy = _busy_by_cpu(stat)
    assert busy == {0: 136 / tick, 2: 200 / tick, 3: 7 / tick}


SPIN = "while True:\n    pass\n"


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) != 2, reason="the figures below are those of two cores")
def test_a_run_beside_busy_processes_drops_to_one_thread_and_trains_the_same_model(demo_store, tmp_path):
    """Two busy processes in another session (as another user's jobs: this kernel shares the
    cores between sessions) leave this run about two thirds of a core: its default threads drop
    to one, and the model is the one two fixed threads train."""
    settings = dict(n_topics=20, batch_size=32, epochs=3, seed=5, checkpoint_every="1000")
    fixed = Trainer(demo_store, tmp_path / "fixed", TrainSettings(workers=2, **settings), quiet=True)
    fixed.run()
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True) for _ in range(2)]
    try:
        time.sleep(0.5)
        following = Trainer(demo_store, tmp_path / "following", TrainSettings(workers=0, **settings), quiet=True,
                            report_seconds=0)
        following.executor.free_cores.window = 0.5  # several windows in a short run
        following.run()
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    threads = [r["threads"] for r in read_metrics(following.run_dir / "metrics.jsonl") if "threads" in r]
    assert 1 in threads and set(threads) <= {1, 2}
    assert_same_model(following.run_dir, model_arrays(fixed.run_dir))
