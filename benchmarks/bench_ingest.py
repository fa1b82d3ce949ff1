"""Ingest throughput: bigtopics vs scikit-learn CountVectorizer vs gensim Dictionary + doc2bow.

Every contender reads the same JSON Lines corpus (gzip) and builds the same kind of matrix: letter
runs of >= 3 characters, lowercased, the bigtopics English stop list, min_df 2, max_df 0.5, at most
65,536 words, one sparse row of counts per document. Each run is a fresh subprocess so that its
peak RSS is its own. Then the peak RSS of bigtopics on the first corpus replicated 10x shows that
memory does not grow with the input.

    python benchmarks/bench_ingest.py                       # Gutenberg and Reuters
    python benchmarks/bench_ingest.py --corpus X.jsonl.gz --replicate 3 --workers 2
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
DEFAULT_CORPORA = [CORPORA / "gutenberg_books" / "docs.jsonl.gz", CORPORA / "reuters21578" / "docs.jsonl.gz"]
TOKEN_PATTERN = r"(?u)[^\W\d_]{3,}"  # letter runs (the peers' closest equivalent of ours)
MIN_DF, MAX_DF, MAX_VOCAB = 2, 0.5, 1 << 16


def texts(path: Path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)["text"]


def stop_words() -> list[str]:
    from bigtopics.tokenizer import load_stoplist

    return load_stoplist("en")


def run_bigtopics(path: Path, workers: int) -> dict:
    from bigtopics.ingest import ingest

    with tempfile.TemporaryDirectory() as tmp:
        report = ingest(path, Path(tmp) / "out.zarr", workers=workers, quiet=True)
    return {"tokens": report.stats["raw_tokens"], "docs": report.n_docs, "words": report.n_words}


def run_sklearn(path: Path, workers: int) -> dict:
    from sklearn.feature_extraction.text import CountVectorizer

    vectorizer = CountVectorizer(token_pattern=TOKEN_PATTERN, stop_words=stop_words(), min_df=MIN_DF,
                                 max_df=MAX_DF, max_features=MAX_VOCAB, dtype="uint32")
    matrix = vectorizer.fit_transform(texts(path))
    return {"tokens": None, "docs": matrix.shape[0], "words": matrix.shape[1]}


def run_gensim(path: Path, workers: int) -> dict:
    from gensim.corpora import Dictionary
    from scipy.sparse import csr_matrix

    pattern, stop = re.compile(TOKEN_PATTERN), set(stop_words())

    def docs():  # streamed twice (dictionary, then doc2bow) like any out-of-core gensim pipeline
        return ([t for t in pattern.findall(text.lower()) if t not in stop] for text in texts(path))

    dictionary = Dictionary(docs())
    dictionary.filter_extremes(no_below=MIN_DF, no_above=MAX_DF, keep_n=MAX_VOCAB)
    indptr, indices, data = [0], [], []
    for doc in docs():
        bow = dictionary.doc2bow(doc)
        indices.extend(w for w, _ in bow)
        data.extend(c for _, c in bow)
        indptr.append(len(indices))
    matrix = csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, len(dictionary)))
    return {"tokens": None, "docs": matrix.shape[0], "words": matrix.shape[1]}


RUNNERS = {"bigtopics": run_bigtopics, "sklearn": run_sklearn, "gensim": run_gensim}


def measure(name: str, path: Path, workers: int) -> dict:
    """Run one contender in a fresh process; its wall time and peak RSS (children included)."""
    out = subprocess.run([sys.executable, __file__, "--run-one", name, "--corpus", str(path), "--workers", str(workers)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def corpus_size(path: Path) -> tuple[float, int]:
    """(MB of raw text as UTF-8, letter-run tokens)."""
    pattern = re.compile(TOKEN_PATTERN)
    n_bytes = n_tokens = 0
    for text in texts(path):
        n_bytes += len(text.encode("utf-8"))
        n_tokens += len(pattern.findall(text))
    return n_bytes / 1e6, n_tokens


def replicated(path: Path, times: int, tmp: Path) -> Path:
    """The corpus repeated `times` times (ids made unique), gzip'ed."""
    out = tmp / f"{path.name.split('.')[0]}_x{times}.jsonl.gz"
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=1) as f:
        for copy in range(times):
            with gzip.open(path, "rt", encoding="utf-8") as src:
                for line in src:
                    obj = json.loads(line)
                    f.write(json.dumps({"id": f"{obj['id']}-{copy}", "text": obj["text"]}) + "\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, action="append", help="JSON Lines (gzip) with a text field")
    ap.add_argument("--workers", type=int, default=0, help="bigtopics workers (default: all cores)")
    ap.add_argument("--peers", default="sklearn,gensim", help="comma-separated; empty for none")
    ap.add_argument("--replicate", type=int, default=10, help="input growth for the peak-RSS check (0: skip)")
    ap.add_argument("--run-one", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    corpora = args.corpus or DEFAULT_CORPORA
    if args.run_one:
        from bigtopics.memory import peak_rss_bytes

        start = time.perf_counter()
        result = RUNNERS[args.run_one](corpora[0], args.workers)
        print(json.dumps(result | {"seconds": time.perf_counter() - start, "peak_rss": peak_rss_bytes()}))
        return
    peers = [p for p in args.peers.split(",") if p]
    for path in corpora:
        mb, tokens = corpus_size(path)
        print(f"\n{path.name}: {mb:.1f} MB of text, {tokens:,} letter-run tokens")
        print(f"{'':10s} {'seconds':>8s} {'MB/s':>7s} {'Mtok/s':>7s} {'peak RSS':>9s} {'docs':>8s} {'words':>7s}")
        results = {name: measure(name, path, args.workers) for name in ["bigtopics", *peers]}
        for name, r in results.items():
            print(f"{name:10s} {r['seconds']:8.1f} {mb / r['seconds']:7.1f} {tokens / r['seconds'] / 1e6:7.2f} "
                  f"{r['peak_rss'] / 2**20:7.0f}MB {r['docs']:8,} {r['words']:7,}")
        if peers:
            fastest = min(peers, key=lambda p: results[p]["seconds"])
            print(f"bigtopics is {results[fastest]['seconds'] / results['bigtopics']['seconds']:.2f}x the faster peer ({fastest})")
    if args.replicate > 1:
        with tempfile.TemporaryDirectory() as tmp:
            big = replicated(corpora[-1], args.replicate, Path(tmp))
            one, many = measure("bigtopics", corpora[-1], args.workers), measure("bigtopics", big, args.workers)
        print(f"\npeak RSS of bigtopics: {corpora[-1].name} {one['peak_rss'] / 2**20:.0f} MB; replicated "
              f"{args.replicate}x {many['peak_rss'] / 2**20:.0f} MB ({many['seconds']:.1f} s)")


if __name__ == "__main__":
    main()
