"""`bigtopics site` on a library of ~100,000 sections: build time and peak memory, size of the
folder, and the pages opened in headless Chromium (index, a title search over every book, the
last book's page, a topic page).

The library is synthetic (tools' LDA generator: 50 topics over 20,000 pseudo-words), written as
JSON Lines books with a title, an author and a year, then ingested with --section-tokens as a
digital library would be, trained briefly and inferred; only `site` is measured. Each command is
its own process, under /usr/bin/time, so its peak RSS is its own.

    python benchmarks/bench_site.py                    # 2,000 books of 2,500 tokens, sections of 50
    python benchmarks/bench_site.py --books 200 --workdir /tmp/site-bench     # a quick look
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from bigtopics.synth import CorpusSpec, write_corpus


def write_library(path: Path, books: int, tokens_per_book: int, seed: int = 0) -> None:
    """Books as JSON Lines with title, author and year (the title: the book's first words)."""
    raw = path.with_name("raw.jsonl.gz")
    write_corpus(CorpusSpec(n_docs=books, n_topics=50, n_words=20_000, mean_length=tokens_per_book, alpha=0.05,
                            seed=seed), raw, "jsonl", overwrite=True)
    with gzip.open(raw, "rt", encoding="utf-8") as source, gzip.open(path, "wt", encoding="utf-8",
                                                                       compresslevel=1) as out:
        for i, line in enumerate(source):
            doc = json.loads(line)
            words = doc["text"].split()[:3]
            doc.update(id=f"bk{i}", title=" ".join(words).title() + f" {i}", author=f"Author {i % 97}",
                       year=1800 + (i * 7) % 220)
            out.write(json.dumps(doc) + "\n")
    raw.unlink()


def timed(args: list[str]) -> dict:
    """Run a bigtopics command under /usr/bin/time: seconds and peak RSS (bytes)."""
    start = time.perf_counter()
    result = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "bigtopics.cli", *map(str, args)],
                            capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"bigtopics {' '.join(map(str, args))} failed:\n{result.stderr[-3000:]}")
    peak_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr).group(1))
    return {"seconds": round(seconds, 2), "peak_rss_mib": round(peak_kib / 1024, 1)}


def open_pages(site: Path, query: str, last_book: int, shots: Path) -> dict:
    """Each page opened in headless Chromium (a fresh browser per page): seconds, and whether it
    shows what it should."""
    from bigtopics.report import render_in_browser

    base = (site / "index.html").resolve().as_uri().rsplit("/", 1)[0]
    pages = {"index": (f"{base}/index.html", "Topic 49"),
             "search": (f"{base}/index.html#q={query.replace(' ', '%20')}", query),
             "last_book": (f"{base}/doc.html#b={last_book}", f"bk{last_book}"),
             "topic": (f"{base}/topic.html#k=7", "most about this topic")}
    out = {}
    for name, (url, expected) in pages.items():
        start = time.perf_counter()
        dom = render_in_browser(url, shots / f"{name}.png", width=1200, height=1400)
        out[name] = {"seconds": round(time.perf_counter() - start, 2), "shows": expected in dom}
    return out


def run(workdir: Path, books: int, tokens_per_book: int, section_tokens: int) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    corpus, store, model, dt, site = (workdir / n for n in ("books.jsonl.gz", "library.zarr", "run",
                                                             "doc_topics.zarr", "site"))
    write_library(corpus, books, tokens_per_book)
    steps = {
        "ingest": timed(["ingest", corpus, "-o", store, "--section-tokens", section_tokens, "--overwrite",
                         "--quiet"]),
        "train": timed(["train", store, "-o", model, "-k", 50, "--max-docs", 20_000, "--overwrite", "--quiet"]),
        "infer": timed(["infer", model, store, "-o", dt, "--overwrite", "--quiet"]),
        "site": timed(["site", model, "--doc-topics", dt, "-o", site, "--overwrite", "--quiet"]),
    }
    summary = json.loads((site / "site.json").read_text())
    files = [p for p in site.rglob("*") if p.is_file()]
    query = json.loads((site / "data" / "books" / "0.js").read_text()[len('BT.put("books/0",'):-3])[0]["title"]
    pages = open_pages(site, query, summary["n_books"] - 1, workdir)
    return {"books": summary["n_books"], "documents": summary["n_docs"], "steps": steps,
            "site_files": len(files), "site_mib": round(sum(p.stat().st_size for p in files) / 2**20, 1),
            "pages": pages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--books", type=int, default=2000)
    parser.add_argument("--tokens-per-book", type=int, default=2500)
    parser.add_argument("--section-tokens", type=int, default=50)
    parser.add_argument("--workdir", type=Path, default=Path("site-bench"))
    args = parser.parse_args()
    print(json.dumps(run(args.workdir, args.books, args.tokens_per_book, args.section_tokens), indent=1))


if __name__ == "__main__":
    main()
