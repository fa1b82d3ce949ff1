"""Counter-based random numbers for kernels: SplitMix64.

Every document gets its own stream, seeded from (seed, epoch, document index), so what a
document samples never depends on which worker thread runs it or in which order. The state is a
plain uint64 passed in and returned, never hidden in a global.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

_GOLDEN = uint64(0x9E3779B97F4A7C15)
_MIX1 = uint64(0xBF58476D1CE4E5B9)
_MIX2 = uint64(0x94D049BB133111EB)


@njit(cache=True)
def mix64(z):
    """SplitMix64's finaliser: a bijective avalanche of a 64-bit integer."""
    z = uint64(z)
    z = (z ^ (z >> uint64(30))) * _MIX1
    z = (z ^ (z >> uint64(27))) * _MIX2
    return z ^ (z >> uint64(31))


@njit(cache=True, inline="always")
def next_uniform(state):
    """Advance the stream; returns (new_state, u) with u uniform on [0, 1) (53 random bits)."""
    state = uint64(state) + _GOLDEN
    return state, float(mix64(state) >> uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def stream_seed(seed, epoch, item):
    """Seed of the stream for one item (a document) in one epoch of a run with this seed."""
    return mix64(mix64(mix64(uint64(seed)) ^ uint64(epoch)) ^ uint64(item))


@njit(cache=True)
def stream_seeds(seed, epoch, items: np.ndarray) -> np.ndarray:
    out = np.empty(items.shape[0], np.uint64)
    for i in range(items.shape[0]):
        out[i] = stream_seed(seed, epoch, items[i])
    return out
