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

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from bigtopics.cli import main
from bigtopics.doc_topics import DocTopics
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
    assert prepared.topic_order == list(range(model.n_topics))  # not renumbered by size
    totals = model.topic_totals()
    info = prepared.topic_info
    for k in range(model.n_topics):
        rows = info[info.Category == f"Topic{k}"]  # start_index 0: the topics' own ids
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


def test_state_is_mallets_and_holds_the_runs_token_topics(exported):
    model, _, store, out = exported
    run = model.path.parent
    saved = np.load(run / "assignments" / "topics.npy")
    offsets = np.load(run / "assignments" / "token_offsets.npy")
    with gzip.open(out / "state.gz", "rt", encoding="utf-8") as f:
        assert f.readline() == "#doc source pos typeindex type topic\n"
        alphas = f.readline()
        assert alphas.startswith("#alpha : ") and [float(a) for a in alphas[9:].split()] == model.alpha_k.tolist()
        assert f.readline() == f"#beta : {model.eta!r}\n"
        # as R mallet's mallet.read.state and dfrtopics' read_sampling_state: six space-separated columns
        rows = [line.split(" ") for line in f.read().splitlines()]
    assert all(len(r) == 6 for r in rows)
    docs, pos, types, topics = (np.array([int(r[i]) for r in rows]) for i in (0, 2, 3, 5))
    assert [r[4] for r in rows] == list(model.vocab[types])
    visited = [d for d in range(store.n_docs) if saved[offsets[d]] != np.iinfo(saved.dtype).max]
    assert np.unique(docs).tolist() == visited and len(visited) == store.n_docs  # no held-out documents here
    np.testing.assert_array_equal(topics, saved)  # every token's saved topic, in the store's order
    for block in store.iter_blocks():
        for i in range(block.n_docs):
            d = block.start + i
            words, counts = block.row(i)
            mine = docs == d
            np.testing.assert_array_equal(types[mine], np.repeat(words, counts))
            np.testing.assert_array_equal(pos[mine], np.arange(counts.sum()))


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
        ticks = [t.text for t in wait_rows(driver, "#topic_plot g.axis.x g.tick text", 2)]
        assert ticks[0] == "February" and "October" in ticks  # by month, Feb to Oct 1987
        y_ticks = wait_rows(driver, "#topic_plot g.axis.y g.tick text", 2)
        svg_left = driver.find_element(By.CSS_SELECTOR, "#topic_plot svg").rect["x"]
        assert all(t.rect["x"] >= svg_left for t in y_ticks)  # no label clipped by the chart's edge
        driver.get(url + "#/model/conditional")
        months = [t.text for t in wait_rows(driver, "#model_view_conditional g.axis.x g.tick text", 2)]
        assert months[0] == "February" and months[-1] == "October"
        assert visible_alerts(driver) == []
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()


