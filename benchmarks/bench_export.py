"""Seconds per export file (bigtopics/export/: each writer of the registry on its own).

    python benchmarks/bench_export.py                  # Reuters-21578, K = 50, 2 epochs (cached)
    python benchmarks/bench_export.py --run RUN --doc-topics DT.zarr

Without --run, the Reuters corpus is ingested, trained (two epochs, so the run keeps its per-token
topics for state.gz and diagnostics.xml) and inferred (--threshold 0) into --cache, once. Every
writer, the optional ones included, then writes into a fresh folder, timed one by one; the peak
RSS of the process is printed last.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"


def prepare(cache: Path, corpus: Path, k: int, epochs: int) -> tuple[Path, Path]:
    cli = [sys.executable, "-m", "bigtopics.cli"]
    store, run, dt = cache / "store.zarr", cache / f"run-k{k}-e{epochs}", cache / f"dt-k{k}-e{epochs}.zarr"
    if not store.exists():
        subprocess.run(cli + ["ingest", str(corpus), "-o", str(store), "--quiet"], check=True)
    if not (run / "model.zarr").exists():
        subprocess.run(cli + ["train", str(store), "-o", str(run), "-k", str(k), "--epochs", str(epochs), "--quiet",
                              "--overwrite"], check=True)
    if not dt.exists():
        subprocess.run(cli + ["infer", str(run), str(store), "-o", str(dt), "--threshold", "0", "--quiet"], check=True)
    return run, dt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path)
    parser.add_argument("--doc-topics", type=Path)
    parser.add_argument("--corpus", type=Path, default=CORPORA / "reuters21578" / "docs.jsonl.gz")
    parser.add_argument("-k", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "bigtopics-bench" / "export")
    args = parser.parse_args()
    from bigtopics.diagnostics import top_word_ids
    from bigtopics.doc_topics import DocTopics
    from bigtopics.export import WRITERS, ExportOptions
    from bigtopics.export.base import ExportContext
    from bigtopics.export.state import has_assignments
    from bigtopics.model import load_model
    from bigtopics.store import open_store

    if args.run is None:
        args.cache.mkdir(parents=True, exist_ok=True)
        args.run, args.doc_topics = prepare(args.cache, args.corpus, args.k, args.epochs)
    model, dt = load_model(args.run), DocTopics(args.doc_topics)
    store = open_store(dt.attrs["store"])
    kept = has_assignments(args.run)
    options = ExportOptions(topic_word_weights=True, state=kept, diagnostics=kept)
    ctx = ExportContext(run=args.run, model=model, options=options, diagnostics={}, log=lambda m: None, dt=dt,
                        store=store, top=[top_word_ids(model, k, options.top_words) for k in range(model.n_topics)])
    print(f"{store.n_docs:,} documents, {store.n_tokens:,} tokens, K = {model.n_topics}, V = {model.n_words:,}")
    with tempfile.TemporaryDirectory() as out:
        for writer in WRITERS:
            if writer.needs == "assignments" and not kept:
                continue
            start = time.perf_counter()
            writer.write(ctx, Path(out))
            print(f"{', '.join(writer.files):36s} {time.perf_counter() - start:7.1f} s")
        shutil.rmtree(out, ignore_errors=True)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
