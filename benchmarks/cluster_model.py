"""A model of one epoch on a cluster of M machines, from parts measured on this one
(bench_cluster.py measures them and prints this projection).

One minibatch on M machines of C cores, one Dask worker of C threads on each, goes through these
steps one after another (nothing overlaps but reading, which runs ahead and is left out):

    submit      the driver submits TASKS_PER_MACHINE tasks per machine (read, describe, run, merge):
                  tasks x the scheduler's cost per task (measured: no-op tasks on this cluster)
    sample      the shards' local steps, tokens / (M C) x the sampling CPU per token (measured in
                  process on every core of this machine, so its parallel efficiency is included)
    apply       every worker applies the last update to its copy, all at once: the global step's
                  time on this machine's cores (the driver's table update is the same operation)
    exchange    the pieces of each slice to its merging worker, then merging (the merge tasks'
                  seconds per shard entry x the entries / M), then every worker fetching every merged slice:
                  the update's bytes into each worker at the network's rate
    gather      the driver gathers the merged update (its bytes at the network's rate)
    round trips 3 a minibatch (shards done, merges done, the next shards), LATENCY each
    step        the driver's global step on its own table (as `apply`) runs in the background
                  while the workers go on with the next minibatch (executors/dask.py): only what
                  outlasts the rest of that minibatch adds to it

Assumptions, written where they are made:
  - entries of the merged update grow with the minibatch's documents B as (B / B0)^gamma,
    gamma fitted from two measured minibatch sizes (1 if only one was measured: no saving);
  - the shards' entries (what is merged) are at most min(tokens, update x M): no shard holds more
    entries than the update, nor more than its tokens (an upper bound; measured ones print beside);
  - 10 Gbit/s between machines, 24 bytes an entry on the wire (word, topic, sum), LATENCY a trip;
  - the global step takes the same time on C cores as on this machine's (no credit for more
    threads: conservative where the parallel update helps).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

NETWORK_BYTES_PER_S = 10e9 / 8
LATENCY_S = 0.5e-3
BYTES_PER_ENTRY = 24
ROUND_TRIPS = 3
TASKS_PER_MACHINE = 4  # a shard's read, describe and run, and a slice's merge (single pass: no exclude-own)


@dataclass(frozen=True)
class Parts:
    """What was measured here, per minibatch of `docs` documents (B0)."""

    docs: float
    tokens: float
    sample_cpu_per_token: float  # seconds, single core
    step_seconds: float  # the global step on this machine (= applying an update to a copy)
    update_entries: float
    merge_seconds_per_entry: float  # the merge tasks' seconds (fetching included) per shard entry
    scheduler_per_task: float  # seconds
    gamma: float = 1.0  # update entries ~ docs^gamma


def minibatch_seconds(parts: Parts, machines: int, cores: int, docs: float) -> dict[str, float]:
    """Each step's seconds for one minibatch of `docs` documents on `machines` x `cores`."""
    grow = docs / parts.docs
    tokens = parts.tokens * grow
    update = parts.update_entries * grow ** parts.gamma
    shard_entries = min(tokens, update * machines)
    step = parts.step_seconds * update / parts.update_entries
    update_bytes = update * BYTES_PER_ENTRY
    serial = {
        "submit": TASKS_PER_MACHINE * machines * parts.scheduler_per_task,
        "sample": tokens * parts.sample_cpu_per_token / (machines * cores),
        "apply": step,
        "exchange": (shard_entries * BYTES_PER_ENTRY / machines + update_bytes) / NETWORK_BYTES_PER_S
        + shard_entries * parts.merge_seconds_per_entry / machines,
        "gather": update_bytes / NETWORK_BYTES_PER_S,
        "round trips": ROUND_TRIPS * LATENCY_S,
    }
    return {**serial, "step": max(0.0, step - sum(serial.values()))}


def epoch_hours(parts: Parts, machines: int, cores: int, corpus_docs: float, corpus_tokens: float,
                docs: float) -> tuple[float, dict[str, float]]:
    """Hours for an epoch of the corpus in minibatches of `docs`, and each step's share (hours)."""
    scaled = replace(parts, tokens=corpus_tokens / corpus_docs * parts.docs)
    steps = minibatch_seconds(scaled, machines, cores, docs)
    minibatches = corpus_docs / docs
    shares = {name: seconds * minibatches / 3600 for name, seconds in steps.items()}
    return sum(shares.values()), shares


def in_process_hours(parts: Parts, cores: int, corpus_docs: float, corpus_tokens: float, docs: float) -> float:
    """One machine without a cluster: sampling on every core and the global step, in turn."""
    minibatches = corpus_docs / docs
    grow = docs / parts.docs
    step = parts.step_seconds * grow ** parts.gamma
    return (corpus_tokens * parts.sample_cpu_per_token / cores + minibatches * step) / 3600
