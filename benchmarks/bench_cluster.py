"""Training on a Dask cluster against the in-process engine, and what the cluster's parts cost.

    python benchmarks/bench_cluster.py                     # Gutenberg books, 1000-token sections
    python benchmarks/bench_cluster.py --store my.zarr -k 100 -k 1000 --json out.json

For each K, two children train one epoch from an empty table with the same settings: one in
process with all cores as threads, one with `--cluster local:N` (N single-threaded worker
processes, N = all cores). Kernels are compiled before the clock starts, on the driver and (by
the worker plugin) on every worker. Printed per K: seconds per epoch of each and their ratio; the
bytes sent to the workers and received from them per minibatch against the table's size at the
end and against a dense K x V float64 matrix (what Spark MLlib's online LDA ships every step);
the driver's own time per minibatch (submitting the tasks, gathering, the global step) as the
serial part; and the workers' time per kind of task (Dask's task stream: run_shard samples and
applies the last update, topic-word-update merges a slice of the exchange) and moving inputs
between them. The two models are compared bit for bit.

A projection of an epoch of the core paper's corpus (33 billion words in 44 million sections) at
the last K, in process on 16 cores and on 8, 32 and 128 machines of 16 cores, follows from these
parts (the model and its assumptions: cluster_model.py), with minibatches of --batch-size and
with minibatches that grow with the cluster (one more cluster run at --grown-batch-size measures
how the update grows with the minibatch).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cluster_model import Parts, epoch_hours, in_process_hours

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "gutenberg_books" / "docs.jsonl.gz"
PAPER_TOKENS, PAPER_DOCS = 33e9, 44e6
MACHINES, CORES_PER_MACHINE = (8, 32, 128), 16


def epoch_child(store: str, run: str, k: int, batch_size: int, cluster: str | None) -> dict:
    """Train one epoch at K in process or on `cluster`; the figures of the loop alone."""
    import hashlib

    import numpy as np
    import zarr

    from bigtopics.executors import make_executor
    from bigtopics.executors.warmup import compile_step
    from bigtopics.memory import peak_rss_bytes
    from bigtopics.settings import TrainSettings
    from bigtopics.store import open_store
    from bigtopics.trainer import Trainer

    settings = TrainSettings(n_topics=k, batch_size=batch_size, epochs=1, checkpoint_every="1000000")
    compile_step(settings.step)
    store_ = open_store(store)
    executor = make_executor(store_, cluster=cluster)
    if cluster:  # compile on every worker now, not inside the timed loop
        executor.warm_up(settings.step)
    trainer = Trainer(store, run, settings, quiet=True, snapshot_seconds=1e9, executor=executor)
    figures = executor.metrics()
    if cluster:
        from distributed import get_task_stream

        close, executor.close = executor.close, lambda: None  # the run ends it; its task stream is read after
        with get_task_stream(executor.client) as stream:
            trainer.run()
        task_seconds = worker_seconds(stream.data)
        per_task = scheduler_seconds_per_task(executor.client)
        close()
    else:
        trainer.run()
    st = trainer.state
    group = zarr.open_group(Path(run) / "model.zarr", mode="r")
    digest = hashlib.sha256(b"".join(np.asarray(group[name][:]).tobytes() for name in
                                     ("topic_totals", "word_topic/indptr", "word_topic/indices", "word_topic/data")))
    phases = trainer.phase_seconds
    record = {"k": k, "cluster": cluster, "seconds": st.seconds, "minibatches": st.step, "tokens": st.tokens_seen,
              "docs": st.docs_seen, "table_entries": trainer.table.n_entries, "table_bytes": trainer.table.nbytes(),
              "dense_bytes": k * store_.n_words * 8, "phase_seconds": phases, "model_sha256": digest.hexdigest(),
              "peak_rss_mib": peak_rss_bytes(include_children=False) / 2**20}
    if cluster:
        figures = {**executor.metrics(), **executor.figures}
        record["cluster_figures"] = figures
        record["task_seconds"] = task_seconds
        record["scheduler_per_task"] = per_task
    return record


def worker_seconds(stream: list[dict]) -> dict:
    """The workers' seconds computing each kind of task and moving their inputs, summed over the
    run, from Dask's task stream: {"run_shard": .., "topic-word-update" (the exchange's merges):
    .., ..., "transfer": ..}."""
    from dask.utils import key_split

    seconds: dict[str, float] = {}
    for task in stream:
        for part in task["startstops"]:
            name = key_split(task["key"]) if part["action"] == "compute" else part["action"]
            seconds[name] = seconds.get(name, 0.0) + part["stop"] - part["start"]
    return seconds


def run_child(spec: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def scheduler_seconds_per_task(client, n: int = 2000) -> float:
    """The cluster's cost per task, submitting and gathering `n` tasks that do nothing."""
    client.gather(client.map(abs, range(-50, 0)))  # warm
    start = time.perf_counter()
    client.gather(client.map(abs, range(-n, 0)))
    return (time.perf_counter() - start) / n


