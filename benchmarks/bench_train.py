"""Training throughput: tokens/s and seconds per 10,000 documents at several K, on all cores and
on one core (parallel efficiency), with peak RSS and the first-minibatch (numba compile) time.

    python benchmarks/bench_train.py                       # Gutenberg books, 1000-token sections
    python benchmarks/bench_train.py --store my.zarr -k 100 -k 1000 --docs 20000 --repeat 5
    python benchmarks/bench_train.py --option sampler=mh --option local_step=gibbs
    python benchmarks/bench_train.py --tomotopy              # and tomotopy's sweeps, side by side
    python benchmarks/bench_train.py --against /tmp/before   # and another checkout's bigtopics, interleaved

With --against TREE (a checkout of another version, e.g. `git worktree add /tmp/before COMMIT`),
every warm and timed run is made once with this tree's bigtopics and once with TREE's (its
PYTHONPATH), interleaved within each round, and the report adds TREE's time over this tree's,
per round: a before/after comparison in one run.

For each K, one process trains `--warm` documents (default: one epoch of the Gutenberg sections,
so the table is the size it keeps in a long run) and checkpoints; then every timed run resumes a
copy of that checkpoint with `bigtopics.resume` and trains `--docs` more documents, so all
configurations start from the same model. Timed runs are repeated `--repeat` times, interleaved
across configurations, each in a fresh process: this machine's speed varies by up to a third from
one run to the next (a virtual machine), and the best of several runs is the figure least
disturbed by it; the median is printed beside it, and for the ratios (parallel efficiency, K
against K) also the median of the ratios within each round, whose runs follow each other.

With --tomotopy (the `bench` extra), tomotopy's collapsed Gibbs sampler (all cores, the same
alpha and eta 0.01) also sweeps the same documents at each K, and the two are compared per
document-sweep: bigtopics' time per document divided by the sweeps it makes on every visit (the
sequential initialisation, burn-in and saved sweeps), against tomotopy's time per sweep. This
compares speed only, and how each scales with K; what a sweep buys in held-out score is
bench_peers.py's question.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "gutenberg_books" / "docs.jsonl.gz"


def warm_child(store: str, run: str, k: int, warm: int, batch_size: int, options: dict) -> dict:
    """Train `warm` documents into `run` (all cores) and checkpoint; time the first minibatch."""
    from bigtopics.settings import TrainSettings
    from bigtopics.trainer import Trainer

    settings = TrainSettings(n_topics=k, batch_size=batch_size, max_docs=warm, epochs=1_000_000,
                             checkpoint_every="1000000", **options)
    trainer = Trainer(store, run, settings, quiet=True, snapshot_seconds=1e9)
    start = time.perf_counter()
    trainer.start(overwrite=True)
    trainer.step(next(trainer.minibatches(0)))
    first = time.perf_counter() - start
    trainer.run()
    s = trainer.settings
    return {"first_minibatch_s": first, "warm_seconds": trainer.state.seconds, "alpha": s.alpha,
            "sweeps_per_visit": (1 + s.step.burnin + s.step.samples) if s.local_step == "gibbs" else None}


def tomotopy_child(corpus: str, n_docs: int, k: int, alpha: float, sweeps: int) -> dict:
    """tomotopy's sweeps over the n_docs documents of `corpus` (peers.peer_corpus) at K:
    `sweeps` untimed, then `sweeps` timed one by one."""
    from systems import TomotopySystem, library_version

    system = TomotopySystem(None, corpus, None, k, alpha, 0, None, 0, {})
    for _ in range(sweeps):
        system.train_pass()
    times = []
    for _ in range(sweeps):
        start = time.perf_counter()
        system.train_pass()
        times.append(time.perf_counter() - start)
    return {"k": k, "version": library_version("tomotopy"), "eta": system.settings["eta"], "sweep_seconds": times,
            "s_per_10k_docs_per_sweep": min(times) / n_docs * 10_000}


def timed_child(run: str, workers: int, docs: int) -> dict:
    """Resume a copy of the warm run with `workers` threads for `docs` more documents."""
    from systems import compile_kernels

    from bigtopics.memory import peak_rss_bytes
    from bigtopics.trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "run"
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns("table", "model.zarr"))
        trainer = Trainer.resume(copy, quiet=True, options={"snapshot_seconds": 1e9}, workers=workers)
        compile_kernels(trainer.store.location, trainer.settings)
        trainer.settings.max_docs = trainer.state.docs_seen + docs
        docs0, tokens0, seconds0 = trainer.state.docs_seen, trainer.state.tokens_seen, trainer.state.seconds
        trainer.run()
        st = trainer.state
        seconds = st.seconds - seconds0
        return {"workers": workers, "docs": st.docs_seen - docs0, "tokens": st.tokens_seen - tokens0,
                "seconds": seconds, "tokens_per_s": (st.tokens_seen - tokens0) / seconds,
                "s_per_10k_docs": seconds / (st.docs_seen - docs0) * 10_000,
                "table_entries": trainer.table.n_entries,
                "phase_seconds": {name: round(t, 2) for name, t in sorted(trainer.phase_seconds.items())},
                "peak_rss_mib": peak_rss_bytes(include_children=False) / 2**20}


def run_child(kind: str, spec: dict, tree: str | None = None) -> dict:
    """A child of `kind` with this tree's bigtopics, or `tree`'s (put first on its PYTHONPATH)."""
    env = os.environ if tree is None else {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [tree, os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps({"kind": kind, **spec})], check=True,
                         capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="an existing store (default: ingest the Gutenberg books)")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--section-tokens", type=int, default=1000)
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "bigtopics-bench"))
    parser.add_argument("-k", "--topics", type=int, action="append", help="K values (default 100 1000 2000)")
    parser.add_argument("--docs", type=int, default=10_000, help="documents timed per run")
    parser.add_argument("--warm", type=int, help="documents trained before timing (default: one epoch)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per configuration")
    parser.add_argument("--workers", type=int, action="append", help="worker counts (default: all cores and 1)")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a TrainSettings field, e.g. sampler=mh or local_step=vb (repeatable)")
    parser.add_argument("--tomotopy", action="store_true",
                        help="also time tomotopy's Gibbs sweeps on the same documents at each K")
    parser.add_argument("--tomotopy-sweeps", type=int, default=5,
                        help="tomotopy sweeps timed at each K, after as many untimed")
    parser.add_argument("--json", help="write every run's figures to this file")
    parser.add_argument("--against", metavar="TREE", help="also time another checkout's bigtopics, interleaved")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.child:
        spec = json.loads(args.child)
        kind = spec.pop("kind")
        children = {"warm": warm_child, "timed": timed_child, "tomotopy": tomotopy_child}
        print(json.dumps(children[kind](**spec)))
        return
    from bench_peers import parse_options  # one parser of key=value settings for every benchmark
    from peers import ensure_store, peer_corpus

    from bigtopics.store import open_store

    options = parse_options(args.option)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    store = args.store or str(ensure_store(Path(args.corpus), cache, args.section_tokens))
    n_docs = open_store(store).n_docs
    warm = args.warm or n_docs
    cores = os.cpu_count() or 1
    worker_counts = sorted(set(args.workers or [cores, 1]), reverse=True)
    ks = args.topics or [100, 1000, 2000]
    work = Path(tempfile.mkdtemp(prefix="bench-train-", dir=cache))
    trees = [None] + ([str(Path(args.against).resolve())] if args.against else [])
    warmed, runs, peer, against = {}, [], {}, {}
    try:
        for k in ks:
            for tree in trees:
                run = str(work / f"k{k}{'-against' if tree else ''}")
                warmed[k, tree] = run_child("warm", {"store": store, "run": run, "k": k, "warm": warm,
                                                     "batch_size": args.batch_size, "options": options}, tree)
            warmed[k] = warmed[k, None]
            print(f"K={k}: warmed up on {warm:,} documents in {warmed[k]['warm_seconds']:.0f} s "
                  f"(first minibatch, with numba compilation: {warmed[k]['first_minibatch_s']:.1f} s)", flush=True)
        for rep in range(args.repeat):
            for k in ks:
                for workers in worker_counts:
                    for tree in trees:
                        run = str(work / f"k{k}{'-against' if tree else ''}")
                        r = run_child("timed", {"run": run, "workers": workers, "docs": args.docs}, tree)
                        r.update(k=k, repeat=rep)
                        (against.setdefault((k, workers), []) if tree else runs).append(r)
                        print(f"  run {rep + 1}/{args.repeat} K={k:5d} workers={workers}{' ' + tree if tree else ''}: "
                              f"{r['tokens_per_s']:>10,.0f} tokens/s {r['s_per_10k_docs']:6.2f} s/10k docs", flush=True)
        corpus = str(peer_corpus(store)) if args.tomotopy else None
        for k in ks if args.tomotopy else []:
            peer[k] = run_child("tomotopy", {"corpus": corpus, "n_docs": n_docs, "k": k, "alpha": warmed[k]["alpha"],
                                             "sweeps": args.tomotopy_sweeps})
            print(f"  tomotopy K={k:5d}: {min(peer[k]['sweep_seconds']):.2f} s a sweep", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def best(k, workers, key="s_per_10k_docs"):
        return min(r[key] for r in runs if r["k"] == k and r["workers"] == workers)

    def median(k, workers):
        return statistics.median(r["s_per_10k_docs"] for r in runs if r["k"] == k and r["workers"] == workers)

    def per_round(numerator, denominator):
        """The median over rounds of a ratio of two configurations' times in the same round: runs of one
        round follow each other, so the machine's drifting speed cancels better than between best
        or median times of different moments."""
        def seconds(config, rep):
            k, workers = config
            return next(r["s_per_10k_docs"] for r in runs if (r["k"], r["workers"], r["repeat"]) == (k, workers, rep))
        return statistics.median(seconds(numerator, rep) / seconds(denominator, rep) for rep in range(args.repeat))

    print(f"\n{time.strftime('%Y-%m-%d %H:%M')}; machine: {platform.processor() or platform.machine()}, {cores} cores; "
          f"store {store}; {args.docs:,} documents timed after {warm:,}, batch {args.batch_size}, "
          f"options {options or 'none (defaults)'}; best (median) of {args.repeat} runs\n")
    print(f"{'K':>5s} {'workers':>7s} {'tokens/s':>10s} {'s/10k docs':>16s} {'first minibatch':>15s} "
          f"{'table entries':>13s} {'peak RSS':>9s}  where the time went (best run)")
    for k in ks:
        for workers in worker_counts:
            mine = [r for r in runs if r["k"] == k and r["workers"] == workers]
            top = min(mine, key=lambda r: r["s_per_10k_docs"])
            phases = ", ".join(f"{name} {t:.1f} s" for name, t in top["phase_seconds"].items())
            print(f"{k:5d} {workers:7d} {top['tokens_per_s']:10,.0f} {top['s_per_10k_docs']:7.2f} "
                  f"({median(k, workers):6.2f}) {warmed[k]['first_minibatch_s']:14.1f}s "
                  f"{top['table_entries']:13,} {max(r['peak_rss_mib'] for r in mine):6.0f} MiB  {phases}")
    most = worker_counts[0]
    if len(worker_counts) > 1 and 1 in worker_counts:
        for k in ks:
            print(f"parallel efficiency at K={k}: {best(k, 1) / (most * best(k, most)):.0%} on {most} cores "
                  f"(medians: {median(k, 1) / (most * median(k, most)):.0%}; "
                  f"per round: {per_round((k, 1), (k, most)) / most:.0%})")
    for k in ks[1:]:
        print(f"time per 10k documents, K={k} vs K={ks[0]}: {best(k, most) / best(ks[0], most):.2f}x "
              f"(medians: {median(k, most) / median(ks[0], most):.2f}x; "
              f"per round: {per_round((k, most), (ks[0], most)):.2f}x)")
    for (k, workers), theirs in against.items():
        mine = {m["repeat"]: m["s_per_10k_docs"] for m in runs if (m["k"], m["workers"]) == (k, workers)}
        ratios = [r["s_per_10k_docs"] / mine[r["repeat"]] for r in theirs]
        print(f"{args.against} against this tree, K={k} workers={workers}: "
              f"{min(t['s_per_10k_docs'] for t in theirs):.2f} s/10k docs (best) against {best(k, workers):.2f}; "
              f"its time / this tree's, per round: "
              f"median {statistics.median(ratios):.3f} (rounds: {', '.join(f'{x:.3f}' for x in ratios)})")
    if peer:
        print_peer_comparison(peer, warmed, ks, most, best, args.tomotopy_sweeps)
    if args.json:
        Path(args.json).write_text(json.dumps({"warm": {k: warmed[k] for k in ks}, "runs": runs, "options": options,
                                               "tomotopy": peer, "against": {args.against: [
                                                   r for theirs in against.values() for r in theirs]}}, indent=2))


def print_peer_comparison(peer: dict, warmed: dict, ks: list, workers: int, best, sweeps: int) -> None:
    """bigtopics against tomotopy per document-sweep at each K, and how each grows with K."""
    first = peer[ks[0]]
    print(f"\ntomotopy {first['version']} on the same documents (collapsed Gibbs, all cores, the same alpha, eta "
          f"{first['eta']:.2g}): seconds per sweep of 10k documents, best of {sweeps}")
    sweep_seconds = {}
    for k in ks:
        visit = warmed[k]["sweeps_per_visit"]
        theirs = peer[k]["s_per_10k_docs_per_sweep"]
        if visit is None:
            print(f"  K={k}: tomotopy {theirs:.3f} (bigtopics' local step makes no sweeps to compare)")
            continue
        sweep_seconds[k] = best(k, workers) / visit
        print(f"  K={k}: tomotopy {theirs:.3f}, bigtopics {sweep_seconds[k]:.3f} ({best(k, workers):.2f} s per 10k "
              f"documents / {visit} sweeps a visit): bigtopics takes {sweep_seconds[k] / theirs:.2f}x tomotopy's time")
    for k in ks[1:]:
        growth = f", bigtopics {sweep_seconds[k] / sweep_seconds[ks[0]]:.2f}x" if k in sweep_seconds else ""
        print(f"time per sweep, K={k} vs K={ks[0]}: tomotopy "
              f"{peer[k]['s_per_10k_docs_per_sweep'] / first['s_per_10k_docs_per_sweep']:.2f}x{growth}")


if __name__ == "__main__":
    main()
