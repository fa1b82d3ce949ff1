"""`bigtopics site`: its data checked against the store, the document topics and the model, and
its pages opened in headless Chromium (skipped without chromium: apt-get install chromium).

The search index and facets (site/search_index.py, site/facets.py): postings against a slow
reading of the store, the build spilled in runs against one in memory, and the search box in
headless Chromium on Gutenberg books (by author, subject, title; only the shards of the query's
words loaded, counted from the browser's performance entries); list fields charted by item and
dates by the span they cover, on Gutenberg and Reuters."""

import csv
import functools
import gzip
import http.server
import json
import re
import threading
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from bigtopics.cli import main
from bigtopics.doc_topics import DocTopics
from bigtopics.model import load_model
from bigtopics.report import find_chromium, render_in_browser
from bigtopics.site import search_index
from bigtopics.site.facets import FieldTally
from bigtopics.site.search_index import SearchIndexWriter, decode, encode, js_order, value_words, words
from bigtopics.store import open_store

from .test_export_readers import chrome_driver

CORPORA = Path("/work/shared/corpora")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def built(demo_store, tmp_path_factory):
    """The demo books: a run with held-out scores, its document topics, an evaluation, the site."""
    root = tmp_path_factory.mktemp("site")
    run, dt, out = root / "run", root / "doc_topics.zarr", root / "site"
    for args in (["train", demo_store, "-o", run, "-k", 8, "--epochs", 2, "--heldout", 50, "--heldout-every", 2,
                  "--quiet"],
                 ["infer", run, demo_store, "-o", dt, "--quiet"],
                 ["evaluate", run, "--quiet", "--heldout-docs", 50],
                 ["site", run, "--doc-topics", dt, "-o", out, "--quiet"]):
        result = invoke(*args)
        assert result.exit_code == 0, result.output
    return run, dt, out, open_store(demo_store)


def read_data(path: Path):
    """The value a data/*.js file passes to BT.put."""
    text = path.read_text(encoding="utf-8")
    match = re.fullmatch(r'BT\.put\("([^"]+)",(.*)\);\n', text, re.DOTALL)
    return match.group(1), json.loads(match.group(2))


def books_of(out: Path) -> list[dict]:
    site = read_data(out / "data" / "site.js")[1]
    books = []
    for shard in range(len(site["book_shards"])):
        name, rows = read_data(out / "data" / "books" / f"{shard}.js")
        assert name == f"books/{shard}" and rows[0]["b"] == site["book_shards"][shard]
        books.extend(rows)
    return books


def test_books_group_sections_and_weigh_them_by_tokens(built):
    _, dt_path, out, store = built
    dt = DocTopics(dt_path)
    books = books_of(out)
    section_of = store.metadata("section_of")
    assert [b["id"] for b in books] == list(dict.fromkeys(section_of.tolist()))  # every book once, in store order
    assert [b["b"] for b in books] == list(range(len(books)))
    theta = np.zeros((dt.n_docs, dt.n_topics))
    lengths = np.zeros(dt.n_docs)
    for first, indptr, topics, weights, doc_lengths in dt.iter_blocks():
        for d in range(len(indptr) - 1):
            theta[first + d, topics[indptr[d]:indptr[d + 1]]] = weights[indptr[d]:indptr[d + 1]]
        lengths[first:first + len(doc_lengths)] = doc_lengths
    docs = [s["d"] for b in books for s in b["sections"]]
    assert docs == list(range(store.n_docs))
    for book in books:
        members = [s["d"] for s in book["sections"]]
        assert all(section_of[d] == book["id"] for d in members)
        assert [s["i"] for s in book["sections"]] == store.metadata("section_index")[members].tolist()
        expected = lengths[members] @ theta[members] / lengths[members].sum()
        got = np.zeros(dt.n_topics)
        for k, w in book["topics"]:
            got[k] = w
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-6)
        assert [w for _, w in book["topics"]] == sorted((w for _, w in book["topics"]), reverse=True)
        assert book["title"] == store.metadata("title")[members[0]]