def measured_parts(local: dict, remote: dict, grown: dict | None) -> Parts:
    """The model's parts (cluster_model.py) from an in-process run and a cluster run at the same
    K (and, for how the update grows with the minibatch, a cluster run at a larger one)."""
    cores = os.cpu_count() or 1
    n = local["minibatches"]
    step = local["phase_seconds"].get("global_step", 0) / n
    local_serial = sum(local["phase_seconds"].get(name, 0) for name in ("freeze", "global_step"))
    f = remote["cluster_figures"]
    m = remote["minibatches"]
    gamma = 1.0
    if grown is not None:
        g = grown["cluster_figures"]
        ratio = (g["update_entries"] / grown["minibatches"]) / (f["update_entries"] / m)
        gamma = math.log(ratio) / math.log((grown["docs"] / grown["minibatches"]) / (remote["docs"] / m))
    merging = remote["task_seconds"].get("topic-word-update", 0)
    return Parts(docs=remote["docs"] / m, tokens=remote["tokens"] / m,
                 sample_cpu_per_token=(local["seconds"] - local_serial) * cores / local["tokens"],
                 step_seconds=step, update_entries=f["update_entries"] / m,
                 merge_seconds_per_entry=merging / max(f["shard_entries"], 1),
                 scheduler_per_task=remote["scheduler_per_task"], gamma=gamma)


