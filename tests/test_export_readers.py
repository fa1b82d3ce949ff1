"""Exports opened by the tools that read them, unchanged: little_mallet_wrapper (MALLET's files),
pyLDAvis, xarray and anndata (topic_word.zarr), dfr-browser's own files served over HTTP and
opened in headless Chromium; state.gz read as R mallet and dfrtopics read MALLET's state."""

import functools
import gzip
import http.server
import json
import shutil
import threading
from pathlib import Path

import mallet_reference
import naive
import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from bigtopics.cli import main
from bigtopics.doc_topics import DocTopics
from bigtopics.export.base import topic_word_probabilities
from bigtopics.infer import InferSettings, infer
from bigtopics.model import load_model
from bigtopics.settings import TrainSettings
from bigtopics.store import open_store
from bigtopics.synth import CorpusSpec, write_corpus
from bigtopics.trainer import train

SPEC = CorpusSpec(n_docs=600, n_topics=5, n_words=120, mean_length=40, alpha=0.1, eta=0.05, seed=7)
DFR_BROWSER = Path(__file__).parent / "data" / "dfr-browser"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Two epochs (so the run keeps its per-token topics, --exclude-own), document topics with
    nothing left out (infer --threshold 0), every optional file."""
    from bigtopics.ingest import Pruning, ingest

    root = tmp_path_factory.mktemp("readers")
    store, run, dt, out = root / "corpus.zarr", root / "run", root / "doc_topics.zarr", root / "out"
    write_corpus(SPEC, root / "plain.jsonl", "jsonl")
    with open(root / "plain.jsonl") as f, open(root / "docs.jsonl", "w") as dated:
        for line in f:  # dates as Reuters writes them, some with letters after that make them no JS Date
            record = json.loads(line)
            d = int(record["id"])
            record["date"] = f"{1 + d % 28:02d}-MAR-{1950 + d % 40} 08:45:34.42" + ("C G T M" if d % 3 == 0 else "")
            dated.write(json.dumps(record) + "\n")
    ingest(root / "docs.jsonl", store, pruning=Pruning(min_df=1, max_df=1.0, max_vocab=None), quiet=True,
           log=lambda m: None)
    train(store, run, TrainSettings(n_topics=SPEC.n_topics, epochs=2, batch_size=150, tau0=1), quiet=True)
    infer(run, store, dt, InferSettings(threshold=0.0), quiet=True)
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(out), "--doc-topics", str(dt), "--top-words", "10",
                                       "--state", "--topic-word-weights"])
    assert result.exit_code == 0, result.output
    return load_model(run), DocTopics(dt), open_store(store), out


def dense_doc_topics(model, dt: DocTopics) -> np.ndarray:
    theta = np.zeros((dt.n_docs, dt.n_topics))
    for first, indptr, topics, weights, lengths in dt.iter_blocks():
        rows = first + np.repeat(np.arange(len(lengths)), np.diff(indptr))
        theta[first:first + len(lengths)] = model.alpha_k / (lengths + model.alpha_sum)[:, None]
        theta[rows, topics] = weights
    return theta


def test_little_mallet_wrapper_reads_doc_topics_and_topic_word_weights(exported):
    lmw = pytest.importorskip("little_mallet_wrapper")
    model, dt, store, out = exported
    distributions = np.array(lmw.load_topic_distributions(str(out / "doc_topics.txt")))
    assert distributions.shape == (dt.n_docs, model.n_topics)
    np.testing.assert_allclose(distributions, dense_doc_topics(model, dt), rtol=1e-5)
    np.testing.assert_allclose(distributions.sum(1), 1.0, atol=1e-5)  # nothing left out: MALLET's rows
    assert lmw.load_training_ids(str(out / "doc_topics.txt")) == [str(i) for i in store.doc_ids()]
    word_probabilities = lmw.load_topic_word_distributions(str(out / "topic_word_weights.txt"))
    for k in range(model.n_topics):
        got = np.array([word_probabilities[k][w] for w in model.vocab])
        np.testing.assert_allclose(got, model.word_probabilities(k), rtol=1e-6)


def test_pyldavis_shows_the_models_numbers_in_topic_order(exported):
    pyldavis = pytest.importorskip("pyLDAvis")
    model, _, store, out = exported
    prepared = pyldavis.prepare(**json.loads((out / "pyldavis.json").read_text()), n_jobs=1)
    assert prepared.topic_order == list(range(1, model.n_topics + 1))  # not reordered by size
    totals = model.topic_totals()
    info = prepared.topic_info
    for k in range(model.n_topics):
        rows = info[info.Category == f"Topic{k + 1}"]  # start_index 1: LDAvis's page reads topic 0 as none
        probabilities = model.word_probabilities(k)
        index = {w: i for i, w in enumerate(model.vocab)}
        np.testing.assert_allclose(rows.Freq / totals[k], [probabilities[index[t]] for t in rows.Term], rtol=1e-9)
    # a word's frequency is the model's count of it, sum_k p(w|k) N[k]: the online estimate of the
    # corpus's count (not inflated by renormalising over a trimmed vocabulary)
    default = info[info.Category == "Default"].set_index("Term")
    model_counts = sum(model.word_probabilities(k) * totals[k] for k in range(model.n_topics))
    for term, row in default.iterrows():
        w = int(np.flatnonzero(model.vocab == term)[0])
        assert row.Total == pytest.approx(model_counts[w], abs=1)  # pyLDAvis rounds its Default rows
        assert row.Total == pytest.approx(store.term_counts[w], rel=0.1)


def test_xarray_and_anndata_open_topic_word(exported):
    xr = pytest.importorskip("xarray")
    anndata_io = pytest.importorskip("anndata.io")
    model, _, _, out = exported
    dataset = xr.open_zarr(out / "topic_word.zarr", consolidated=False)
    assert dict(dataset.sizes) == {"topic_bound": model.n_topics + 1, "entry": model.n_entries,
                                   "topic": model.n_topics}
    matrix = anndata_io.read_elem(zarr.open_group(out / "topic_word.zarr", mode="r"))
    assert matrix.shape == (model.n_topics, model.n_words)
    np.testing.assert_array_equal(dataset["indptr"].values, matrix.indptr)
    for k in range(model.n_topics):
        row = np.full(model.n_words, float(dataset["smoothing"].values[k]))
        lo, hi = matrix.indptr[k], matrix.indptr[k + 1]
        row[matrix.indices[lo:hi]] = matrix.data[lo:hi]
        np.testing.assert_allclose(row, model.word_probabilities(k), rtol=1e-6)


def test_xarray_opens_doc_topics(exported):
    xr = pytest.importorskip("xarray")
    _, dt, _, _ = exported
    dataset = xr.open_zarr(dt.path, consolidated=False)
    assert dict(dataset.sizes) == {"doc_bound": dt.n_docs + 1, "entry": int(dt.attrs["nnz"]), "doc": dt.n_docs}
    _, _, _, weights, lengths = next(dt.iter_blocks())
    np.testing.assert_array_equal(dataset["doc_lengths"].values[:len(lengths)], lengths)
    np.testing.assert_allclose(dataset["data"].values[:len(weights)], weights, rtol=1e-7)


def test_anndata_scipy_and_dask_take_doc_topics_as_canonical_csr(exported):
    """read_elem gives scipy a canonical CSR: its reductions work (they raised "Output dtype not
    compatible with inputs" on uint16 indices ordered by weight) and give the model's numbers;
    anndata's lazy reader gives dask the same matrix."""
    anndata_io = pytest.importorskip("anndata.io")
    anndata_experimental = pytest.importorskip("anndata.experimental")
    model, dt, _, _ = exported
    group = zarr.open_group(dt.path, mode="r")
    matrix = anndata_io.read_elem(group)
    assert matrix.shape == (dt.n_docs, model.n_topics) and matrix.indices.dtype == np.int32
    assert matrix.has_canonical_format and matrix.has_sorted_indices
    assert "canonical" in dt.attrs["layout"]
    stored = np.zeros((dt.n_docs, model.n_topics))  # the documents' stored weights, as bigtopics reads them
    for first, indptr, topics, weights, lengths in dt.iter_blocks():
        stored[first + np.repeat(np.arange(len(lengths)), np.diff(indptr)), topics] = weights
    np.testing.assert_array_equal(np.asarray(matrix.argmax(axis=1)).ravel(), stored.argmax(axis=1))
    np.testing.assert_allclose(matrix.max(axis=1).toarray().ravel(), stored.max(axis=1), rtol=1e-7)
    assert matrix.sum() == pytest.approx(stored.sum(), rel=1e-6)
    # threshold 0: a row and the prior shares of the topics it was not assigned sum to 1 (MALLET's rows)
    theta = dense_doc_topics(model, dt)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(matrix.argmax(axis=1)).ravel(), theta.argmax(axis=1))
    lazy = anndata_experimental.read_elem_lazy(group)  # a dask array of CSR blocks
    row_sums = lazy.map_blocks(lambda block: np.asarray(block.sum(axis=1)), dtype=np.float64,
                               chunks=(lazy.chunks[0], (1,)))
    np.testing.assert_allclose(row_sums.compute().ravel(), stored.sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose(lazy[:50].compute().toarray(), stored[:50], rtol=1e-7)


def test_state_is_mallets_and_holds_the_runs_token_topics(exported):
    """state.gz as R mallet and dfrtopics read it (six space-separated columns), and as MALLET loads
    it with the instance list imported from state_instances.txt (tests/mallet_reference.py): every
    typeindex is the token's in MALLET's alphabet, every token's topic the run's saved one."""
    model, _, store, out = exported
    run = model.path.parent
    saved = np.load(run / "assignments" / "topics.npy")
    with gzip.open(out / "state.gz", "rt", encoding="utf-8") as f:
        assert f.readline() == "#doc source pos typeindex type topic\n"
        alphas = f.readline()
        assert alphas.startswith("#alpha : ") and [float(a) for a in alphas[9:].split()] == model.alpha_k.tolist()
        assert f.readline() == f"#beta : {model.eta!r}\n"
        rows = [line.split(" ") for line in f.read().splitlines()]
    assert all(len(r) == 6 for r in rows)
    docs, pos, types, topics = (np.array([int(r[i]) for r in rows]) for i in (0, 2, 3, 5))
    np.testing.assert_array_equal(topics, saved)  # every token's saved topic, in the store's order
    alphabet, documents, alpha, beta = mallet_reference.read_state(out / "state_instances.txt", out / "state.gz")
    assert alpha == model.alpha_k.tolist() and beta == model.eta
    assert len(documents) == store.n_docs  # no documents kept out of this run
    assert [name for name, _, _ in documents] == [str(i) for i in store.doc_ids()]
    np.testing.assert_array_equal(np.concatenate([t for _, _, t in documents]), saved)
    assert [r[4] for r in rows] == [alphabet[t] for t in types]
    for block in store.iter_blocks():
        for i in range(block.n_docs):
            d = block.start + i
            words, counts = block.row(i)
            mine = docs == d  # the state's documents are the store's, in order
            assert [alphabet[t] for t in types[mine]] == list(model.vocab[np.repeat(words, counts)])
            np.testing.assert_array_equal(pos[mine], np.arange(counts.sum()))
    # a state that does not follow the instance list is refused, as MALLET refuses it
    broken = out.parent / "broken.gz"
    with gzip.open(out / "state.gz", "rt") as f, gzip.open(broken, "wt") as g:
        lines = f.readlines()
        first = lines[3].split(" ")
        lines[3] = " ".join(first[:3] + [str(int(first[3]) + 1)] + first[4:])
        g.writelines(lines)
    with pytest.raises(mallet_reference.StateMismatch, match="instance list and state do not match"):
        mallet_reference.read_state(out / "state_instances.txt", broken)


def test_state_is_refused_in_one_line_for_a_run_without_token_topics(exported, tmp_path):
    store = exported[2]
    run = tmp_path / "one-epoch"
    train(store.location, run, TrainSettings(n_topics=3, epochs=1, batch_size=200), quiet=True)
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(tmp_path / "out"), "--state"])
    assert result.exit_code == 2 and "keeps no per-token topics" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