def test_topic_pages_hold_the_model_and_the_books_most_about_each_topic(built):
    run, _, out, _ = built
    model = load_model(run)
    books = books_of(out)
    evaluation = {r["topic"]: r for r in json.loads((run / "evaluation.json").read_text())["topics"]}
    for k in range(model.n_topics):
        name, page = read_data(out / "data" / "topics" / f"{k}.js")
        assert name == f"topics/{k}"
        assert [w for w, _ in page["words"]] == [w for w, _ in model.top_words(k, 30)]
        np.testing.assert_allclose([p for _, p in page["words"]], [p for _, p in model.top_words(k, 30)], rtol=1e-3)
        assert page["coherence"] == pytest.approx(evaluation[k]["coherence"])
        assert (page["npmi"], page["c_v"]) == pytest.approx((evaluation[k]["npmi"], evaluation[k]["c_v"]))
        weight_of = {b["b"]: dict(map(tuple, b["topics"])).get(k, 0.0) for b in books}
        best = sorted(weight_of.values(), reverse=True)[:len(page["books"])]
        np.testing.assert_allclose([b["weight"] for b in page["books"]], best, rtol=1e-3)
        for entry in page["books"]:
            sections = {s["d"]: dict(map(tuple, s["topics"])).get(k, 0.0) for s in books[entry["book"]]["sections"]}
            listed = [s["doc"] for s in entry["sections"]]
            assert all(d in sections for d in listed)  # sections of that book, grouped under it
            assert [s["weight"] for s in entry["sections"]] == pytest.approx(
                sorted(sections.values(), reverse=True)[:len(listed)], rel=1e-3)


