"""The local steps side by side in one engine: time per 10,000 documents across K, and held-out
score against training time, on the same corpus, split and evaluator.

    python benchmarks/bench_local_steps.py                          # Reuters, K = 100 500 1000 2000
    python benchmarks/bench_local_steps.py -k 100 -k 1000 --steps gibbs,vb --curve-k 0

A step is `gibbs` (the default sampler), `gibbs:<sampler>` (buckets, alias, mh), `vb`, `lsparse`
(--top-l) or `scvb0`. Every configuration runs in a fresh process (its own peak RSS and numba
compile). Part 1 trains `--warm` documents, then times `--docs` more (fewer when a configuration
is slow: at least one minibatch, at most `--max-seconds`). Part 2 trains each step at K =
`--curve-k` for `--curve-seconds` of training time and scores the run's held-out documents
(left-to-right, the trainer's own evaluator) every few minibatches, outside the timing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "reuters21578" / "docs.jsonl.gz"
STEPS = "gibbs:buckets,gibbs:alias,gibbs:mh,lsparse,scvb0,vb"


def settings_for(step: str, k: int, **extra):
    from bigtopics.trainer import TrainSettings

    local, _, sampler = step.partition(":")
    fields = {"local_step": local, **({"sampler": sampler} if sampler else {})}
    return TrainSettings(n_topics=k, epochs=1000, checkpoint_every="1000000", **fields, **extra)


def child(mode: str, store: str, step: str, k: int, docs: int, warm: int, max_seconds: float, batch_size: int,
          heldout: int, score_every: int, top_l: int) -> dict:
    from bigtopics.memory import peak_rss_bytes
    from bigtopics.trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        settings = settings_for(step, k, batch_size=batch_size, top_l=top_l,
                                heldout=heldout if mode == "curve" else 0)
        trainer = Trainer(store, Path(tmp) / "run", settings, quiet=True)
        trainer.start()
        batches = (b for epoch in range(settings.epochs) for b in trainer.stream.epoch(epoch))
        first = time.perf_counter()
        trainer.step(next(batches), 0)
        compile_seconds = time.perf_counter() - first
        if mode == "speed":
            while trainer.state.docs_seen < warm:
                trainer.step(next(batches), 0)
            docs0, tokens0 = trainer.state.docs_seen, trainer.state.tokens_seen
            start = time.perf_counter()
            while trainer.state.docs_seen < docs0 + docs and time.perf_counter() - start < max_seconds:
                trainer.step(next(batches), 0)
            seconds = time.perf_counter() - start
            n_docs, n_tokens = trainer.state.docs_seen - docs0, trainer.state.tokens_seen - tokens0
            return {"step": step, "k": k, "docs": n_docs, "tokens": n_tokens, "seconds": seconds,
                    "s_per_10k_docs": seconds / n_docs * 10_000, "tokens_per_s": n_tokens / seconds,
                    "first_minibatch_s": compile_seconds, "table_entries": trainer.table.n_entries,
                    "peak_rss_mib": peak_rss_bytes(include_children=False) / 2**20}
        curve, seconds = [], 0.0
        while seconds < max_seconds:
            start = time.perf_counter()
            for _ in range(score_every):
                trainer.step(next(batches), 0)
            seconds += time.perf_counter() - start
            curve.append((round(seconds, 2), trainer.state.docs_seen, trainer.heldout_score()))
        return {"step": step, "k": k, "curve": curve}


def run_child(spec: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True)
    if out.returncode != 0:
        return {"step": spec["step"], "k": spec["k"], "error": out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def ensure_store(corpus: Path, cache: Path) -> Path:
    store = cache / f"{corpus.parent.name}.zarr"
    if not store.exists():
        subprocess.run([sys.executable, "-m", "bigtopics.cli", "ingest", str(corpus), "-o", str(store), "--quiet"],
                       check=True)
    return store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="an existing store (default: ingest Reuters-21578)")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "bigtopics-bench"))
    parser.add_argument("-k", "--topics", type=int, action="append", help="K values (default 100 500 1000 2000)")
    parser.add_argument("--steps", default=STEPS, help=f"comma-separated (default {STEPS})")
    parser.add_argument("--docs", type=int, default=4096, help="documents timed per configuration")
    parser.add_argument("--warm", type=int, default=2048, help="documents trained before timing")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="cap on the timed part")
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
        print(json.dumps(child(**json.loads(args.child))))
        return
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    store = args.store or str(ensure_store(Path(args.corpus), cache))
    steps = args.steps.split(",")
    common = {"store": store, "docs": args.docs, "warm": args.warm, "batch_size": args.batch_size,
              "heldout": args.heldout, "score_every": args.score_every, "top_l": args.top_l}
    print(f"{time.strftime('%Y-%m-%d %H:%M')}  {platform.machine()}, {os.cpu_count()} cores; store {store}; "
          f"batch {args.batch_size}, top-l {args.top_l}; command: {' '.join(sys.argv)}", flush=True)
    speed = []
    for k in args.topics or [100, 500, 1000, 2000]:
        for step in steps:
            r = run_child({**common, "mode": "speed", "step": step, "k": k, "max_seconds": args.max_seconds})
            speed.append(r)
            if "error" in r:
                print(f"K={k:5d} {step:14s} failed: {r['error']}", flush=True)
                continue
            print(f"K={k:5d} {step:14s} {r['s_per_10k_docs']:8.2f} s/10k docs  {r['tokens_per_s']:>10,.0f} tokens/s  "
                  f"({r['docs']:,} docs timed)  first minibatch {r['first_minibatch_s']:5.1f} s  "
                  f"table {r['table_entries']:>10,}  peak RSS {r['peak_rss_mib']:,.0f} MiB", flush=True)
    ks = sorted({r["k"] for r in speed if "error" not in r})
    print("\ntime per 10k documents relative to the same step at K=%d:" % ks[0])
    for step in steps:
        by_k = {r["k"]: r["s_per_10k_docs"] for r in speed if r["step"] == step and "error" not in r}
        if ks[0] in by_k:
            print(f"  {step:14s} " + "  ".join(f"K={k}: {by_k[k] / by_k[ks[0]]:.2f}x" for k in ks if k in by_k))
    curves = []
    if args.curve_k:
        print(f"\nheld-out log-likelihood per token against training seconds, K={args.curve_k}, "
              f"{args.heldout} held-out documents:")
        for step in steps:
            r = run_child({**common, "mode": "curve", "step": step, "k": args.curve_k,
                           "max_seconds": args.curve_seconds})
            curves.append(r)
            if "error" in r:
                print(f"  {step:14s} failed: {r['error']}")
                continue
            print(f"  {step:14s} " + "  ".join(f"{s:.0f}s:{h:.3f}" for s, _, h in r["curve"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"speed": speed, "curves": curves}, indent=2))


if __name__ == "__main__":
    main()