# -- dfr-browser: its own files, served over HTTP, in headless Chromium ---------------------------
def chrome_driver():
    """A headless Chromium through selenium and Debian's chromium-driver, or a skip saying what is missing."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    browser, driver = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip("chromium and chromedriver are not installed (apt-get install -y chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1200,1500"):
        options.add_argument(flag)
    options.binary_location = browser
    return webdriver.Chrome(options=options, service=Service(driver))


@pytest.fixture
def dfr_site(exported, tmp_path):
    """dfr-browser's files with the export's dfr-browser/ folder as its data/, served on 127.0.0.1."""
    site = tmp_path / "site"
    shutil.copytree(DFR_BROWSER, site)
    shutil.copytree(exported[3] / "dfr-browser", site / "data")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def visible_alerts(driver):
    return driver.execute_script("return Array.from(document.querySelectorAll('#warning, #error'))"
                                 ".filter(e => !e.classList.contains('hidden')).map(e => e.textContent)")


def wait_rows(driver, selector, n):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def ready(_):
        found = driver.find_elements(By.CSS_SELECTOR, selector)
        return found if len(found) >= n else False
    return WebDriverWait(driver, 30).until(ready)


def axis_labels(driver, chart, axis, n):
    """The text of chart's axis tick labels (at least n) with each label's left edge relative to
    the chart's svg, read in one script: dfr-browser redraws its charts as data arrives, so
    elements found a moment earlier can be gone (a stale reference)."""
    from selenium.webdriver.support.ui import WebDriverWait

    script = """
        const svg = document.querySelector(arguments[0] + ' svg');
        if (!svg) return null;
        const left = svg.getBoundingClientRect().left;
        return Array.from(document.querySelectorAll(arguments[0] + ' g.axis.' + arguments[1] + ' g.tick text'))
            .map(t => [t.textContent, t.getBoundingClientRect().left - left]);"""

    def ready(_):
        found = driver.execute_script(script, chart, axis)
        return found if found and len(found) >= n else False
    return WebDriverWait(driver, 30).until(ready)


def check_document_page(driver, url, d, topics, weights, length):
    """dfr-browser's page of document d shows its length N_d and, for each topic the model gives
    it, the share theta to within 1 / N_d (and rounding to 0.1%) and the tokens of that share."""
    from selenium.webdriver.common.by import By

    driver.get(url + f"#/doc/{d}")
    wait_rows(driver, "#doc_topics tbody tr", 1)
    assert driver.find_element(By.CSS_SELECTOR, "#doc_remark .token_count").text == str(length)
    shown = {}
    for row in driver.find_elements(By.CSS_SELECTOR, "#doc_topics tbody tr"):
        cells = row.find_elements(By.TAG_NAME, "td")
        k = int(cells[0].text.split()[0])  # "<k> <label>": numbered from 0
        shown[k] = (float(cells[-2].text.rstrip("%")) / 100, int(cells[-1].text))
    assert sum(tokens for _, tokens in shown.values()) == length
    for k, theta in zip(topics.tolist(), weights.tolist()):
        share, tokens = shown.get(k, (0.0, 0))
        assert abs(share - theta) <= 1 / length + 0.0005, (d, k, share, theta)
        assert abs(share - tokens / length) <= 0.0005 + 1e-9  # the share shown is its tokens / N_d


def test_dfr_browser_opens_the_data_folder(exported, dfr_site, tmp_path):
    from selenium.webdriver.common.by import By

    model, dt, _, _ = exported
    driver = chrome_driver()
    try:
        driver.get(dfr_site + "#/model/grid")
        wait_rows(driver, "#model_view_plot g.topic", model.n_topics)
        for k in range(model.n_topics):  # every topic's circle carries its top words
            label = driver.find_elements(By.CSS_SELECTOR, "#model_view_plot g.topic")[k].text
            assert model.top_words(k, 1)[0][0] in label
        driver.save_screenshot(str(tmp_path / "grid.png"))

        for first, indptr, topics, weights, lengths in dt.iter_blocks():
            for d in (7, 123):
                sl = slice(indptr[d - first], indptr[d - first + 1])
                check_document_page(driver, dfr_site, d, topics[sl], weights[sl], int(lengths[d - first]))
            break

        k = 2
        driver.get(dfr_site + f"#/topic/{k}")  # numbered from 0, as in bigtopics
        assert driver.find_element(By.CSS_SELECTOR, "#topic_header").text.startswith(f"{k} ")
        wait_rows(driver, "#topic_docs tbody tr", 1)
        wait_rows(driver, "#topic_conditional svg rect", 20)  # the topic over 40 years of dates, in bars
        driver.save_screenshot(str(tmp_path / "topic.png"))
        assert visible_alerts(driver) == []
        assert (tmp_path / "grid.png").stat().st_size > 10_000
    finally:
        driver.quit()


REUTERS = Path("/work/shared/corpora/reuters21578/docs.jsonl.gz")


@pytest.mark.skipif(not REUTERS.exists(), reason="the Reuters corpus is not here")
def test_dfr_browser_shows_a_reuters_model_by_month_with_labels(tmp_path):
    """Reuters (every 40th story, dates Feb-Oct 1987, lists of categories) trained, inferred with
    infer's default threshold (topics left out), exported with a labels file, opened in dfr-browser."""
    import gzip as gz

    from selenium.webdriver.common.by import By

    from bigtopics.ingest import ingest

    with gz.open(REUTERS, "rt") as f, open(tmp_path / "reuters.jsonl", "w") as out:
        for i, line in enumerate(f):
            if i % 40 == 0:
                out.write(line)
    store, run, dt_path, out = tmp_path / "r.zarr", tmp_path / "run", tmp_path / "dt.zarr", tmp_path / "out"
    ingest(tmp_path / "reuters.jsonl", store, quiet=True, log=lambda m: None)
    train(store, run, TrainSettings(n_topics=6, epochs=2, batch_size=200), quiet=True)
    infer(run, store, dt_path, InferSettings(), quiet=True)
    (tmp_path / "labels.tsv").write_text("topic\tlabel\n3\tMoney & <b>markets</b>\n")
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(out), "--doc-topics", str(dt_path),
                                       "--topic-labels", str(tmp_path / "labels.tsv")])
    assert result.exit_code == 0, result.output
    info = json.loads((out / "dfr-browser" / "info.json").read_text())
    assert info["VIS"]["condition"]["spec"] == {"field": "date_month", "unit": "month", "n": 1}
    model, dt = load_model(run), DocTopics(dt_path)
    site = tmp_path / "site"
    shutil.copytree(DFR_BROWSER, site)
    shutil.copytree(out / "dfr-browser", site / "data")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    driver = chrome_driver()
    try:
        first, indptr, topics, weights, lengths = next(dt.iter_blocks())
        short = [d for d in range(len(lengths))
                 if 5 <= lengths[d] <= 40 and weights[indptr[d]:indptr[d + 1]].sum() < 0.98]
        assert short  # documents whose stored weights leave mass out (the threshold)
        for d in short[:3] + [int(np.argmax(lengths))]:
            sl = slice(indptr[d], indptr[d + 1])
            check_document_page(driver, url, d, topics[sl], weights[sl], int(lengths[d]))
            citation = driver.find_element(By.CSS_SELECTOR, "#doc_header").text
            assert "[]" not in citation and '["' not in citation
        driver.get(url + "#/topic/3")
        wait_rows(driver, "#topic_docs tbody tr", 1)
        assert driver.find_element(By.CSS_SELECTOR, "#topic_header").text == "3 Money & <b>markets</b>"
        driver.get(url + "#/topic/0")
        assert driver.find_element(By.CSS_SELECTOR, "#topic_header").text == "0 " + " ".join(
            w for w, _ in model.top_words(0, 3))
        ticks = [text for text, _ in axis_labels(driver, "#topic_plot", "x", 2)]
        assert ticks[0] == "February" and "October" in ticks  # by month, Feb to Oct 1987
        y_ticks = axis_labels(driver, "#topic_plot", "y", 2)
        assert all(left >= 0 for _, left in y_ticks), y_ticks  # no label clipped by the chart's edge
        driver.get(url + "#/model/conditional")
        months = [text for text, _ in axis_labels(driver, "#model_view_conditional", "x", 2)]
        assert months[0] == "February" and months[-1] == "October"
        assert visible_alerts(driver) == []
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()


