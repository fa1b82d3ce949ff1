"""The local steps side by side in one engine: time per 10,000 documents across K, and held-out
score against training time, on the same corpus, split and evaluator.

    python benchmarks/bench_local_steps.py                          # Reuters, K = 100 500 1000 2000
    python benchmarks/bench_local_steps.py -k 100 -k 1000 --steps gibbs,vb --curve-k 0

A step is `gibbs` (the default sampler), `gibbs:<sampler>` (buckets, alias, mh), `vb`, `lsparse`
(--top-l) or `scvb0`. Part 1 times each step at each K with bench_train.py's machinery (a warm-up
run of `--warm` documents checkpoints, then a fresh process resumes it and trains `--docs` more
on all cores, kernels compiled beforehand). Part 2 trains each step at K = `--curve-k` for
`--curve-seconds` of training time and scores the run's held-out documents (left-to-right, the
trainer's own evaluator, the same for every step) every few minibatches, outside the timing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import run_child as run_train_child  # noqa: E402
from peers import ensure_store  # noqa: E402

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "reuters21578" / "docs.jsonl.gz"
STEPS = "gibbs:buckets,gibbs:alias,gibbs:mh,lsparse,scvb0,vb"
MARKS = (1 / 8, 1 / 4, 1 / 2, 1)  # of --curve-seconds: where the curves are printed (all of them go to --json)


def step_options(step: str, top_l: int) -> dict:
    local, _, sampler = step.partition(":")
    return {"local_step": local, **({"top_l": top_l} if local == "lsparse" else {}),
            **({"sampler": sampler} if sampler else {})}


def curve_child(store: str, step: str, k: int, batch_size: int, top_l: int, heldout: int, score_every: int,
                max_seconds: float) -> dict:
    """Train one step for max_seconds of loop time, scoring the held-out documents as it goes."""
    from systems import compile_kernels

    from bigtopics.settings import TrainSettings
    from bigtopics.trainer import Trainer

    settings = TrainSettings(n_topics=k, batch_size=batch_size, heldout=heldout, epochs=1_000_000,
                             checkpoint_every="1000000", **step_options(step, top_l))
    compile_kernels(store, settings)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(store, Path(tmp) / "run", settings, quiet=True)
        trainer.start()
        batches = (work for e in itertools.count() for work in trainer.minibatches(e))
        curve, seconds = [], 0.0
        while seconds < max_seconds:
            start = time.perf_counter()
            for _ in range(score_every):
                trainer.step(next(batches))
            seconds += time.perf_counter() - start
            curve.append((round(seconds, 2), trainer.state.docs_seen, trainer.heldout_score()))
        return {"step": step, "k": k, "curve": curve}


def score_at(curve: list, seconds: float) -> str:
    """The score at a time mark: the mean of the last three scores by then (one score is noisy)."""
    scored = [(docs, h) for s, docs, h in curve if s <= seconds]
    if not scored:
        return f"{seconds:.0f}s: -"
    last = [h for _, h in scored[-3:]]
    return f"{seconds:.0f}s: {sum(last) / len(last):.3f} ({scored[-1][0]:,} docs)"


def speed(store: str, step: str, k: int, args, work: Path) -> dict:
    """Warm-up, then one timed run on all cores (bench_train.py), or the error that stopped it."""
    run = work / f"{step.replace(':', '-')}-k{k}"
    try:
        warm = run_train_child("warm", {"store": store, "run": str(run), "k": k, "warm": args.warm,
                                        "batch_size": args.batch_size, "options": step_options(step, args.top_l)})
        timed = run_train_child("timed", {"run": str(run), "workers": os.cpu_count() or 1, "docs": args.docs})
    except subprocess.CalledProcessError as e:
        return {"step": step, "k": k, "error": (e.stderr or "").strip().splitlines()[-1:] or [str(e)]}
    finally:
        shutil.rmtree(run, ignore_errors=True)
    return {"step": step, "k": k, **warm, **timed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="an existing store (default: ingest Reuters-21578)")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "bigtopics-bench"))
    parser.add_argument("-k", "--topics", type=int, action="append", help="K values (default 100 500 1000 2000)")
    parser.add_argument("--steps", default=STEPS, help=f"comma-separated (default {STEPS})")
    parser.add_argument("--docs", type=int, default=4096, help="documents timed per configuration")
    parser.add_argument("--warm", type=int, default=2048, help="documents trained before timing")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--top-l", type=int, default=8)
    parser.add_argument("--curve-k", type=int, default=500, help="K of the held-out curves (0: skip them)")
    parser.add_argument("--curve-seconds", type=float, default=120.0)
    parser.add_argument("--heldout", type=int, default=500)
    parser.add_argument("--score-every", type=int, default=2, help="minibatches between held-out scores")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(curve_child(**json.loads(args.child))))
        return
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    store = args.store or str(ensure_store(Path(args.corpus), cache))
    steps = args.steps.split(",")
    print(f"{time.strftime('%Y-%m-%d %H:%M')}  {platform.machine()}, {os.cpu_count()} cores; store {store}; "
          f"batch {args.batch_size}, top-l {args.top_l}; command: {' '.join(sys.argv)}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench-local-steps-", dir=cache))
    results = []
    try:
        for k in args.topics or [100, 500, 1000, 2000]:
            for step in steps:
                r = speed(store, step, k, args, work)
                results.append(r)
                if "error" in r:
                    print(f"K={k:5d} {step:14s} failed: {r['error']}", flush=True)
                    continue
                print(f"K={k:5d} {step:14s} {r['s_per_10k_docs']:8.2f} s/10k docs  {r['tokens_per_s']:>10,.0f} "
                      f"tokens/s  first minibatch {r['first_minibatch_s']:5.1f} s  table {r['table_entries']:>10,}  "
                      f"peak RSS {r['peak_rss_mib']:,.0f} MiB", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ks = sorted({r["k"] for r in results if "error" not in r})
    print(f"\ntime per 10k documents relative to the same step at K={ks[0]}:")
    for step in steps:
        by_k = {r["k"]: r["s_per_10k_docs"] for r in results if r["step"] == step and "error" not in r}
        if ks[0] in by_k:
            print(f"  {step:14s} " + "  ".join(f"K={k}: {by_k[k] / by_k[ks[0]]:.2f}x" for k in ks if k in by_k))
    curves = []
    if args.curve_k:
        print(f"\nheld-out log-likelihood per token after training seconds (mean of the last 3 scores), "
              f"K={args.curve_k}, {args.heldout} held-out documents:")
        for step in steps:
            spec = {"store": store, "step": step, "k": args.curve_k, "batch_size": args.batch_size,
                    "top_l": args.top_l, "heldout": args.heldout, "score_every": args.score_every,
                    "max_seconds": args.curve_seconds}
            out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                                 text=True)
            if out.returncode != 0:
                print(f"  {step:14s} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            curves.append(r)
            print(f"  {step:14s} " + "  ".join(score_at(r["curve"], args.curve_seconds * f) for f in MARKS),
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"speed": results, "curves": curves}, indent=2))


if __name__ == "__main__":
    main()
