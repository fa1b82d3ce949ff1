"""The CPU share a run actually gets, for the progress line and the metrics log.

A run with 2 threads on a machine where another busy process takes one core gets about half of
what its threads could use, and its minibatches take more than twice as long when one thread
waits for the other at every barrier. The share makes that visible where the speed is shown: this
process's CPU seconds (every thread, user and system: time.process_time) over an interval,
divided by the interval's wall seconds times the threads (those at the interval's end: by
default they follow the cores other processes leave free, free_cores.py). 100%: every thread ran
all the time; 50% on 2 threads: one core's worth. The reading-ahead thread's decompression counts
too, so the share can pass 100% a little; waiting on a slow disk lowers it as another process would.
"""

from __future__ import annotations

import time
from typing import Callable

from .executors import Executor, LocalThreads


class CpuShare:
    """The share of `threads()` cores this process got since the previous completed interval.

    An interval completes when a sample comes at least `min_seconds` after its start (a progress
    bar asks after every minibatch, too often for a share to mean much); until then a sample
    returns the last completed interval's share, or the share so far if none has completed (a
    record right after another, no time between them, keeps the share of the one before).
    """

    def __init__(self, threads: Callable[[], int], min_seconds: float = 0.0,
                 wall_clock: Callable[[], float] = time.monotonic, cpu_clock: Callable[[], float] = time.process_time):
        self.threads, self.min_seconds = threads, min_seconds
        self.wall_clock, self.cpu_clock = wall_clock, cpu_clock
        self.start_wall, self.start_cpu = wall_clock(), cpu_clock()
        self.last: float | None = None

    def sample(self) -> float:
        wall, cpu = self.wall_clock(), self.cpu_clock()
        elapsed = wall - self.start_wall
        complete = elapsed > 0 and elapsed >= self.min_seconds
        if not complete and self.last is not None:
            return self.last
        share = (cpu - self.start_cpu) / max(elapsed * self.threads(), 1e-9)
        if complete:
            self.last, self.start_wall, self.start_cpu = share, wall, cpu
        return share  # (none completed yet: the share so far)

    def record(self) -> dict:
        """The metrics log's fields: the threads and the share since the previous record."""
        return {"threads": self.threads(), "cpu_share": round(self.sample(), 3)}

    def postfix(self) -> dict:
        """The progress line's fields, e.g. threads=2, cpu=97%."""
        return {"threads": self.threads(), "cpu": f"{100 * self.sample():.0f}%"}


def cpu_shares(executor: Executor) -> tuple[CpuShare | None, CpuShare | None]:
    """The progress line's (over a second or more) and the metrics log's (since the previous
    record) CpuShare of a run in this process's threads; none for a cluster, whose threads are
    its workers' (the cluster's own metrics tell its waits)."""
    if not isinstance(executor, LocalThreads):
        return None, None

    def threads():
        return executor.n_threads

    return CpuShare(threads, min_seconds=1.0), CpuShare(threads)