# -- diagnostics.xml against TopicModelDiagnostics transcribed loop by loop ----------------------
def test_diagnostics_xml_is_mallets_of_the_exported_state(exported, tmp_path):
    """What MALLET computes on the state it loads (tests/mallet_reference.py): every field from the
    state's counts, not the model's (the issue: topic 0's document_entropy 7.357 where MALLET
    computes 7.468, tokens off by up to 30%)."""
    import xml.etree.ElementTree as ElementTree

    model, _, _, _ = exported
    run, out = model.path.parent, tmp_path / "diag"
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(out), "--diagnostics", "--state",
                                       "--top-words", "7"])
    assert result.exit_code == 0, result.output
    alphabet, documents, alpha, beta = mallet_reference.read_state(out / "state_instances.txt", out / "state.gz")
    expected = mallet_reference.topic_model_diagnostics(alphabet, documents, alpha, beta, 7)
    root = ElementTree.parse(out / "diagnostics.xml").getroot()
    assert root.tag == "model" and len(root) == model.n_topics
    state_tokens = [float(topic.get("tokens")) for topic in root]
    assert sum(state_tokens) == sum(len(t) for _, t, _ in documents)
    assert not np.allclose(state_tokens, model.topic_totals(), atol=0.5)  # the state's, not the model's
    for topic in root:
        k = int(topic.get("id"))
        scores, words = expected[k]
        assert list(topic.attrib) == ["id", *scores]  # MALLET's fields, in MALLET's order
        for name, value in scores.items():
            assert float(topic.get(name)) == pytest.approx(value, abs=1e-4), name
        assert len(topic) == 7
        for element, want in zip(topic, words):
            assert element.text == want["word"] and int(element.get("rank")) == want["rank"]
            assert int(element.get("count")) == want["count"] and int(element.get("docs")) == want["docs"]
            assert float(element.get("prob")) == pytest.approx(want["prob"], abs=1e-5)
            for name in ("word-length", "coherence", "uniform_dist", "corpus_dist", "token-doc-diff", "exclusivity"):
                assert float(element.get(name)) == pytest.approx(want[name], abs=1e-4), name


