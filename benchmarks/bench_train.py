"""Training throughput: tokens/s and seconds per 10,000 documents at several K, on all cores and
on one core, with peak RSS and the first-minibatch (numba compile) time shown separately.

    python benchmarks/bench_train.py                       # Gutenberg books, 1000-token sections
    python benchmarks/bench_train.py --store my.zarr -k 100 -k 1000 --docs 20000

Each configuration runs in a fresh process so that its peak RSS and compile time are its own.
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

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "gutenberg_books" / "docs.jsonl.gz"


def child(store: str, k: int, workers: int, docs: int, batch_size: int, warm: int, sampler: str = "buckets") -> dict:
    """Train warm + docs documents; time the first (compiling) minibatch and the rest apart."""
    import numba

    from bigtopics.memory import peak_rss_bytes
    from bigtopics.trainer import TrainSettings, Trainer

    with tempfile.TemporaryDirectory() as tmp:
        settings = TrainSettings(n_topics=k, batch_size=batch_size, workers=workers, epochs=100,
                                 checkpoint_every="1000000", sampler=sampler)
        trainer = Trainer(store, Path(tmp) / "run", settings, quiet=True)
        trainer._start_run_dir(overwrite=True)
        from bigtopics.topic_word import TopicWordTable

        trainer.table = TopicWordTable(k, trainer.store.n_words, directory=Path(tmp) / "table")
        trainer.table.drop_below, trainer.table.reset_below = settings.drop_below, settings.reset_below
        numba.set_num_threads(workers)
        batches = trainer.stream.epoch(0)
        first = time.perf_counter()
        trainer.step(next(batches), 0)
        compile_seconds = time.perf_counter() - first
        warm_docs = trainer.state.docs_seen
        while trainer.state.docs_seen < warm_docs + warm:
            trainer.step(next(batches), 0)
        docs0, tokens0 = trainer.state.docs_seen, trainer.state.tokens_seen
        start = time.perf_counter()
        while trainer.state.docs_seen < docs0 + docs:
            trainer.step(next(batches), 0)
        seconds = time.perf_counter() - start
        n_docs, n_tokens = trainer.state.docs_seen - docs0, trainer.state.tokens_seen - tokens0
        return {
            "k": k, "workers": workers, "docs": n_docs, "tokens": n_tokens, "seconds": seconds,
            "tokens_per_s": n_tokens / seconds, "s_per_10k_docs": seconds / n_docs * 10_000,
            "first_minibatch_s": compile_seconds, "table_entries": trainer.table.n_entries,
            "peak_rss_mib": peak_rss_bytes(include_children=False) / 2**20,
        }


def ensure_store(corpus: Path, section_tokens: int, cache: Path) -> Path:
    store = cache / f"{corpus.parent.name}-s{section_tokens}.zarr"
    if not store.exists():
        cmd = [sys.executable, "-m", "bigtopics.cli", "ingest", str(corpus), "-o", str(store), "--quiet"]
        if section_tokens:
            cmd += ["--section-tokens", str(section_tokens)]
        subprocess.run(cmd, check=True)
    return store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="an existing store (default: ingest the Gutenberg books)")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--section-tokens", type=int, default=1000)
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "bigtopics-bench"))
    parser.add_argument("-k", "--topics", type=int, action="append", help="K values (default 100 1000 2000)")
    parser.add_argument("--docs", type=int, default=20_000, help="documents timed per configuration")
    parser.add_argument("--warm", type=int, default=10_000, help="documents trained before timing")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--sampler", default="buckets", choices=["buckets", "alias", "mh"], help="the Gibbs draw")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(**json.loads(args.child))))
        return
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    store = args.store or str(ensure_store(Path(args.corpus), args.section_tokens, cache))
    cores = os.cpu_count() or 1
    results = []
    for k in args.topics or [100, 1000, 2000]:
        for workers in sorted({cores, 1}, reverse=True):
            spec = {"store": store, "k": k, "workers": workers, "docs": args.docs, "batch_size": args.batch_size,
                    "warm": args.warm, "sampler": args.sampler}
            out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], check=True,
                                 capture_output=True, text=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(r)
            print(f"K={k:5d} workers={workers}: {r['tokens_per_s']:>10,.0f} tokens/s  "
                  f"{r['s_per_10k_docs']:6.2f} s/10k docs  first minibatch {r['first_minibatch_s']:5.1f} s  "
                  f"table {r['table_entries']:>11,}  peak RSS {r['peak_rss_mib']:,.0f} MiB", flush=True)
    by = {(r["k"], r["workers"]): r for r in results}
    ks = sorted({r["k"] for r in results})
    print(f"\nmachine: {platform.processor() or platform.machine()}, {cores} cores; store {store}; "
          f"{args.docs} documents timed after {args.warm} warm-up documents, batch {args.batch_size}, "
          f"sampler {args.sampler}")
    if cores > 1:
        for k in ks:
            eff = by[(k, cores)]["tokens_per_s"] / (cores * by[(k, 1)]["tokens_per_s"])
            print(f"parallel efficiency at K={k}: {eff:.0%} on {cores} cores")
    base = by[(ks[0], cores)]["s_per_10k_docs"]
    for k in ks[1:]:
        print(f"time per 10k documents, K={k} vs K={ks[0]}: {by[(k, cores)]['s_per_10k_docs'] / base:.2f}x")


if __name__ == "__main__":
    main()
