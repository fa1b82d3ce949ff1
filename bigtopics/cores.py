"""How many threads "workers" means, in one place: 0 is every core this process may run on."""

from __future__ import annotations

import os

import numba

from .kernels.pieces import set_threads


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def thread_count(workers: int) -> int:
    """The threads a kernel runs for `workers` (0: all cores), at most numba's pool."""
    return max(1, min(workers or available_cores(), numba.config.NUMBA_NUM_THREADS))


def use_threads(workers: int) -> int:
    """Run this thread's parallel kernels (kernels/pieces.py) on the threads for `workers`, and
    return how many that is."""
    n = thread_count(workers)
    set_threads(n)
    return n
