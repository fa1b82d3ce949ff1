"""`bigtopics site` on a synthetic library: build time and peak memory, size of the folder, and
the first search in headless Chromium (seconds, requests and bytes it loaded, from the browser's
performance entries), with the other pages opened to check they show their content.

The library is synthetic (the LDA generator: 50 topics over 20,000 pseudo-words), written as JSON
Lines books with a title (words of the book), an author ("Surname, Given" from 60,000 surnames,
Zipf-distributed as names are), one to four subjects (a list, as Gutenberg's) and a year, then
ingested (with --section-tokens when given, as a digital library would be), trained briefly and
inferred; only `site` is measured. Each command is its own process, under /usr/bin/time, so its
peak RSS is its own. With --reuse, the corpus, store, model and document topics of an earlier run
of the same size in --workdir are kept and only the site is built again.

    python benchmarks/bench_site.py --books 1200000 --tokens-per-book 30      # the library-size index
    python benchmarks/bench_site.py --books 2000 --tokens-per-book 2500 --section-tokens 50
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

import numpy as np

from bigtopics.synth import CorpusSpec, pseudo_words, write_corpus

N_SURNAMES, N_GIVEN, N_SUBJECTS = 60_000, 400, 5_000
SUBJECT_FORMS = ("{} -- Fiction", "{} -- History", "{}", "{} -- Juvenile fiction", "{} (Imaginary place)")


def write_library(path: Path, books: int, tokens_per_book: int, seed: int = 0) -> None:
    """Books as JSON Lines with title, author, subjects and year."""
    raw = path.with_name("raw.jsonl.gz")
    write_corpus(CorpusSpec(n_docs=books, n_topics=50, n_words=20_000, mean_length=tokens_per_book, alpha=0.05,
                            seed=seed), raw, "jsonl", overwrite=True)
    names = pseudo_words(N_SURNAMES + N_GIVEN + N_SUBJECTS)
    surnames, given, headings = (names[:N_SURNAMES], names[N_SURNAMES:N_SURNAMES + N_GIVEN],
                                 names[N_SURNAMES + N_GIVEN:])
    rng = np.random.default_rng(seed)
    author = np.minimum(rng.zipf(1.3, books), N_SURNAMES) - 1
    first = rng.integers(0, N_GIVEN, books)
    n_subjects = rng.integers(1, 5, books)
    subject = np.minimum(rng.zipf(1.2, int(n_subjects.sum())), N_SUBJECTS) - 1
    form = rng.integers(0, len(SUBJECT_FORMS), len(subject))
    subject_at = np.concatenate([[0], np.cumsum(n_subjects)])
    title_words = rng.integers(2, 6, books)
    with gzip.open(raw, "rt", encoding="utf-8") as source, gzip.open(path, "wt", encoding="utf-8",
                                                                       compresslevel=1) as out:
        for i, line in enumerate(source):
            doc = json.loads(line)
            subjects = [SUBJECT_FORMS[form[j]].format(headings[subject[j]].title())
                        for j in range(subject_at[i], subject_at[i + 1])]
            doc.update(id=f"bk{i}", title=" ".join(doc["text"].split()[:title_words[i]]).title(),
                       author=f"{surnames[author[i]].title()}, {given[first[i]].title()}",
                       subjects=subjects, year=1500 + (i * 7) % 520)
            out.write(json.dumps(doc) + "\n")
    raw.unlink()


def timed(args: list[str]) -> dict:
    """Run a bigtopics command under /usr/bin/time: seconds and peak RSS (MiB)."""
    start = time.perf_counter()
    result = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "bigtopics.cli", *map(str, args)],
                            capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"bigtopics {' '.join(map(str, args))} failed:\n{result.stderr[-3000:]}")
    peak_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr).group(1))
    return {"seconds": round(seconds, 2), "peak_rss_mib": round(peak_kib / 1024, 1)}


def first_search(site: Path, queries: list[str]) -> dict:
    """Each query typed into a fresh headless Chromium's index page, served over HTTP (so that the
    performance entries count the bytes): seconds from the keystroke to the listed results, the
    requests and bytes that search loaded, the books found, the JavaScript heap after it, and
    the console's errors."""
    import functools
    import http.server
    import threading

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1200,1500", "--enable-precise-memory-info"):
        options.add_argument(flag)
    options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    out = {}
    try:
        for query in queries:
            driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
            try:
                driver.get(f"http://127.0.0.1:{server.server_address[1]}/index.html")
                WebDriverWait(driver, 60).until(lambda d: d.execute_script(
                    "return document.querySelectorAll('#topics .card').length"))
                before = driver.execute_script("return performance.getEntriesByType('resource').length")
                # the moment the page marks the results listed, kept by an observer (polling would add its interval)
                driver.execute_script(
                    "var box = document.getElementById('results');"
                    "new MutationObserver(function () { if (box.getAttribute('data-done') && !window.__t1)"
                    " window.__t1 = performance.now(); }).observe(box, {attributes: true});"
                    "window.__t0 = performance.now(); var q = document.getElementById('q');"
                    "q.value = arguments[0]; q.dispatchEvent(new Event('input'));", query)
                WebDriverWait(driver, 120).until(lambda d: d.execute_script(
                    "return document.getElementById('results').getAttribute('data-done') === arguments[0]", query))
                got = driver.execute_script(
                    "var e = performance.getEntriesByType('resource').slice(arguments[0]);"
                    "return {ms: window.__t1 - window.__t0 - 120, requests: e.length,"  # (less the typing pause)
                    " bytes: e.reduce(function (a, x) { return a + x.encodedBodySize; }, 0),"
                    " heap: performance.memory.usedJSHeapSize, found: document.getElementById('found').textContent,"
                    " names: e.map(function (x) { return x.name.split('/data/')[1]; })}", before)
                errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
                on_disk = sum((site / "data" / name).stat().st_size for name in got["names"])
                out[query] = {"seconds": round(got["ms"] / 1000, 3), "requests": got["requests"],
                              "mib": round(got["bytes"] / 2**20, 2), "mib_on_disk": round(on_disk / 2**20, 2),
                              "js_heap_mib": round(got["heap"] / 2**20, 1),
                              "found": got["found"], "files": got["names"], "console_errors": errors}
            finally:
                driver.quit()
    finally:
        server.shutdown()
        server.server_close()
    return out