def test_pyldavis_beyond_the_whole_vocabulary_shows_what_the_whole_vocabulary_shows(exported, tmp_path,
                                                                                   monkeypatch):
    """A model past MAX_CELLS: pyLDAvis given the chosen terms (and the rest of the mass spread
    thin) shows every topic and the default view as it shows them given the whole vocabulary; this
    small model's topics (30 terms of 95 listed) are close to the corpus's word shares, so the
    export names those where the rest shows at small lambda."""
    pyldavis = pytest.importorskip("pyLDAvis")
    from bigtopics.export import pyldavis as module

    model, _, _, _ = exported
    monkeypatch.setattr(module, "MAX_CELLS", model.n_topics * model.n_words - 1)
    result = CliRunner().invoke(main, ["export", str(model.path.parent), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    payload = json.loads((tmp_path / "out" / "pyldavis.json").read_text())
    assert_pyldavis_shows_the_whole_vocabularys_view(pyldavis, model, payload, result.output)


def assert_pyldavis_terms_are_the_naive_ones(model):
    """chosen_terms (kernels/top_values.py, a block of words at a time) against naive.pyldavis_terms
    (the whole matrix, each list ranked by numpy): the same terms, the same R-th values."""
    from bigtopics.export import pyldavis as module

    terms, last_relevance, last_saliency, _, _ = module.chosen_terms(model)
    want_terms, want_relevance, want_saliency = naive.pyldavis_terms(
        topic_word_probabilities(model, np.arange(model.n_words)), model.topic_totals(), module.R, module.lambdas(),
        module.TIE_TOLERANCE)
    np.testing.assert_array_equal(terms, want_terms)
    np.testing.assert_allclose(last_relevance, want_relevance, rtol=1e-12)
    assert last_saliency == pytest.approx(want_saliency, rel=1e-12)


def test_pyldavis_terms_are_those_of_a_naive_ranking(exported, monkeypatch):
    from bigtopics.export import pyldavis as module

    model = exported[0]
    monkeypatch.setattr(module, "CELLS_PER_PASS", 7 * model.n_topics)  # blocks of 7 words: heaps carried across
    assert_pyldavis_terms_are_the_naive_ones(model)


def test_fewest_terms_are_those_listed_at_lambda_one_and_leave_a_file_too_large_out_early(exported, tmp_path,
                                                                                          monkeypatch):
    """fewest_terms counts the terms prepare lists at lambda = 1 (relevance log p(w|k)), ranked
    here by numpy a topic at a time: a part of what chosen_terms chooses. Past MAX_FILE_CELLS by
    that count alone, export leaves pyldavis.json out before choosing, saying "at least"."""
    from bigtopics.export import pyldavis as module

    model = exported[0]
    at_one = set()
    for row in np.log(topic_word_probabilities(model, np.arange(model.n_words))):
        last = np.sort(row)[-module.R]
        tolerance = module.TIE_TOLERANCE * max(1.0, abs(last))
        above = np.flatnonzero(row > last + tolerance)
        level = np.flatnonzero((row <= last + tolerance) & (row >= last - tolerance))
        at_one |= set(above.tolist() + level[:module.R - len(above)].tolist())
    fewest = module.fewest_terms(model)
    assert fewest == len(at_one) < len(module.chosen_terms(model)[0])
    monkeypatch.setattr(module, "MAX_CELLS", model.n_topics * model.n_words - 1)
    monkeypatch.setattr(module, "MAX_FILE_CELLS", model.n_topics * fewest - 1)
    monkeypatch.setattr(module, "chosen_terms", None)  # (never reached: calling it would fail the export)
    result = CliRunner().invoke(main, ["export", str(model.path.parent), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (f"pyldavis.json left out ({model.n_topics:,} topics x at least {fewest:,} terms are at least "
            f"{model.n_topics * fewest:,} probabilities") in result.output
    assert not (tmp_path / "out" / "pyldavis.json").exists() and (tmp_path / "out" / "topic_word.zarr").exists()


def announced_topics(output: str) -> set[int]:
    """The topics export names as listing the rest of their mass in pyLDAvis."""
    import re

    match = re.search(r"pyldavis.json: topics ([\d, ]+)", output)
    return {int(k) for k in match.group(1).split(",")} if match else set()


def assert_pyldavis_shows_the_whole_vocabularys_view(pyldavis, model, payload, output):
    """prepare(**payload) lists, per topic and in the default view, the terms prepare lists over
    the whole vocabulary of the model, with the same frequencies, totals and relevance; a topic the
    export announced (announced_topics) lists the same terms, some of them at small lambda in place
    of the "(rest of the vocabulary ...)" terms."""
    listed = [w for w in payload["vocab"] if not w.startswith("(rest of the vocabulary")]
    index = {w: i for i, w in enumerate(model.vocab)}
    dists = np.array(payload["topic_term_dists"])
    np.testing.assert_allclose(dists[:, :len(listed)],
                               np.stack([model.word_probabilities(k)[[index[w] for w in listed]]
                                         for k in range(model.n_topics)]), rtol=1e-12)
    every = topic_word_probabilities(model, np.arange(model.n_words))  # the numbers the file's are, to the bit
    whole = dict(payload, topic_term_dists=every, vocab=list(model.vocab),
                 term_frequency=every.T @ model.topic_totals())
    shown = pyldavis.prepare(**payload, n_jobs=1).topic_info
    expected = pyldavis.prepare(**whole, n_jobs=1).topic_info
    announced = {f"Topic{k + 1}" for k in announced_topics(output)}
    rest = shown.Term.str.startswith("(rest of the vocabulary")
    assert set(shown.Category[rest]) <= announced
    for category in expected.Category.unique():
        got = shown[(shown.Category == category) & ~rest].set_index("Term").sort_index()
        want = expected[expected.Category == category].set_index("Term").sort_index()
        if category in announced:
            want = want.loc[want.index.isin(got.index)]
            assert 0 < len(got) == len(want), category  # the real terms it lists, with the same numbers
        assert list(got.index) == list(want.index), category
        for column in ("Freq", "Total", "logprob", "loglift"):
            np.testing.assert_allclose(got[column], want[column], rtol=1e-9, atol=1e-4 if "log" in column else 0)


def test_topic_scaled_is_left_out_with_a_notice_beyond_its_bound(exported, tmp_path, monkeypatch):
    from bigtopics.export import dfr

    model, dt, _, _ = exported
    monkeypatch.setattr(dfr, "SCALED_CELLS", 1)
    result = CliRunner().invoke(main, ["export", str(model.path.parent), "-o", str(tmp_path / "out"),
                                       "--doc-topics", str(dt.path)])
    assert result.exit_code == 0, result.output
    assert "topic_scaled.csv left out" in result.output
    assert sorted(p.name for p in (tmp_path / "out" / "dfr-browser").iterdir()) == [
        "dt.json.zip", "info.json", "meta.csv.zip", "tw.json"]


def test_a_learned_asymmetric_alpha_goes_into_every_file_that_holds_alpha(exported, tmp_path):
    _, _, store, _ = exported
    run, dt, out = tmp_path / "run", tmp_path / "dt.zarr", tmp_path / "out"
    train(store.location, run, TrainSettings(n_topics=SPEC.n_topics, epochs=2, batch_size=50, tau0=1,
                                             optimize_alpha=True, optimize_burn_in=2), quiet=True)
    model = load_model(run)
    alpha = model.alpha_k
    assert np.ndim(model.alpha) == 1 and np.ptp(alpha) > 0  # learned, one per topic
    infer(run, store.location, dt, InferSettings(), quiet=True)
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(out), "--doc-topics", str(dt), "--state"])
    assert result.exit_code == 0, result.output
    keys = [line.split("\t") for line in (out / "topic_keys.tsv").read_text().splitlines()]
    np.testing.assert_allclose([float(k[1]) for k in keys], alpha, rtol=1e-5)
    assert json.loads((out / "dfr-browser" / "tw.json").read_text())["alpha"] == pytest.approx(alpha.tolist())
    with gzip.open(out / "state.gz", "rt") as f:
        f.readline()
        assert [float(a) for a in f.readline()[9:].split()] == pytest.approx(alpha.tolist())
    rows = np.array([[float(x) for x in line.split("\t")[2:]]
                     for line in (out / "doc_topics.txt").read_text().splitlines()])
    for first, indptr, topics, weights, lengths in DocTopics(dt).iter_blocks():
        for i in range(len(lengths)):
            expected = alpha / (lengths[i] + alpha.sum())  # a topic not assigned: its own prior share
            expected[topics[indptr[i]:indptr[i + 1]]] = weights[indptr[i]:indptr[i + 1]]
            np.testing.assert_allclose(rows[first + i], expected, rtol=1e-5)


def test_doc_topics_txt_is_left_out_where_infer_left_topics_out(exported, tmp_path):
    """Document topics inferred with a threshold lack the topics below it: no dense row can sum to 1,
    so the dense doc_topics.txt is left out with a notice; the sparse form at that threshold is exact."""
    model, _, store, _ = exported
    run, dt = model.path.parent, tmp_path / "dt.zarr"
    infer(run, store.location, dt, InferSettings(threshold=0.2), quiet=True)
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(tmp_path / "dense"), "--doc-topics", str(dt)])
    assert result.exit_code == 0, result.output
    assert "doc_topics.txt left out" in result.output and "--threshold 0.2" in result.output
    assert not (tmp_path / "dense" / "doc_topics.txt").exists() and (tmp_path / "dense" / "search.jsonl").exists()
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(tmp_path / "sparse"), "--doc-topics", str(dt),
                                       "--doc-topics-threshold", "0.2"])
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "sparse" / "doc_topics.txt").read_text().splitlines()[1:]
    for first, indptr, topics, weights, _ in DocTopics(dt).iter_blocks():
        for i in range(len(indptr) - 1):
            fields = lines[first + i].split("\t")[2:-1]
            pairs = {int(k): float(w) for k, w in zip(fields[::2], fields[1::2])}
            kept = weights[indptr[i]:indptr[i + 1]] >= 0.2
            assert pairs == pytest.approx(dict(zip(topics[indptr[i]:indptr[i + 1]][kept].tolist(),
                                                   weights[indptr[i]:indptr[i + 1]][kept].tolist())), rel=1e-5)