# -- diagnostics.xml against TopicModelDiagnostics transcribed loop by loop ----------------------
def mallet_diagnostics(model, store, saved, offsets, n_top):
    """TopicModelDiagnostics (MALLET 2.0.8+) line by line over the saved topics, with the model's
    N[k, w] as the topics' word counts (export/mallet_diagnostics.py): {topic: (scores, [word scores])}."""
    import math

    K, V, beta = model.n_topics, model.n_words, model.eta
    alpha = model.alpha_k.tolist()
    alpha_sum = sum(alpha)
    tokens_per_topic = model.topic_totals()
    sorted_words = []
    for k in range(K):
        words, values = model.topic_entries(k)
        sorted_words.append(sorted(zip(words.tolist(), values.tolist()), key=lambda p: (-p[1], p[0])))
    top = [[w for w, _ in sorted_words[k][:n_top]] for k in range(K)]
    proportions = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
    codoc = [[[0] * n_top for _ in range(n_top)] for _ in range(K)]
    word_type_counts = [0] * V
    rank1, nonzero = [0] * K, [0] * K
    at = [[0] * len(proportions) for _ in range(K)]
    c_log_c = [0.0] * K
    n_tokens = 0
    unvisited = np.iinfo(saved.dtype).max
    for block in store.iter_blocks():
        for i in range(block.n_docs):
            d = block.start + i
            words, counts = block.row(i)
            tokens = np.repeat(words, counts).tolist()
            topics = saved[offsets[d]:offsets[d + 1]].tolist()
            if not topics or topics[0] == unvisited:
                continue
            topic_counts = [0] * K
            present = [set() for _ in range(K)]
            for w, t in zip(tokens, topics):
                n_tokens += 1
                word_type_counts[w] += 1
                topic_counts[t] += 1
                if w in top[t]:
                    present[t].add(w)
            max_topic, max_count = -1, -1
            for t in range(K):
                if topic_counts[t] > 0:
                    nonzero[t] += 1
                    if topic_counts[t] > max_count:
                        max_topic, max_count = t, topic_counts[t]
                    c_log_c[t] += topic_counts[t] * math.log(topic_counts[t])
                    share = (alpha[t] + topic_counts[t]) / (alpha_sum + len(tokens))
                    for j, threshold in enumerate(proportions):
                        if share < threshold:
                            break
                        at[t][j] += 1
                    for a in range(len(top[t])):
                        if top[t][a] in present[t]:
                            for b in range(a, len(top[t])):
                                if a == b:
                                    codoc[t][a][a] += 1
                                elif top[t][b] in present[t]:
                                    codoc[t][a][b] += 1
                                    codoc[t][b][a] += 1
            if max_topic > -1:
                rank1[max_topic] += 1
    norms = V * beta + tokens_per_topic
    sum_default = sum(beta / norms[k] for k in range(K))
    result = {}
    for k in range(K):
        T = tokens_per_topic[k]
        counts = [c for _, c in sorted_words[k][:n_top]]
        scores = {"tokens": T, "document_entropy": -c_log_c[k] / T + math.log(T)}
        lengths = [len(model.vocab[w]) for w in top[k]]
        scores["word-length"] = sum(lengths) / n_top
        coherence, coherence_words = 0.0, []
        for r in range(n_top):
            row, low = 0.0, 0.0
            for c in range(r):
                s = math.log((codoc[k][r][c] + beta) / (codoc[k][c][c] + beta))
                row += s
                low = min(low, s)
            coherence += row
            coherence_words.append(low)
        scores["coherence"] = coherence
        scores["uniform_dist"] = sum((c / T) * math.log(c * V / T) for _, c in sorted_words[k])
        scores["corpus_dist"] = sum((c / T) * math.log(n_tokens / T * c / word_type_counts[w])
                                    for w, c in sorted_words[k])
        scores["eff_num_words"] = 1 / sum((c / T) ** 2 for _, c in sorted_words[k])
        docs = [codoc[k][r][r] for r in range(n_top)]
        diff_words = []
        for r in range(n_top):
            p, q = counts[r] / sum(counts), docs[r] / sum(docs)
            m = 0.5 * (p + q)
            diff_words.append((0.5 * p * math.log(p / m) if p > 0 else 0) + (0.5 * q * math.log(q / m) if q > 0 else 0))
        scores["token-doc-diff"] = sum(diff_words)
        scores["rank_1_docs"] = rank1[k] / nonzero[k]
        scores["allocation_ratio"] = at[k][6] / at[k][1]
        scores["allocation_count"] = at[k][5] / nonzero[k]
        exclusive = []
        for w, c in sorted_words[k][:n_top]:
            total = sum_default + sum(model.word_probabilities(j)[w] - beta / norms[j] for j in range(K))
            exclusive.append(((beta + c) / norms[k]) / total)
        scores["exclusivity"] = sum(exclusive) / n_top
        word_scores = [{"rank": r + 1, "count": round(counts[r]), "prob": counts[r] / T, "docs": docs[r],
                        "word-length": lengths[r], "coherence": coherence_words[r],
                        "uniform_dist": (counts[r] / T) * math.log(counts[r] * V / T),
                        "corpus_dist": (counts[r] / T) * math.log(n_tokens / T * counts[r]
                                                                  / word_type_counts[top[k][r]]),
                        "token-doc-diff": diff_words[r], "exclusivity": exclusive[r], "word": model.vocab[top[k][r]]}
                       for r in range(n_top)]
        result[k] = (scores, word_scores)
    return result


def test_diagnostics_xml_matches_mallets_definitions(exported, tmp_path):
    import xml.etree.ElementTree as ElementTree

    model, _, store, _ = exported
    run, out = model.path.parent, tmp_path / "diag"
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(out), "--diagnostics", "--top-words", "7"])
    assert result.exit_code == 0, result.output
    saved = np.load(run / "assignments" / "topics.npy")
    offsets = np.load(run / "assignments" / "token_offsets.npy")
    expected = mallet_diagnostics(model, store, saved, offsets, 7)
    root = ElementTree.parse(out / "diagnostics.xml").getroot()
    assert root.tag == "model" and len(root) == model.n_topics
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


def test_pyldavis_beyond_the_whole_vocabulary_keeps_the_models_numbers(exported, tmp_path, monkeypatch):
    """A model too large for the whole vocabulary: every topic's top words and one term for the rest."""
    pyldavis = pytest.importorskip("pyLDAvis")
    from bigtopics.export import pyldavis as module

    model, _, _, _ = exported
    monkeypatch.setattr(module, "MAX_CELLS", model.n_topics * model.n_words - 1)
    monkeypatch.setattr(module, "PYLDAVIS_TERMS", 5)
    result = CliRunner().invoke(main, ["export", str(model.path.parent), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    payload = json.loads((tmp_path / "out" / "pyldavis.json").read_text())
    assert payload["vocab"][-1] == module.OTHER_WORDS and len(payload["vocab"]) < model.n_words
    dists = np.array(payload["topic_term_dists"])
    index = {w: i for i, w in enumerate(model.vocab)}
    for k in range(model.n_topics):
        p = model.word_probabilities(k)
        listed = [index[w] for w in payload["vocab"][:-1]]
        np.testing.assert_allclose(dists[k, :-1], p[listed], rtol=1e-12)
        assert dists[k, -1] == pytest.approx(1 - p[listed].sum(), abs=1e-12)
        assert {w for w, _ in model.top_words(k, 5)} <= set(payload["vocab"])
    prepared = pyldavis.prepare(**payload, n_jobs=1)
    assert prepared.topic_order == list(range(model.n_topics))


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
    infer(run, store.location, dt, InferSettings(threshold=0.05), quiet=True)
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
            expected = alpha / (lengths[i] + alpha.sum())  # a topic left out: its own prior share
            expected[topics[indptr[i]:indptr[i + 1]]] = weights[indptr[i]:indptr[i + 1]]
            np.testing.assert_allclose(rows[first + i], expected, rtol=1e-5)
