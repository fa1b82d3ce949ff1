"""Hardening against hostile text (issue 47, item 3): titles, authors, ids, a metadata field's
name and values, words of the vocabulary and the run folder's name that are HTML, script or
spreadsheet formulas reach every page we write or feed as text, and no CSV cell we write starts a
formula.

One corpus (bow-jsonl, so that its words are kept as given) is ingested, trained, inferred,
exported and turned into a site and a report once for the module; one headless Chromium (selenium,
Debian's chromium-driver) opens every page kind: dfr-browser's routes over the export's data
folder, the site's pages, report.html and pyLDAvis's page made from pyldavis.json. A page passes
when no payload ran (window.__pwned unset, no alert, confirm or prompt called) and the hostile text
is shown literally where the page shows it."""

import csv
import functools
import html
import http.server
import io
import json
import shutil
import threading
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from test_export_readers import DFR_BROWSER, chrome_driver

from bigtopics.cli import main
from bigtopics.store import open_store

PAYLOADS = ['<img src=x onerror=window.__pwned=1>', '"><script>window.__pwned=1</script>',
            '</script><script>window.__pwned=1</script>', "'><svg onload=alert(7)>", '=HYPERLINK("http://x","y")',
            '@SUM(1)', '+1', '-1', '\tTAB', '<!--<script>']
# words as bow-jsonl keeps them (lowercased), in every document so that they lead every topic
HOSTILE_WORDS = ['<img src=x onerror=window.__pwned=1>', '</script><script>window.__pwned=1</script>',
                 '=hyperlink("http://x","y")', '@sum(1)', '-minus', '+plus']