def test_state_leaves_out_the_documents_kept_out_of_training_and_says_so(exported, tmp_path):
    """Held-out documents and those kept out for alpha's scale have no sampled topics: state.gz and
    state_instances.txt hold the others, MALLET loads them, and the export says how many are out."""
    import xml.etree.ElementTree as ElementTree

    _, _, store, _ = exported
    run, out = tmp_path / "run", tmp_path / "out"
    train(store.location, run, TrainSettings(n_topics=SPEC.n_topics, epochs=2, batch_size=150, tau0=1, heldout=40,
                                             optimize_alpha=True, optimize_burn_in=2, scale_docs=30), quiet=True)
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(out), "--state", "--diagnostics",
                                       "--top-words", "6"])
    assert result.exit_code == 0, result.output
    assert f"hold the {store.n_docs - 70:,} documents training visited" in result.output
    assert "held out: 40; kept out for alpha's scale: 30" in result.output
    saved = np.load(run / "assignments" / "topics.npy")
    offsets = np.load(run / "assignments" / "token_offsets.npy")
    visited = [d for d in range(store.n_docs) if saved[offsets[d]] != np.iinfo(saved.dtype).max]
    assert len(visited) == store.n_docs - 70
    alphabet, documents, alpha, beta = mallet_reference.read_state(out / "state_instances.txt", out / "state.gz")
    ids = store.doc_ids()
    assert [name for name, _, _ in documents] == [str(ids[d]) for d in visited]
    np.testing.assert_array_equal(np.concatenate([t for _, _, t in documents]),
                                  np.concatenate([saved[offsets[d]:offsets[d + 1]] for d in visited]))
    expected = mallet_reference.topic_model_diagnostics(alphabet, documents, alpha, beta, 6)
    for topic in ElementTree.parse(out / "diagnostics.xml").getroot():
        scores, _ = expected[int(topic.get("id"))]
        for name, value in scores.items():
            assert float(topic.get(name)) == pytest.approx(value, abs=1e-4), name


