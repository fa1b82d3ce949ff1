"""Threads that follow the cores other processes leave free: the in-process engine's default.

Two threads over the pieces of a minibatch wait for each other at every barrier: beside one
other busy process on two cores, each runs about half the time and the run goes slower than one
thread alone would (benchmarks/RESULTS.md, "Sharing the machine"). So by default (`--workers 0`)
a run measures, every `window` seconds, how much of the cores it may use went to other processes

    others = (busy seconds of those cores - this process's CPU seconds) / wall seconds

(busy: user, nice, system, interrupts and steal, the hypervisor's other guests: /proc/stat) and
runs as many threads as that leaves free, rounded, between 1 and all it may use. A neighbour that
yields (niced, in the run's own session) still looks busy while it has a core the run left idle,
so below all cores the run tries all of them for one window every `probe_every` seconds, and
keeps them if the neighbour gives way. The model does not change: it is the same on any number
of threads (kernels/pieces.py).

`FreeCoreThreads` is the decision alone, fed clock readings (a pure state machine, tested with
made-up clocks); `read_clocks` reads the real ones.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import psutil

PROC_STAT = Path("/proc/stat")
WINDOW_SECONDS = 2.0  # long enough for /proc/stat's 10 ms ticks and a neighbour's bursts to average out
PROBE_SECONDS = 30.0  # a probe beside a busy neighbour costs one window's speed in this many seconds


@dataclass(frozen=True)
class Clocks:
    """Readings at one moment, each a running total in seconds."""

    wall: float  # monotonic
    own_cpu: float  # this process's CPU time, every thread
    busy_cpu: float  # the cores this process may use: their time busy with any process, steal included


def own_cpus() -> list[int]:
    """The CPU numbers this process may run on (its affinity; every CPU where there is none)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return list(range(psutil.cpu_count() or 1))


def read_clocks(cpus: Sequence[int]) -> Clocks:
    """The clocks now, the busy time summed over `cpus` (every CPU's where /proc/stat is missing:
    there the process may run on all of them, own_cpus)."""
    try:
        by_cpu = _busy_by_cpu(PROC_STAT.read_text())
        busy = sum(by_cpu.get(cpu, 0.0) for cpu in cpus)  # (a CPU taken offline since counts nothing)
    except OSError:  # not Linux
        t = psutil.cpu_times()
        busy = sum(getattr(t, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))
    return Clocks(time.monotonic(), time.process_time(), busy)


def _busy_by_cpu(stat: str) -> dict[int, float]:
    """Each online CPU's busy seconds by its number, from /proc/stat's "cpuN user nice system idle
    iowait irq softirq steal ..." lines (clock ticks; guest time is within user and nice, proc(5))."""
    tick = os.sysconf("SC_CLK_TCK")
    busy = {}
    for line in stat.splitlines():
        name, *ticks = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            user, nice, system, _idle, _iowait, irq, softirq, steal = (list(map(int, ticks[:8])) + [0] * 8)[:8]
            busy[int(name[3:])] = (user + nice + system + irq + softirq + steal) / tick
    return busy


class FreeCoreThreads:
    """How many threads a run should use now, from clock readings (see the module docstring).

    `observe` takes a reading and returns the threads for the work that follows: unchanged until
    `window` seconds have passed since the window began; then the cores `n_cores` less what other
    processes used in the window, rounded to the nearest whole core, at least 1 and at most
    `max_threads`; and, below max_threads, every `probe_every` seconds one window at max_threads.
    """

    def __init__(self, max_threads: int, n_cores: int, start: Clocks, window: float = WINDOW_SECONDS,
                 probe_every: float = PROBE_SECONDS):
        if max_threads < 1 or n_cores < 1:
            raise ValueError(f"need at least one thread and one core (got {max_threads}, {n_cores})")
        self.max_threads, self.n_cores = max_threads, n_cores
        self.window, self.probe_every = window, probe_every
        self.threads = max_threads
        self.start = start
        self.next_probe = start.wall + probe_every
        self.others = 0.0  # cores other processes used in the last completed window

    def observe(self, now: Clocks) -> int:
        elapsed = now.wall - self.start.wall
        if elapsed < self.window:
            return self.threads
        others_cpu = (now.busy_cpu - self.start.busy_cpu) - (now.own_cpu - self.start.own_cpu)
        self.others = max(0.0, others_cpu / elapsed)
        fitting = min(self.max_threads, max(1, math.floor(self.n_cores - self.others + 0.5)))
        if fitting == self.max_threads:
            self.threads = fitting
        elif self.threads == self.max_threads:  # a neighbour came, or stayed through a probe: the next probe later
            self.threads, self.next_probe = fitting, now.wall + self.probe_every
        elif now.wall >= self.next_probe:
            self.threads = self.max_threads
        else:
            self.threads = fitting
        self.start = now
        return self.threads