PLAIN_WORDS = ["apple", "river", "stone", "cloud", "forest", "metal", "paper", "music", "ocean", "engine", "garden"]
FIELD = PAYLOADS[0]  # a metadata field named like a tag
RUN_NAME = '"><img src=x onerror=window.__pwned=1>'
N_DOCS, N_TOPICS = 60, 3
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NUMERIC = {"doc", "topic", "weight", "book", "tokens", "share", "coherence", "npmi", "c_v", "rank", "probability",
           "year", "score", "minibatch", "epoch", "docs_seen", "tokens_seen", "seconds", "tokens_per_s",
           "heldout_loglik", "heldout_perplexity", "table_entries", "peak_rss_bytes", "final"}


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Everything written once: store, run (named RUN_NAME), document topics, export, site, report."""
    root = tmp_path_factory.mktemp("hostile")
    docs, store, run, dt = root / "docs.jsonl", root / "store.zarr", root / RUN_NAME, root / "doc_topics.zarr"
    with open(docs, "w") as f:
        for i in range(N_DOCS):
            counts = {w: 1 + (i * 7 + j) % 5 for j, w in enumerate(PLAIN_WORDS) if (i + j) % 3}
            counts.update({w: 3 + (i + j) % 4 for j, w in enumerate(HOSTILE_WORDS)})
            f.write(json.dumps({"id": f"{PAYLOADS[i % len(PAYLOADS)]}#{i}", "title": PAYLOADS[i % len(PAYLOADS)],
                                "author": PAYLOADS[(i + 1) % len(PAYLOADS)], FIELD: PAYLOADS[(i + 2) % len(PAYLOADS)],
                                "year": 1900 + i % 30, "score": -(i % 7), "counts": counts}) + "\n")
    invoke("ingest", docs, "-o", store, "--format", "bow-jsonl", "--max-df", 1.0, "--stoplist", "none", "--quiet")
    assert set(HOSTILE_WORDS) <= set(open_store(store).vocab.tolist())
    invoke("train", store, "-o", run, "-k", N_TOPICS, "--epochs", 2, "--quiet")
    invoke("infer", run, store, "-o", dt, "--quiet")
    invoke("export", run, "-o", root / "export", "--doc-topics", dt)
    invoke("site", run, "--doc-topics", dt, "-o", root / "site", "--quiet")
    invoke("report", run, "--doc-topics", dt)
    return SimpleNamespace(root=root, store=open_store(store), run=run, export=root / "export", site=root / "site")


# -- the files as a spreadsheet reads them ---------------------------------------------------------
def assert_no_formula(rows: list[list[str]], where: str, numeric=NUMERIC):
    """No cell starts a formula, but a number in a column of numbers (-3 is a value)."""
    header = rows[0]
    for row in rows:
        for name, cell in zip(header, row):
            if cell.startswith(FORMULA_STARTS):
                assert name in numeric and row is not header, (where, name, cell)
                float(cell)


def test_site_csvs_start_no_formula(hostile):
    files = sorted((hostile.site / "csv").glob("*.csv"))
    assert {"doc_topics.csv", "book_topics.csv", "topics.csv", "topic_words.csv", "topic_by_author.csv",
            "topic_by_score.csv"} <= {p.name for p in files}
    for path in files:
        with open(path, newline="", encoding="utf-8") as f:
            assert_no_formula(list(csv.reader(f)), path.name)
    with open(hostile.site / "csv" / "book_topics.csv", newline="", encoding="utf-8") as f:
        titles = {row["title"] for row in csv.DictReader(f)}
    # shown as written, after the quote that keeps a spreadsheet from running it
    assert titles == {"'" + p if p.startswith(FORMULA_STARTS) else p for p in PAYLOADS}
    with open(hostile.site / "csv" / "topic_by_score.csv", newline="", encoding="utf-8") as f:
        assert {row["score"] for row in csv.DictReader(f)} == {str(-s) for s in range(7)}  # numbers stay numbers


def test_dfr_meta_csv_is_html_for_dfr_browser_and_starts_no_formula(hostile):
    with zipfile.ZipFile(hostile.export / "dfr-browser" / "meta.csv.zip") as archive:
        rows = list(csv.reader(io.TextIOWrapper(archive.open("meta.csv"), encoding="utf-8", newline="")))
    assert_no_formula(rows, "meta.csv")
    header = rows[0]
    assert [html.unescape(h) for h in header[:3]] == ["id", "title", FIELD] and "<" not in header[2]
    store = hostile.store
    ids, titles, values = store.doc_ids(0, N_DOCS), store.metadata("title"), store.metadata(FIELD)
    for d, row in enumerate(rows[1:]):
        cells = dict(zip(header, row))
        for cell in row:
            assert not any(c in cell for c in "<>\"'"), cell  # dfr-browser inserts every cell with .html()
        assert html.unescape(cells["id"]) == ids[d]
        assert html.unescape(cells["title"]) == titles[d] == PAYLOADS[d % len(PAYLOADS)]
        assert html.unescape(cells[header[2]]) == values[d]
        assert cells["score"] == str(-(d % 7))
    info = json.loads((hostile.export / "dfr-browser" / "info.json").read_text())
    assert "<img" not in info["title"] and html.unescape(info["title"]) == f"bigtopics: {RUN_NAME}"


# -- the pages in headless Chromium ----------------------------------------------------------------
@pytest.fixture(scope="module")
def driver():
    chrome = chrome_driver()
    # every page: alert, confirm and prompt recorded instead of shown
    chrome.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": (
        "window.__alerts = []; ['alert', 'confirm', 'prompt'].forEach(function (name) {"
        " window[name] = function (m) { window.__alerts.push(name + ':' + m); }; });")})
    yield chrome
    chrome.quit()


def settle(driver):
    """Wait until an image with a broken src inserted now has failed (so has any payload's)."""
    driver.execute_async_script(
        "var done = arguments[arguments.length - 1], img = document.createElement('img');"
        "img.onerror = img.onload = function () { setTimeout(done, 100); };"
        "img.src = 'x-settle-' + Math.random(); document.body.appendChild(img);")


def assert_inert(driver, where: str):
    settle(driver)
    pwned, alerts = driver.execute_script("return [typeof window.__pwned, window.__alerts]")
    assert (pwned, alerts) == ("undefined", []), where


def text_of(driver, selector: str, needle: str = "", count: int = 1, timeout: float = 30) -> str:
    """The text of the elements matching selector, once there are `count` of them and their text
    holds needle."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def ready(_):
        found = driver.find_elements(By.CSS_SELECTOR, selector)
        text = "\n".join(e.get_attribute("textContent") for e in found)
        return [text] if len(found) >= count and needle in text else False

    try:
        return WebDriverWait(driver, timeout).until(ready)[0]
    except TimeoutException:
        shown = [e.get_attribute("textContent")[:300] for e in driver.find_elements(By.CSS_SELECTOR, selector)]
        raise AssertionError(f"{driver.current_url}: {selector} never held {needle!r}: {shown}") from None


@pytest.fixture(scope="module")
def dfr_url(hostile):
    """dfr-browser's own files with the export's folder as data/, served on 127.0.0.1."""
    site = hostile.root / "dfr-site"
    shutil.copytree(DFR_BROWSER, site)
    shutil.copytree(hostile.export / "dfr-browser", site / "data")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_dfr_browser_shows_hostile_text_and_runs_none(hostile, driver, dfr_url):
    driver.get(dfr_url + "#/model/grid")
    grid = text_of(driver, "#model_view_plot g.topic", count=N_TOPICS)
    assert any(w in grid for w in HOSTILE_WORDS)  # the topics' top words, as words
    assert RUN_NAME in text_of(driver, ".model_title", RUN_NAME)
    assert_inert(driver, "#/model/grid")
    for view, selector in (("scaled", "#model_view_plot g.topic"), ("list", "#model_view_list tbody tr"),
                           ("conditional", "#model_view_conditional svg")):
        driver.get(dfr_url + f"#/model/{view}")
        text_of(driver, selector)
        assert_inert(driver, f"#/model/{view}")
    driver.get(dfr_url + "#/about")
    assert RUN_NAME in text_of(driver, "#meta_info", RUN_NAME)
    assert_inert(driver, "#/about")
    driver.get(dfr_url + "#/bib")
    bib = text_of(driver, "#bib_main li a", PAYLOADS[-1], count=N_DOCS)
    assert all(p in bib for p in PAYLOADS)
    assert_inert(driver, "#/bib")
    for d in range(len(PAYLOADS)):  # a document of every payload: its citation is all its values
        driver.get(dfr_url + f"#/doc/{d}")
        header = text_of(driver, "#doc_header", f"#{d}.")
        values = (f"{PAYLOADS[d]}#{d}", *(PAYLOADS[(d + i) % len(PAYLOADS)] for i in range(3)))
        assert all(f"{v}. " in header for v in values), header
        assert_inert(driver, f"#/doc/{d}")
    for k in range(1, N_TOPICS + 1):
        driver.get(dfr_url + f"#/topic/{k}")
        words = text_of(driver, "#topic_words tbody tr", count=5)
        assert sum(w in words for w in HOSTILE_WORDS) >= 3
        assert any(p in text_of(driver, "#topic_docs tbody tr a.citation") for p in PAYLOADS)
        assert_inert(driver, f"#/topic/{k}")
    driver.get(dfr_url + "#/words")
    words = text_of(driver, "#vocab_list li", count=len(HOSTILE_WORDS))
    assert all(w in words for w in HOSTILE_WORDS)
    assert_inert(driver, "#/words")
    # a word's page (dfr-browser takes the word from the hash as the browser encodes it)
    driver.get(dfr_url + "#/word/" + HOSTILE_WORDS[0])
    assert "img" in text_of(driver, "#word_view span.word", "img")
    assert_inert(driver, "#/word/")


def test_site_pages_show_hostile_text_and_run_none(hostile, driver):
    base = (hostile.site / "index.html").resolve().as_uri().rsplit("/", 1)[0]
    driver.get(f"{base}/index.html")
    cards = text_of(driver, "#topics .card", count=N_TOPICS)
    assert all(w in cards for w in HOSTILE_WORDS[:3]) and RUN_NAME in text_of(driver, "#title")
    driver.execute_script("var q = document.getElementById('q'); q.value = 'script';"
                          "q.dispatchEvent(new Event('input'));")
    found = text_of(driver, "#title-results li", PAYLOADS[1])
    assert PAYLOADS[2] in found
    assert_inert(driver, "index.html")
    for k in range(N_TOPICS):
        driver.get(f"{base}/topic.html#k={k}")
        driver.refresh()  # (a new hash alone does not load the page again)
        books = text_of(driver, "#books li")
        assert any(p in books for p in PAYLOADS)
        assert sum(w in text_of(driver, "#words") for w in HOSTILE_WORDS) >= 3
        driver.execute_script("var s = document.getElementById('field'); s.value = 'author';"
                              "s.dispatchEvent(new Event('change'));")
        assert all(p in text_of(driver, "#chart", PAYLOADS[0]) for p in PAYLOADS)
        assert FIELD in text_of(driver, "#field option", FIELD)
        assert_inert(driver, f"topic.html#k={k}")
    for b in range(len(PAYLOADS)):
        driver.get(f"{base}/doc.html#b={b}")
        driver.refresh()
        assert text_of(driver, "#book-title", PAYLOADS[b]) == PAYLOADS[b]
        meta = text_of(driver, "#meta", FIELD)
        assert f"{PAYLOADS[b]}#{b}" in meta and PAYLOADS[(b + 2) % len(PAYLOADS)] in meta
        assert_inert(driver, f"doc.html#b={b}")


def test_report_shows_hostile_text_and_runs_none(hostile, driver):
    driver.get((hostile.run / "report.html").resolve().as_uri())
    assert RUN_NAME in text_of(driver, "h1", RUN_NAME) and RUN_NAME in driver.title
    words = text_of(driver, "#topics .words", count=N_TOPICS)
    assert all(w in words for w in HOSTILE_WORDS[:3])
    docs = text_of(driver, "#topics .docs", count=N_TOPICS)
    assert any(f"{p} [{p}#" in docs for p in PAYLOADS)  # "title [id]"
    driver.execute_script("filterTopics('script')")
    assert_inert(driver, "report.html")


def test_pyldavis_page_from_the_export_shows_hostile_words_and_runs_none(hostile, driver, tmp_path):
    pyldavis = pytest.importorskip("pyLDAvis")
    from pyLDAvis import urls

    prepared = pyldavis.prepare(**json.loads((hostile.export / "pyldavis.json").read_text()), n_jobs=1)
    page = tmp_path / "ldavis.html"
    pyldavis.save_html(prepared, str(page), d3_url=Path(urls.D3_LOCAL).as_uri(),
                       ldavis_url=Path(urls.LDAVIS_LOCAL).as_uri(), ldavis_css_url=Path(urls.LDAVIS_CSS_LOCAL).as_uri())
    driver.get(page.as_uri())
    terms = text_of(driver, "text.terms", count=len(HOSTILE_WORDS)).replace("\u200b", "")
    assert all(w in terms for w in HOSTILE_WORDS)
    assert_inert(driver, "pyLDAvis")