def test_weight_over_a_field_is_the_share_of_its_tokens(built):
    _, dt_path, out, store = built
    dt = DocTopics(dt_path)
    fields = read_data(out / "data" / "fields.js")[1]
    site = read_data(out / "data" / "site.js")[1]
    names = {f["name"] for f in site["fields"]}
    assert {"gutenberg_issued", "author", "language", "section_index"} <= names and "title" not in names
    years = np.array([int(v[:4]) for v in store.metadata("gutenberg_issued")])
    assert fields["gutenberg_issued"]["values"] == sorted(set(years.tolist()))  # dates count as their year
    mass = np.zeros((len(fields["gutenberg_issued"]["values"]), dt.n_topics))
    tokens = np.zeros(len(mass))
    row = {v: i for i, v in enumerate(fields["gutenberg_issued"]["values"])}
    for first, indptr, topics, weights, lengths in dt.iter_blocks():
        for d in range(len(indptr) - 1):
            r = row[years[first + d]]
            tokens[r] += lengths[d]
            mass[r, topics[indptr[d]:indptr[d + 1]]] += lengths[d] * weights[indptr[d]:indptr[d + 1]]
    for k in range(dt.n_topics):
        page = read_data(out / "data" / "topics" / f"{k}.js")[1]
        np.testing.assert_allclose(page["by_field"]["gutenberg_issued"], mass[:, k] / tokens, rtol=1e-3, atol=1e-6)
    with open(out / "csv" / "topic_by_gutenberg_issued.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(tokens) * dt.n_topics


def test_site_json_counts_the_folder(built):
    _, dt_path, out, store = built
    marker = json.loads((out / "site.json").read_text())
    site = read_data(out / "data" / "site.js")[1]
    # site.js, fields.js and search.js, a page of data per topic, the shards of books, titles and
    # the search index, and the index's own files of frequent words
    assert marker["data_files"] == (3 + site["n_topics"] + len(site["book_shards"]) + site["title_shards"]
                                    + site["search_shards"] + site["search_own_files"])
    assert marker["data_files"] == len(list((out / "data").rglob("*.js")))
    assert marker["n_docs"] == store.n_docs and marker["n_books"] == len(books_of(out)) == site["n_books"]
    assert site["epochs"] == 2.0  # --epochs 2 over the documents not held out (report.training_documents)


def test_csv_downloads(built):
    _, dt_path, out, store = built
    dt = DocTopics(dt_path)
    with open(out / "csv" / "doc_topics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    nnz = sum(len(topics) for _, _, topics, _, _ in dt.iter_blocks())
    assert len(rows) == nnz and rows[0]["id"] == store.doc_ids(0, 1)[0]
    assert {r["book_id"] for r in rows} == set(store.metadata("section_of").tolist())
    with open(out / "csv" / "topics.csv", newline="") as f:
        topics = list(csv.DictReader(f))
    assert [int(t["topic"]) for t in topics] == list(range(dt.n_topics))
    with open(out / "csv" / "training.csv", newline="") as f:
        training = list(csv.DictReader(f))
    assert training and any(r["heldout_loglik"] for r in training)


def test_overwrite_rules(built, tmp_path):
    run, dt, out, _ = built
    result = invoke("site", run, "--doc-topics", dt, "-o", out, "--quiet")
    assert result.exit_code == 1 and "--overwrite" in result.output
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    result = invoke("site", run, "--doc-topics", dt, "-o", mine, "--quiet", "--overwrite")
    assert result.exit_code == 1 and (mine / "notes.txt").read_text() == "keep me"
    result = invoke("site", run, "--doc-topics", dt, "-o", run, "--quiet", "--overwrite")
    assert result.exit_code == 1 and (run / "settings.json").exists()


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")


def links(dom: str, page: str) -> list[str]:
    return re.findall(rf'href="({page}\.html#[^"]+)"', dom)


def test_pages_in_chromium(built, browser, tmp_path):
    """Open the pages from file:// as a reader would: topics and their words on the index, a
    title found by the search box, a topic page's book links followed to the book's page. The
    screenshots are kept in the test's tmp_path for a person to look at."""
    run, _, out, store = built
    model = load_model(run)
    base = (out / "index.html").resolve().as_uri().rsplit("/", 1)[0]
    index = render_in_browser(f"{base}/index.html", tmp_path / "index.png")
    for k in range(model.n_topics):
        assert f"Topic {k}" in index and " ".join(w for w, _ in model.top_words(k, 10)) in index
    assert "Held-out log-likelihood per token" in index and "held-out left-to-right (bigtopics evaluate)" in index
    assert 'href="csv/doc_topics.csv"' in index

    title = "The Hound of the Baskervilles"
    found = render_in_browser(f"{base}/index.html#q=hound%20baskervilles", tmp_path / "search.png")
    hits = re.search(r'<ul id="title-results">(.*?)</ul>', found, re.DOTALL).group(1)
    assert title in hits and hits.count("<li>") == 1
    word = model.top_words(3, 1)[0][0]
    found = render_in_browser(f"{base}/index.html#q={word}", tmp_path / "search-word.png")
    assert "topic.html#k=3" in re.search(r'<ul id="topic-results">(.*?)</ul>', found, re.DOTALL).group(1)

    topic = render_in_browser(f"{base}/topic.html#k=3", tmp_path / "topic.png")
    assert all(w in topic for w, _ in model.top_words(3, 30))
    assert "share of the tokens of each gutenberg_issued in topic 3" in topic and "<polyline" in topic
    assert "coherence: UMass" in topic and ", NPMI " in topic and ", C_V " in topic
    book_links, section_links = links(topic, "doc"), [u for u in links(topic, "doc") if "&amp;s=" in u]
    assert book_links and section_links
    target = section_links[0].replace("&amp;", "&")
    b, d = (int(x) for x in re.fullmatch(r"doc\.html#b=(\d+)&s=(\d+)", target).groups())
    # (headless Chromium's screenshot of a page scrolled to the marked section comes out blank;
    # the screenshot to look at is the book's page from its top, below)
    doc = render_in_browser(f"{base}/{target}", tmp_path / "doc-section.png")
    book_title = store.metadata("title")[d]
    assert f'<h1 id="book-title">{book_title}</h1>' in doc
    assert f'<tr id="d{d}" class="here">' in doc  # the linked section is marked
    n_sections = int((store.metadata("section_of") == store.metadata("section_of")[d]).sum())
    assert re.search(r'<table id="sections">(.*?)</table>', doc, re.DOTALL).group(1).count("<tr id=") == n_sections
    assert "topic.html#k=" in doc
    whole = render_in_browser(f"{base}/doc.html#b={b}", tmp_path / "doc.png")
    assert f'<h1 id="book-title">{book_title}</h1>' in whole and 'class="here"' not in whole
    for name in ("index", "search", "topic", "doc"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000


def test_pages_from_a_web_server(built, browser, tmp_path):
    """The same folder served over HTTP (Python's http.server) works as from file://."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    run, _, out, _ = built
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(out))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        found = render_in_browser(f"{base}/index.html#q=baskervilles", tmp_path / "served.png")
        assert "The Hound of the Baskervilles" in re.search(r'<ul id="title-results">(.*?)</ul>', found,
                                                            re.DOTALL).group(1)
        topic = render_in_browser(f"{base}/topic.html#k=1", tmp_path / "served-topic.png")
        assert all(w in topic for w, _ in load_model(run).top_words(1, 30))
    finally:
        server.shutdown()


@pytest.mark.slow
def test_a_library_of_100k_sections(browser, tmp_path):
    """benchmarks/bench_site.py's library: 2,000 books cut into about 100,000 sections, ingested,
    trained briefly, inferred and built into a site whose pages open in Chromium (the time and
    peak memory of the build are benchmarks/RESULTS.md's, "Site")."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import bench_site

    result = bench_site.run(tmp_path, books=2000, tokens_per_book=2500, section_tokens=50)
    assert result["books"] == 2000 and result["documents"] >= 90_000
    assert all(page["shows"] for page in result["pages"].values()), result["pages"]
    assert result["site_files"] < 500  # shards of books, not a page per document


# -- search index and facets ----------------------------------------------------------------------
GUTENBERG, REUTERS = CORPORA / "gutenberg_books" / "docs.jsonl.gz", CORPORA / "reuters21578" / "docs.jsonl.gz"


def ok(*args):
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result


def read_index(data: Path) -> dict[str, list[int]]:
    """Every term's keys, read from the shards and own files as a page would."""
    firsts = read_data(data / "search.js")[1]["shards"]
    index = {}
    for n, first in enumerate(firsts):
        name, entries = read_data(data / "search" / f"{n}.js")
        assert name == f"search/{n}" and entries[0][0] == first
        for entry in entries:
            text = entry[2] if isinstance(entry[2], str) else read_data(data / "terms" / f"{entry[2]}.js")[1]
            index[entry[0]] = decode(text)
            assert len(index[entry[0]]) == entry[1]
    terms = list(index)
    assert terms == sorted(terms, key=js_order) and len(set(terms)) == len(terms)
    return index


def test_postings_round_trip():
    rng = np.random.default_rng(1)
    for n, high in ((1, 3), (50, 100), (2000, 2_400_000)):
        keys = np.sort(rng.choice(high, size=min(n, high), replace=False))
        assert decode(encode(keys)) == keys.tolist()
    assert decode(encode(np.array([40, 41]), previous=7)) == [33, 34]  # (differences from 7, read from 0)


def test_words_fold_case_accents_and_lists():
    assert words("Brontë, CHARLOTTE -- Jane_Eyre (1847)") == ["bronte", "charlotte", "jane", "eyre", "1847"]
    assert words("Search the sea-shore") == ["search", "the", "sea", "shore"]
    assert value_words('["England -- Fiction", "Love stories"]') == ["england", "fiction", "love", "stories"]
    assert value_words(np.float64(1775.0)) == ["1775"] and value_words(np.float64(0.5)) == []


def test_index_built_in_runs_equals_one_in_memory(tmp_path):
    """Spilling every few postings and merging the runs writes the same files as holding them all."""
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(40)] + ["ζeta", "\U0001d400x", "\uff41b"]  # beyond the BMP sorts as JS does
    books = [(set(rng.choice(vocab, 3)), set(rng.choice(vocab, int(rng.integers(0, 12))))) for _ in range(400)]
    out = {}
    for spill in (2000, 10**9):
        data = tmp_path / str(spill) / "data"
        data.mkdir(parents=True)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(search_index, "SHARD_CHARS", 500)
            mp.setattr(search_index, "OWN_FILE_CHARS", 80)
            writer = SearchIndexWriter(data, spill_bytes=spill)
            for b, (title, other) in enumerate(books):
                writer.add(b, title, other)
            counts = writer.finish()
        (data / "search.js").write_bytes(search_index._js("search", counts))
        assert [p.name for p in data.iterdir() if p.name.startswith(".")] == []  # the runs are gone
        out[spill] = {p.relative_to(data): p.read_bytes() for p in data.rglob("*.js")}
        assert counts["n_own_files"] > 0 and len(counts["shards"]) > 5
    assert out[2000] == out[10**9]
    index = read_index(tmp_path / "2000" / "data")
    expected = {}
    for b, (title, other) in enumerate(books):
        for w in title | other:
            expected.setdefault(w, []).append(2 * b + (w in title))
    assert index == expected


@pytest.fixture(scope="module")
def gutenberg(tmp_path_factory):
    """40 Gutenberg books (their first 3,000 words) cut into sections of 300 tokens; the site built
    with small shards (300 characters; a word's own file from 60), so that a query has many to skip."""
    if not GUTENBERG.exists():
        pytest.skip("no Gutenberg corpus at /work/shared/corpora")
    root = tmp_path_factory.mktemp("gutenberg")
    source = []
    with gzip.open(GUTENBERG, "rt", encoding="utf-8") as f:
        for _, line in zip(range(40), f):
            doc = json.loads(line)
            doc["text"] = " ".join(doc["text"].split()[:3000])
            source.append(doc)
    (root / "books.jsonl").write_text("".join(json.dumps(d) + "\n" for d in source))
    store, run, dt, site = root / "books.zarr", root / "run", root / "dt.zarr", root / "site"
    ok("ingest", root / "books.jsonl", "-o", store, "--section-tokens", 300, "--quiet")
    ok("train", store, "-o", run, "-k", 6, "--epochs", 1, "--quiet")
    ok("infer", run, store, "-o", dt, "--quiet")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(search_index, "SHARD_CHARS", 300)
        mp.setattr(search_index, "OWN_FILE_CHARS", 60)
        ok("site", run, "--doc-topics", dt, "-o", site, "--quiet")
    return source, open_store(store), dt, site


def book_words(store) -> list[tuple[set, set]]:
    """Per book, slowly: (words of its title, words of its id and its sections' other metadata)."""
    section_of = store.metadata("section_of").tolist()
    fields = {f: store.metadata(f).tolist() for f in store.metadata_fields if f not in ("section_index", "section_of")}
    books = {}
    for d, book in enumerate(section_of):
        title, other = books.setdefault(book, (set(), set(words(book))))
        for f, values in fields.items():
            (title if f == "title" else other).update(value_words(values[d]))
    return list(books.values())


def test_index_holds_every_book_by_its_sections_words(gutenberg):
    source, store, _, site = gutenberg
    per_book = book_words(store)
    assert len(per_book) == len(source)
    expected = {}
    for b, (title, other) in enumerate(per_book):
        for w in title | other:
            expected.setdefault(w, []).append(2 * b + (w in title))
    assert read_index(site / "data") == expected
    assert {"austen", "dickens", "fiction", "england", "1994"} <= set(expected)


def expected_books(per_book, query: str) -> list[int]:
    """Books holding every word of the query, those with all of them in the title first."""
    terms = words(query)
    hits = [b for b, (t, o) in enumerate(per_book) if all(w in t | o for w in terms)]
    return [b for b in hits if all(w in per_book[b][0] for w in terms)] + \
        [b for b in hits if not all(w in per_book[b][0] for w in terms)]


@pytest.fixture(scope="module")
def served(gutenberg):
    site = gutenberg[3]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def driver():
    chrome = chrome_driver()  # (skips without chromium and chromedriver)
    yield chrome
    chrome.quit()


def type_query(driver, base: str, query: str) -> dict:
    """The index page opened afresh, the query typed; what the results show and the files loaded."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{base}/index.html?fresh={query}")  # (a new document: no script loaded before)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "return document.querySelectorAll('#topics .card').length"))
    before = driver.execute_script("return performance.getEntriesByType('resource').length")
    driver.execute_script("var q = document.getElementById('q'); q.value = arguments[0];"
                          "q.dispatchEvent(new Event('input'));", query)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "return document.getElementById('results').getAttribute('data-done') === arguments[0]", query))
    return driver.execute_script(
        "var e = performance.getEntriesByType('resource').slice(arguments[0]);"
        "return {files: e.map(function (x) { return x.name.split('/data/')[1]; }),"
        " found: document.getElementById('found').textContent,"
        " links: Array.prototype.map.call(document.querySelectorAll('#title-results li a'), function (a) {"
        "   return a.getAttribute('href'); }),"
        " rows: Array.prototype.map.call(document.querySelectorAll('#title-results li'), function (li) {"
        "   return li.textContent; })}", before)


def shard_of(firsts: list[str], term: str) -> int:
    return max(i for i, f in enumerate(firsts) if js_order(f) <= js_order(term))


def test_search_finds_by_author_subject_and_title_loading_only_their_shards(gutenberg, served, driver):
    source, store, _, site = gutenberg
    per_book = book_words(store)
    index = read_data(site / "data" / "search.js")[1]
    firsts = index["shards"]
    assert len(firsts) > 20
    entries = {e[0]: e for n in range(len(firsts)) for e in read_data(site / "data" / "search" / f"{n}.js")[1]}
    everything = sum(p.stat().st_size for d in ("search", "terms") for p in (site / "data" / d).iterdir())
    for query in ("austen", "Dickens", "dickens fiction", "england", "emma", "Sea", "pg158", "austen dickens"):
        got = type_query(driver, served, query)
        expected = expected_books(per_book, query)
        assert got["found"].endswith(f"({len(expected)})"), (query, got["found"])
        assert got["links"] == [f"doc.html#b={b}" for b in expected[:25]], query
        for row, b in zip(got["rows"], expected):
            assert row.startswith(source[b]["title"]) and source[b]["id"] in row and source[b]["author"] in row
        # loaded: search.js, the shard of each word, the own file of each word that has one, and
        # the titles of the books listed; nothing else
        terms = words(query)
        wanted = {"search.js"} | {f"search/{shard_of(firsts, t)}.js" for t in terms} | \
            {f"terms/{entries[t][2]}.js" for t in terms if t in entries and not isinstance(entries[t][2], str)} | \
            {f"titles/{b // index['titles_per_shard']}.js" for b in expected[:25]}
        assert set(got["files"]) == wanted, query
        # (the sizes on disk: a reload the server answers 304 reports no body)
        index_bytes = sum((site / "data" / f).stat().st_size for f in got["files"]
                          if f.startswith(("search/", "terms/")))
        assert 0 < index_bytes < everything / 4, query
    assert read_data(site / "data" / "search.js")[1]["byline"] == "author"
    assert len(expected_books(per_book, "austen")) == sum("Austen" in d["author"] for d in source) == 6
    assert expected_books(per_book, "sea") != expected_books(per_book, "search") or not expected_books(per_book, "sea")
    # a word with * matches the words starting with it
    got = type_query(driver, served, "aust*")
    prefixed = [b for b, (t, o) in enumerate(per_book) if any(w.startswith("aust") for w in t | o)]
    assert got["found"].endswith(f"({len(prefixed)})") and len(prefixed) >= 6
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def tally_by_hand(store, dt_path, field: str, items_of) -> dict:
    """{value: (tokens, per-topic tokens)} with every document counted under each of its items."""
    dt = DocTopics(dt_path)
    values = store.metadata(field).tolist()
    out = {}
    for first, indptr, topics, weights, lengths in dt.iter_blocks():
        for d in range(len(indptr) - 1):
            for item in items_of(values[first + d]):
                tokens, mass = out.setdefault(item, [0.0, np.zeros(dt.n_topics)])
                out[item][0] = tokens + lengths[d]
                mass[topics[indptr[d]:indptr[d + 1]]] += lengths[d] * weights[indptr[d]:indptr[d + 1]]
    return out


def test_list_fields_are_charted_by_item(gutenberg):
    _, store, dt, site = gutenberg
    fields, summary = read_data(site / "data" / "fields.js")[1], read_data(site / "data" / "site.js")[1]
    kinds = {f["name"]: (f["kind"], f["unit"]) for f in summary["fields"]}
    assert kinds["subjects"] == ("list", None) and kinds["gutenberg_issued"] == ("date", "year")
    expected = tally_by_hand(store, dt, "subjects", json.loads)
    assert sorted(fields["subjects"]["values"]) == sorted(expected) and "England -- Fiction" in expected
    assert not any(v.startswith("[") for v in fields["subjects"]["values"])
    for k in range(6):
        page = read_data(site / "data" / "topics" / f"{k}.js")[1]
        for v, share, tokens in zip(fields["subjects"]["values"], page["by_field"]["subjects"],
                                    fields["subjects"]["tokens"]):
            assert tokens == pytest.approx(expected[v][0])
            assert share == pytest.approx(expected[v][1][k] / expected[v][0], rel=1e-3, abs=1e-6)


def test_reuters_categories_and_months_are_charted(tmp_path):
    """Every 70th Reuters story (February to October 1987): its categories (a list) by item, its
    dates by month, every month from the first to the last."""
    if not REUTERS.exists():
        pytest.skip("no Reuters corpus at /work/shared/corpora")
    with gzip.open(REUTERS, "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for i, line in enumerate(f) if i % 70 == 0]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs if d["text"].strip()))
    store, run, dt, site = (tmp_path / n for n in ("r.zarr", "run", "dt.zarr", "site"))
    ok("ingest", tmp_path / "r.jsonl", "-o", store, "--quiet")
    ok("train", store, "-o", run, "-k", 4, "--epochs", 1, "--quiet")
    ok("infer", run, store, "-o", dt, "--quiet")
    ok("site", run, "--doc-topics", dt, "-o", site, "--quiet")
    fields, summary = read_data(site / "data" / "fields.js")[1], read_data(site / "data" / "site.js")[1]
    kinds = {f["name"]: (f["kind"], f["unit"]) for f in summary["fields"]}
    assert kinds["date"] == ("date", "month") and kinds["topics"] == ("list", None)
    s = open_store(store)
    month_names = {m: i + 1 for i, m in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP",
                                                    "OCT", "NOV", "DEC"])}
    months = sorted({month_names[v.split("-")[1]] for v in s.metadata("date").tolist()})
    assert fields["date"]["values"] == [f"1987-{m:02d}" for m in range(months[0], months[-1] + 1)]
    assert months[0] == 2 and months[-1] >= 9 and len(months) < months[-1] - 1  # empty months among them
    by_month = tally_by_hand(s, dt, "date", lambda v: [v.split(" ")[0].split("-", 1)[1]])  # "FEB-1987"
    by_category = tally_by_hand(s, dt, "topics", json.loads)
    assert "earn" in fields["topics"]["values"] and sorted(fields["topics"]["values"]) == sorted(by_category)
    for k in range(4):
        page = read_data(site / "data" / "topics" / f"{k}.js")[1]
        for label, share in zip(fields["date"]["values"], page["by_field"]["date"]):
            key = next((m for m in by_month if f"{m[4:]}-{month_names[m[:3]]:02d}" == label), None)
            if key is None:
                assert share is None  # an empty month: no share, a gap in the line
            else:
                assert share == pytest.approx(by_month[key][1][k] / by_month[key][0], rel=1e-3, abs=1e-6)
        for v, share in zip(fields["topics"]["values"], page["by_field"]["topics"]):
            assert share == pytest.approx(by_category[v][1][k] / by_category[v][0], rel=1e-3, abs=1e-6)


def test_dates_are_binned_by_the_span_they_cover():
    """Days within a month, months within a year or two, years beyond; empty bins kept."""
    def tally(values):
        t = FieldTally("date", 2)
        n = len(values)
        t.add(np.array(values), np.arange(n), np.zeros(n, np.int64), np.ones(n), np.ones(n))
        return t.result()

    days = tally(["1987-02-26", "1987-02-28", "1987-03-01"])
    assert (days["unit"], days["values"]) == ("day", ["1987-02-26", "1987-02-27", "1987-02-28", "1987-03-01"])
    assert days["tokens"] == [1, 0, 1, 1] and np.isnan(days["share"][0][1]) and days["share"][0][0] == 1
    months = tally(["26-FEB-1987 15:01:01.79", "1-OCT-1987 10:00:00.00"])
    assert months["unit"] == "month" and months["values"][0] == "1987-02" and len(months["values"]) == 9
    years = tally(["1851", "1994-08-01", "2006-04-27"])
    assert (years["unit"], years["values"], years["numeric"]) == ("year", [1851, 1994, 2006], True)
    text = tally(["1851", "not a date"])
    assert text["kind"] == "text" and text["values"] == ["1851", "not a date"]