def prepare(workdir: Path, books: int, tokens_per_book: int, section_tokens: int, reuse: bool) -> dict:
    """The corpus, store, model and document topics (kept from an earlier run of the same size with
    reuse); the seconds and peak memory of each step run."""
    workdir.mkdir(parents=True, exist_ok=True)
    corpus, store, model, dt = (workdir / n for n in ("books.jsonl.gz", "library.zarr", "run", "doc_topics.zarr"))
    marker, size = workdir / "prepared.json", {"books": books, "tokens_per_book": tokens_per_book,
                                                "section_tokens": section_tokens}
    if reuse and marker.exists() and json.loads(marker.read_text()) == size:
        return {}
    marker.unlink(missing_ok=True)
    write_library(corpus, books, tokens_per_book)
    sections = ["--section-tokens", section_tokens] if section_tokens else []
    steps = {"ingest": timed(["ingest", corpus, "-o", store, *sections, "--overwrite", "--quiet"]),
             "train": timed(["train", store, "-o", model, "-k", 50, "--max-docs", 20_000, "--overwrite", "--quiet"]),
             "infer": timed(["infer", model, store, "-o", dt, "--overwrite", "--quiet"])}
    marker.write_text(json.dumps(size))
    return steps


def run(workdir: Path, books: int, tokens_per_book: int, section_tokens: int, reuse: bool = False) -> dict:
    steps = prepare(workdir, books, tokens_per_book, section_tokens, reuse)
    site = workdir / "site"
    steps["site"] = timed(["site", workdir / "run", "--doc-topics", workdir / "doc_topics.zarr", "-o", site,
                           "--overwrite", "--quiet"])
    summary = json.loads((site / "site.json").read_text())
    files = [p for p in site.rglob("*") if p.is_file()]
    data = site / "data"
    last = summary["n_books"] - 1
    row = json.loads((data / "titles" / f"{last // 500}.js").read_text().split(",", 1)[1][:-3])[last % 500]
    author = row[2].split(",")[0]
    title_word = row[0].split()[0]
    pages = open_pages(site, last, workdir)
    return {"books": summary["n_books"], "documents": summary["n_docs"], "steps": steps,
            "site_files": len(files), "site_mib": round(sum(p.stat().st_size for p in files) / 2**20, 1),
            "search_index_mib": round(sum(p.stat().st_size for d in ("search", "terms") for p in (data / d).iterdir())
                                      / 2**20, 1) + 0.0,
            "first_search": first_search(site, [f"{author} {title_word}", author, "fiction"]),
            "pages": pages}


def open_pages(site: Path, last_book: int, shots: Path) -> dict:
    """Each page opened in headless Chromium (a fresh browser per page): seconds, and whether it
    shows what it should."""
    from bigtopics.report import render_in_browser

    base = (site / "index.html").resolve().as_uri().rsplit("/", 1)[0]
    pages = {"index": (f"{base}/index.html", "Topic 49"),
             "last_book": (f"{base}/doc.html#b={last_book}", f"bk{last_book}"),
             "topic": (f"{base}/topic.html#k=7", "most about this topic")}
    out = {}
    for name, (url, expected) in pages.items():
        start = time.perf_counter()
        dom = render_in_browser(url, shots / f"{name}.png", width=1200, height=1400)
        out[name] = {"seconds": round(time.perf_counter() - start, 2), "shows": expected in dom}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--books", type=int, default=2000)
    parser.add_argument("--tokens-per-book", type=int, default=2500)
    parser.add_argument("--section-tokens", type=int, default=50, help="0: a document a book")
    parser.add_argument("--workdir", type=Path, default=Path("site-bench"))
    parser.add_argument("--reuse", action="store_true", help="keep the library of an earlier run of the same size")
    args = parser.parse_args()
    print(json.dumps(run(args.workdir, args.books, args.tokens_per_book, args.section_tokens, args.reuse), indent=1))


if __name__ == "__main__":
    main()