def project(parts: Parts, k: int, batch_size: int) -> list[str]:
    """An epoch of the paper's corpus in process and on M machines of 16 cores, from the parts."""
    lines = [f"projection, K={k} (benchmarks/cluster_model.py): per minibatch of {parts.docs:.0f} sections "
             f"{parts.update_entries:,.0f} update entries (growing as docs^{parts.gamma:.2f}), global step "
             f"{parts.step_seconds * 1e3:.1f} ms, sampling {parts.sample_cpu_per_token * 1e9:.0f} ns a token, merge "
             f"{parts.merge_seconds_per_entry * 1e9:.0f} ns a shard entry, "
             f"{parts.scheduler_per_task * 1e3:.2f} ms a task"]
    alone = in_process_hours(parts, CORES_PER_MACHINE, PAPER_DOCS, PAPER_TOKENS, batch_size)
    lines.append(f"  in process, 1 machine of {CORES_PER_MACHINE} cores: {alone:6.2f} h")
    for grow in (False, True):
        for machines in MACHINES:
            docs = batch_size * (max(machines // 8, 1) if grow else 1)
            hours, shares = epoch_hours(parts, machines, CORES_PER_MACHINE, PAPER_DOCS, PAPER_TOKENS, docs)
            lines.append(f"  {machines:4d} machines, {docs:6d} sections a minibatch: {hours:6.2f} h  ("
                         + ", ".join(f"{name} {share:.2f}" for name, share in shares.items()) + ")")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="an existing store (default: the Gutenberg books in 1000-token sections)")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "bigtopics-bench"))
    parser.add_argument("-k", "--topics", type=int, action="append", help="K values (default 100 1000 2000)")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--workers", type=int, action="append",
                        help="worker processes of the LocalCluster (repeatable; default: one per core)")
    parser.add_argument("--grown-batch-size", type=int, default=4096,
                        help="a second cluster run at the last K with this minibatch size, for how the update "
                             "grows with it (0: none)")
    parser.add_argument("--json", help="write every run's figures to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.child:
        print(json.dumps(epoch_child(**json.loads(args.child))))
        return
    from peers import ensure_store

    cores = os.cpu_count() or 1
    store = args.store or str(ensure_store(DEFAULT_CORPUS, Path(args.cache), 1000))
    results = []
    with tempfile.TemporaryDirectory(dir=args.cache) as work:
        def child(k: int, cluster: str | None, batch_size: int = args.batch_size) -> dict:
            start = time.monotonic()
            record = run_child({"store": store, "run": str(Path(work) / f"k{k}-{cluster}-{batch_size}"), "k": k,
                                "batch_size": batch_size, "cluster": cluster})
            return {**record, "wall_seconds": time.monotonic() - start}

        for k in args.topics or [100, 1000, 2000]:
            local = child(k, None)
            for workers in args.workers or [cores]:
                remote = child(k, f"local:{workers}")
                report(k, local, remote, cores)
                results.append({"k": k, "workers": workers, "in_process": local, "cluster": remote})
        grown = None
        if args.grown_batch_size and "update_entries" in results[-1]["cluster"]["cluster_figures"]:
            grown = child(results[-1]["k"], f"local:{results[-1]['workers']}", args.grown_batch_size)
            results[-1]["grown"] = grown
    last = results[-1]
    if "update_entries" in last["cluster"]["cluster_figures"]:  # (not measured before the exchange)
        for line in project(measured_parts(last["in_process"], last["cluster"], grown), last["k"], args.batch_size):
            print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def report(k: int, local: dict, remote: dict, cores: int) -> None:
    f = remote["cluster_figures"]
    n = remote["minibatches"]
    phases = remote["phase_seconds"]
    rows_ms, step_ms = phases.get("freeze", 0) / n * 1e3, phases.get("global_step", 0) / n * 1e3
    driver = rows_ms + step_ms + f["driver_seconds"] / n * 1e3
    print(f"K={k:5d}: epoch {local['seconds']:.1f} s in process ({cores} threads), {remote['seconds']:.1f} s "
          f"on {f['workers']} workers = {remote['seconds'] / local['seconds']:.2f}x; same model: "
          f"{local['model_sha256'] == remote['model_sha256']}", flush=True)
    print(f"         per minibatch: sent {f['bytes_sent_per_minibatch'] / 2**20:.2f} MiB, received "
          f"{f['bytes_received_per_minibatch'] / 2**20:.2f} MiB; table {remote['table_bytes'] / 2**20:.1f} MiB "
          f"({remote['table_entries']:,} entries), dense K x V x 8 {remote['dense_bytes'] / 2**20:.0f} MiB; "
          f"update {f.get('update_entries', 0) / n:,.0f} entries, shards {f.get('shard_entries', 0) / n:,.0f}",
          flush=True)
    print(f"         driver per minibatch {driver:.1f} ms (previous visits {rows_ms:.1f}, tasks and gathering "
          f"{f['driver_seconds'] / n * 1e3:.1f}, global step {step_ms:.1f}); waiting on workers "
          f"{f['wait_seconds'] / n * 1e3:.0f} ms", flush=True)
    tasks = ", ".join(f"{name} {seconds / n * 1e3:.1f}" for name, seconds in
                      sorted(remote.get("task_seconds", {}).items(), key=lambda item: -item[1]))
    print(f"         workers' ms per minibatch, all workers summed: {tasks}; "
          f"{remote.get('scheduler_per_task', 0) * 1e3:.2f} ms a task", flush=True)


if __name__ == "__main__":
    main()
