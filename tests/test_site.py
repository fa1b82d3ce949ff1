"""`bigtopics site`: its data checked against the store, the document topics and the model, and
its pages opened in headless Chromium (skipped without chromium: apt-get install chromium)."""

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from bigtopics.cli import main
from bigtopics.doc_topics import DocTopics
from bigtopics.model import load_model
from bigtopics.report import find_chromium, render_in_browser
from bigtopics.store import open_store


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
    # site.js and fields.js, a page of data per topic, the shards of books and of titles
    assert marker["data_files"] == 2 + site["n_topics"] + len(site["book_shards"]) + site["title_shards"]
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
