"""Training on a Dask cluster against the in-process engine, and what the cluster's parts cost.

    python benchmarks/bench_cluster.py                     # Gutenberg books, 1000-token sections
    python benchmarks/bench_cluster.py --store my.zarr -k 100 -k 1000 --json out.json

For each K, two children train one epoch from an empty table with the same settings: one in
process with all cores as threads, one with `--cluster local:N` (N single-threaded worker
processes, N = all cores). Kernels are compiled before the clock starts, on the driver and (by
the worker plugin) on every worker. Printed per K: seconds per epoch of each and their ratio; the
bytes sent to the workers and received from them per minibatch against the table's size at the
end and against a dense K x V float64 matrix (what Spark MLlib's online LDA ships every step);
and the driver's own time per minibatch (submitting the tasks, merging the shards, the global
step and sending its update) as the serial part. The two models are compared bit for bit.

A projection of an epoch of the core paper's corpus (33 billion words in 44 million sections) at
the largest K on 8, 32 and 128 machines of 16 cores follows from these figures: Amdahl's law
with the measured serial part and worker time per token, and the measured bytes per minibatch
over a 10 Gbit/s network (docs/distributed.md says what would have to change beyond that).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "gutenberg_books" / "docs.jsonl.gz"
PAPER_TOKENS, PAPER_DOCS = 33e9, 44e6
NETWORK_BYTES_PER_S = 10e9 / 8
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
    return record


def run_child(spec: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def project(local: dict, remote: dict) -> list[str]:
    """An epoch of the paper's corpus on M machines of 16 cores, from the measured parts."""
    f = remote["cluster_figures"]
    n = remote["minibatches"]
    serial = (remote["phase_seconds"].get("freeze", 0) + remote["phase_seconds"].get("global_step", 0)
              + f["driver_seconds"]) / n
    docs_per_minibatch = remote["docs"] / n
    # worker time per token: the in-process loop less its serial part, on its cores
    cores = os.cpu_count() or 1
    local_serial = local["phase_seconds"].get("freeze", 0) + local["phase_seconds"].get("global_step", 0)
    per_token = (local["seconds"] - local_serial) * cores / local["tokens"]
    bytes_per_minibatch = f["bytes_sent_per_minibatch"] + f["bytes_received_per_minibatch"]
    minibatches = PAPER_DOCS / docs_per_minibatch
    lines = [f"projection, K={remote['k']}: {minibatches:,.0f} minibatches of {docs_per_minibatch:.0f} sections; "
             f"serial {serial * 1e3:.1f} ms and {bytes_per_minibatch / 2**20:.1f} MiB on the wire per minibatch; "
             f"{per_token * 1e9:.0f} ns of worker time per token"]
    for machines in MACHINES:
        parallel = PAPER_TOKENS * per_token / (machines * CORES_PER_MACHINE)
        wire = minibatches * bytes_per_minibatch / NETWORK_BYTES_PER_S
        total = minibatches * serial + parallel + wire
        lines.append(f"  {machines:4d} machines: {total / 3600:6.1f} h  (serial {minibatches * serial / 3600:.1f} h, "
                     f"sampling {parallel / 3600:.1f} h, network {wire / 3600:.1f} h)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="an existing store (default: the Gutenberg books in 1000-token sections)")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "bigtopics-bench"))
    parser.add_argument("-k", "--topics", type=int, action="append", help="K values (default 100 1000 2000)")
    parser.add_argument("--batch-size", type=int, default=1024)
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
        for k in args.topics or [100, 1000, 2000]:
            pair = {}
            for cluster in (None, f"local:{cores}"):
                start = time.monotonic()
                pair[cluster] = run_child({"store": store, "run": str(Path(work) / f"k{k}-{cluster}"), "k": k,
                                           "batch_size": args.batch_size, "cluster": cluster})
                pair[cluster]["wall_seconds"] = time.monotonic() - start
            local, remote = pair[None], pair[f"local:{cores}"]
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
                  f"sent/table {f['bytes_sent_per_minibatch'] / remote['table_bytes']:.3f}, "
                  f"sent/dense {f['bytes_sent_per_minibatch'] / remote['dense_bytes']:.4f}", flush=True)
            print(f"         driver per minibatch {driver:.1f} ms (previous visits {rows_ms:.1f}, tasks and merge "
                  f"{f['driver_seconds'] / n * 1e3:.1f}, global step and its update {step_ms:.1f}); waiting on workers "
                  f"{f['wait_seconds'] / n * 1e3:.0f} ms", flush=True)
            results.append({"k": k, "in_process": local, "cluster": remote})
    for line in project(results[-1]["in_process"], results[-1]["cluster"]):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
