"""How far this machine itself lets work scale from one thread to several: the ceiling that a
measured parallel efficiency is read against (bench_epoch.py prints it beside its own).

    .venv/bin/python benchmarks/machine_scaling.py

Four kinds of work, each split into one static range per thread and timed on one thread and on
N (the same ranges; one-thread and N-thread calls alternate, best of five each, after a warm-up):

  - arithmetic: a xorshift chain per range, no memory touched;
  - random reads in cache: from a 256 KiB array per range (within any current core's L2);
  - random reads from memory: independent reads at random places of a 256 MiB array (far larger
    than the last-level cache), as a sampler's row lookups or the beta estimate's reads are;
  - random adds to memory: the same places read, added to and written back, as the global step
    adds a minibatch's statistics to the table's pool.

Efficiency = t_1 / (N t_N). Arithmetic and cache-resident work scale with the cores; work bound
by the memory's random-access throughput scales only as far as the memory system serves more
accesses at once, which the cores do not change, and on a virtual machine whose host shares its
memory with other guests that moves from one minute to the next (run it a few times).
"""

from __future__ import annotations

import time

import numba
import numpy as np
from numba import njit, prange

from bigtopics.cores import thread_count

MEMORY_BYTES = 256 * 2**20
CACHE_BYTES = 256 * 2**10  # a power of two: the reads index it by a mask
MEMORY_READS = 16_000_000
XORSHIFT_SEED = 88172645463325252  # Marsaglia's example seed for xorshift64; range p starts at it + p


@njit(inline="always")
def xorshift(x):
    """One step of Marsaglia's xorshift64 (13, 7, 17)."""
    x ^= x << np.uint64(13)
    x ^= x >> np.uint64(7)
    x ^= x << np.uint64(17)
    return x


@njit(parallel=True)
def arithmetic(n, parts):
    """n xorshift64 steps in all, n / parts per range, their low bits summed (so none is skipped)."""
    out = np.zeros(parts, np.uint64)
    for p in prange(parts):
        x = np.uint64(p + XORSHIFT_SEED)
        total = np.uint64(0)
        for _ in range(n // parts):
            x = xorshift(x)
            total += x & np.uint64(1023)
        out[p] = total
    return out


@njit(parallel=True)
def reads_in_cache(arrays, n, parts):
    """n reads in all at xorshift-random places of arrays[p] (range p's own small array)."""
    out = np.zeros(parts)
    mask = np.uint64(arrays.shape[1] - 1)
    for p in prange(parts):
        x = np.uint64(p + XORSHIFT_SEED)
        total = 0.0
        for _ in range(n // parts):
            x = xorshift(x)
            total += arrays[p, x & mask]
        out[p] = total
    return out


@njit(parallel=True)
def reads_from_memory(array, places, parts):
    """array[places[i]] summed, range p taking its share of `places`: reads that do not depend
    on each other, so a core keeps many of them in flight."""
    out = np.zeros(parts)
    n = places.shape[0]
    for p in prange(parts):
        total = 0.0
        for i in range(n * p // parts, n * (p + 1) // parts):
            total += array[places[i]]
        out[p] = total
    return out


@njit(parallel=True)
def adds_to_memory(array, places, parts):
    """array[places[i]] += 1, range p taking its share of `places`. Two ranges may hit one place
    at once and lose an add: harmless here, where only the time is kept."""
    n = places.shape[0]
    for p in prange(parts):
        for i in range(n * p // parts, n * (p + 1) // parts):
            array[places[i]] += 1.0


def efficiency_by_work(threads: int, repeat: int = 5) -> dict[str, float]:
    """t_1 / (threads t_threads) for each kind of work (module docstring); 2 <= threads <= this
    process' cores and numba's pool (thread_count(0))."""
    if not 2 <= threads <= thread_count(0):
        raise ValueError(f"cannot measure {threads} threads against 1 here (numba's pool: "
                         f"{numba.config.NUMBA_NUM_THREADS}, cores: {thread_count(0)})")
    rng = np.random.default_rng(0)
    in_cache = rng.random((threads, CACHE_BYTES // 8))
    memory = rng.random(MEMORY_BYTES // 8)
    places = rng.integers(0, len(memory), size=MEMORY_READS)
    work = {
        "arithmetic": lambda: arithmetic(100_000_000, threads),
        "random reads in cache": lambda: reads_in_cache(in_cache, 50_000_000, threads),
        "random reads from memory": lambda: reads_from_memory(memory, places, threads),
        "random adds to memory": lambda: adds_to_memory(memory, places, threads),
    }
    before = numba.get_num_threads()
    efficiency = {}
    try:
        for name, call in work.items():
            call()  # compiles, and faults the pages in
            best = {1: float("inf"), threads: float("inf")}
            for _ in range(repeat):  # alternating, so that a drift of the machine's speed hits both
                for n in best:
                    numba.set_num_threads(n)
                    start = time.perf_counter()
                    call()
                    best[n] = min(best[n], time.perf_counter() - start)
            efficiency[name] = best[1] / (threads * best[threads])
    finally:
        numba.set_num_threads(before)
    return efficiency


def describe_efficiency(efficiency: dict[str, float | list[float]], threads: int) -> str:
    """One line; an efficiency given as several measurements is shown as their range."""
    def percent(measured):
        if not isinstance(measured, list):
            return f"{measured:.0%}"
        low, high = f"{min(measured):.0%}", f"{max(measured):.0%}"
        return low if low == high else f"{low}-{high}"
    return f"this machine's own efficiency on {threads} threads against 1: " + ", ".join(
        f"{name} {percent(measured)}" for name, measured in efficiency.items())


if __name__ == "__main__":
    threads = thread_count(0)
    if threads < 2:
        print(f"one thread here (numba's pool: {numba.config.NUMBA_NUM_THREADS}): nothing to scale to")
    else:
        print(describe_efficiency(efficiency_by_work(threads), threads))