def test_mallet_itself_loads_the_state_and_writes_the_same_diagnostics(exported, tmp_path):
    """With MALLET installed (BIGTOPICS_MALLET=path/to/bin/mallet): the commands of docs/formats.md
    load the state, and MALLET's diagnostics.xml of it is ours byte for byte."""
    import os
    import subprocess

    mallet = os.environ.get("BIGTOPICS_MALLET")
    if not mallet:
        pytest.skip("MALLET is not installed here (set BIGTOPICS_MALLET to its bin/mallet)")
    model, _, _, _ = exported
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["export", str(model.path.parent), "-o", str(out), "--state", "--diagnostics"])
    assert result.exit_code == 0, result.output
    subprocess.run([mallet, "import-file", "--input", str(out / "state_instances.txt"), "--output",
                    str(tmp_path / "state.mallet"), "--keep-sequence", "--preserve-case", "--token-regex", r"\S+",
                    "--line-regex", r"^(\S*)\t(.*)$", "--name", "1", "--label", "0", "--data", "2"], check=True)
    subprocess.run([mallet, "train-topics", "--input", str(tmp_path / "state.mallet"), "--input-state",
                    str(out / "state.gz"), "--num-topics", str(model.n_topics), "--no-inference", "--num-top-words",
                    "20", "--diagnostics-file", str(tmp_path / "diagnostics.xml")], check=True)
    assert (tmp_path / "diagnostics.xml").read_bytes() == (out / "diagnostics.xml").read_bytes()
