"""Exports read back and compared with the model and the inferred document topics."""

import csv
import io
import json
import zipfile

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from bigtopics.cli import main
from bigtopics.doc_topics import DocTopics
from bigtopics.export import write_dfr_doc_topics
from bigtopics.infer import InferSettings, infer
from bigtopics.model import load_model
from bigtopics.settings import TrainSettings
from bigtopics.synth import CorpusSpec, write_corpus
from bigtopics.trainer import train

from . import naive

SPEC = CorpusSpec(n_docs=800, n_topics=4, n_words=100, mean_length=30, alpha=0.1, eta=0.05, seed=11)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    store, run, dt, out = root / "corpus.zarr", root / "run", root / "doc_topics.zarr", root / "out"
    write_corpus(SPEC, store, "store", entries_per_chunk=2048)
    train(store, run, TrainSettings(n_topics=SPEC.n_topics, epochs=2, batch_size=200, tau0=1), quiet=True)
    infer(run, store, dt, InferSettings(), quiet=True)
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(out), "--doc-topics", str(dt), "--top-words", "8"])
    assert result.exit_code == 0, result.output
    return load_model(run), DocTopics(dt), out


def doc_rows(dt: DocTopics):
    for first, indptr, topics, weights, lengths in dt.iter_blocks():
        for d in range(len(indptr) - 1):
            yield first + d, topics[indptr[d]:indptr[d + 1]], weights[indptr[d]:indptr[d + 1]], lengths[d]


def test_topic_word_round_trip(exported):
    model, _, out = exported
    group = zarr.open_group(out / "topic_word.zarr", mode="r")
    assert group.attrs["encoding-type"] == "csr_matrix" and group.attrs["shape"] == [model.n_topics, model.n_words]
    indptr, indices, data, smoothing = (group[n][:] for n in ("indptr", "indices", "data", "smoothing"))
    for k in range(model.n_topics):
        row = np.full(model.n_words, smoothing[k])
        row[indices[indptr[k]:indptr[k + 1]]] = data[indptr[k]:indptr[k + 1]]
        np.testing.assert_allclose(row, model.word_probabilities(k), rtol=1e-6)
    assert (out / "vocab.txt").read_text().splitlines() == list(model.vocab)


def test_mallet_topic_keys_and_word_topic_counts(exported):
    model, _, out = exported
    lines = (out / "topic_keys.tsv").read_text().splitlines()
    assert len(lines) == model.n_topics
    for k, line in enumerate(lines):
        topic, alpha, words = line.split("\t")
        assert int(topic) == k and float(alpha) == pytest.approx(model.alpha_k[k])
        assert words.split(" ") == [w for w, _ in model.top_words(k, 8)]
    counts = np.zeros((model.n_topics, model.n_words))
    for line in (out / "word_topic_counts.txt").read_text().splitlines():
        w, word, *pairs = line.split(" ")
        assert model.vocab[int(w)] == word
        values = [int(p.split(":")[1]) for p in pairs]
        assert values == sorted(values, reverse=True) and all(v > 0 for v in values)
        for p in pairs:
            k, c = p.split(":")
            counts[int(k), int(w)] = int(c)
    dense = np.stack([model.word_probabilities(k) * (model.n_words * model.eta + model.topic_totals()[k])
                      - model.eta for k in range(model.n_topics)])
    np.testing.assert_array_equal(counts, np.rint(dense))


def test_mallet_doc_topics_dense_and_search_files(exported):
    model, dt, out = exported
    lines = (out / "doc_topics.txt").read_text().splitlines()
    es = (out / "search.jsonl").read_text().splitlines()
    solr = (out / "search_solr.jsonl").read_text().splitlines()
    assert len(lines) == len(solr) == len(es) // 2 == dt.n_docs  # MALLET's dense form has no header
    for (d, topics, weights, length), line, solr_line, action, source in zip(
            doc_rows(dt), lines, solr, es[0::2], es[1::2]):
        fields = line.split("\t")
        assert int(fields[0]) == d and fields[1] == str(d)  # synthetic ids are document numbers
        expected = model.alpha_k / (length + model.alpha_sum)
        expected[topics] = weights
        np.testing.assert_allclose([float(w) for w in fields[2:]], expected, rtol=1e-5)
        assert json.loads(action) == {"index": {"_index": "bigtopics", "_id": str(d)}}
        record = json.loads(source)
        assert record["length"] == length
        assert record["topics"] == {f"topic_{t}": pytest.approx(w, rel=1e-5) for t, w in zip(topics, weights)}
        payloads = json.loads(solr_line)["topics"].split(" ") if len(topics) else []
        assert [p.split("|")[0] for p in payloads] == [f"topic_{t}" for t in topics]


@pytest.mark.parametrize("threshold, most", [(0.05, -1), (0.05, 2), (1e-9, 3)])
def test_mallet_doc_topics_sparse_with_threshold_and_max(exported, tmp_path, threshold, most):
    model, dt, _ = exported
    run, out = model.path.parent, tmp_path / "sparse"
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(out), "--doc-topics", str(dt.path),
                                       "--doc-topics-threshold", str(threshold), "--doc-topics-max", str(most)])
    assert result.exit_code == 0, result.output
    lines = (out / "doc_topics.txt").read_text().split("\n")
    assert lines[0] == "#doc name topic proportion ..." and lines[-1] == "" and len(lines) == dt.n_docs + 2
    for (d, topics, weights, length), line in zip(doc_rows(dt), lines[1:]):
        dense = model.alpha_k / (length + model.alpha_sum)
        dense[topics] = weights
        order = np.argsort(-dense, kind="stable")[: most if most >= 0 else None]
        kept = order[dense[order] >= threshold]
        fields = line.split("\t")
        assert fields[-1] == ""  # MALLET ends every pair with a tab
        assert int(fields[0]) == d and [int(t) for t in fields[2:-1:2]] == kept.tolist()
        np.testing.assert_allclose([float(w) for w in fields[3:-1:2]], dense[kept], rtol=1e-5)


def test_every_file_of_the_registry_is_one_overwrite_may_replace():
    from bigtopics.export import WRITERS
    from bigtopics.places import EXPORT_ENTRIES

    assert {name for writer in WRITERS for name in writer.files} <= set(EXPORT_ENTRIES)


def test_overwrite_replaces_an_earlier_export_only(exported, tmp_path):
    run = exported[0].path.parent
    for _ in range(2):
        again = CliRunner().invoke(main, ["export", str(run), "-o", str(tmp_path / "again"), "--overwrite"])
        assert again.exit_code == 0, again.output
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("mine")
    refused = CliRunner().invoke(main, ["export", str(run), "-o", str(tmp_path / "site"), "--overwrite"])
    assert refused.exit_code == 1 and "not bigtopics output" in refused.output
    assert (tmp_path / "site" / "index.html").read_text() == "mine"


def test_dfr_browser_folder_and_pyldavis_inputs(exported, tmp_path):
    model, dt, out = exported
    folder = out / "dfr-browser"
    assert sorted(p.name for p in folder.iterdir()) == ["dt.json.zip", "info.json", "meta.csv.zip",
                                                        "topic_scaled.csv", "tw.json"]
    expected = np.zeros((dt.n_docs, dt.n_topics), np.int64)
    for d, topics, weights, length in doc_rows(dt):
        expected[d] = naive.largest_remainder_counts(topics, weights, int(length), model.alpha_k.tolist())
        assert expected[d].sum() == length
        assert np.all(np.abs(expected[d, topics] / max(length, 1) - weights) <= 1 / max(length, 1) + 1e-6)
    for path, per_pass in ((folder / "dt.json.zip", None), (tmp_path / "dt.json.zip", 50)):  # one pass, many passes
        if per_pass:
            write_dfr_doc_topics(dt, model.alpha_k, path, entries_per_pass=per_pass)
        with zipfile.ZipFile(path) as archive:
            sparse = json.loads(archive.read("dt.json"))
        got = np.zeros_like(expected)
        for k in range(dt.n_topics):
            lo, hi = sparse["p"][k], sparse["p"][k + 1]
            got[sparse["i"][lo:hi], k] = sparse["x"][lo:hi]
        np.testing.assert_array_equal(got, expected)
    tw = json.loads((folder / "tw.json").read_text())
    assert len(tw["alpha"]) == len(tw["tw"]) == model.n_topics
    assert tw["tw"][0]["words"] == [w for w, _ in model.top_words(0, 8)]
    with zipfile.ZipFile(folder / "meta.csv.zip") as archive:
        rows = list(csv.reader(io.StringIO(archive.read("meta.csv").decode())))
    assert rows[0] == ["id", "title", "tokens"] and len(rows) == dt.n_docs + 1
    assert [int(r[2]) for r in rows[1:]] == [length for _, _, _, length in doc_rows(dt)]
    scaled = np.loadtxt(folder / "topic_scaled.csv", delimiter=",")
    assert scaled.shape == (model.n_topics, 2) and np.isfinite(scaled).all()
    info = json.loads((folder / "info.json").read_text())
    assert info["VIS"]["metadata"]["type"] == "base" and info["VIS"]["condition"]["spec"]["field"] == "tokens"
    vis = json.loads((out / "pyldavis.json").read_text())
    assert vis["sort_topics"] is False and vis["start_index"] == 1  # LDAvis reads a topic 0 as none
    dists = np.array(vis["topic_term_dists"])
    assert vis["vocab"] == list(model.vocab)  # a small model: the whole vocabulary, the model's p(w|k)
    np.testing.assert_allclose(dists, [model.word_probabilities(k) for k in range(model.n_topics)], rtol=1e-12)
    # identity doc_topic_dists weighted by doc_lengths gives pyLDAvis the topic sizes
    np.testing.assert_allclose(np.array(vis["doc_topic_dists"]).T @ np.array(vis["doc_lengths"]), model.topic_totals(),
                               rtol=1e-6)
    topics = [json.loads(line) for line in (out / "topics.jsonl").read_text().splitlines()]
    assert [t["label"] for t in topics] == [" ".join(w for w, _ in model.top_words(k, 3))
                                            for k in range(model.n_topics)]


def test_report_is_self_contained_and_renders(exported, tmp_path):
    from bigtopics.report import build_report, find_chromium, render_in_browser

    model, dt, _ = exported
    run = model.path.parent
    page = build_report(run, tmp_path / "report.html", doc_topics=dt.path)
    text = page.read_text()
    assert "http://" not in text and "https://" not in text and "<svg" in text
    # documents, not visits: 800 documents over 2 epochs are 1,600 visits
    assert f"trained on {dt.n_docs:,} documents: {2 * dt.n_docs:,} document visits (2.00 epochs)" in text
    throughput = text[text.index('aria-label="Throughput"'):]
    assert '<text x="68" y="148" font-size="11" text-anchor="end">0</text>' in throughput[:throughput.index("</svg>")]
    for k in range(model.n_topics):
        assert " ".join(w for w, _ in model.top_words(k, 3)) in text
    assert build_report(run, page, doc_topics=dt.path) == page  # an earlier report is replaced
    notes = tmp_path / "notes.html"
    notes.write_text("<p>mine</p>")
    with pytest.raises(FileExistsError, match="not a bigtopics report"):
        build_report(run, notes)
    assert notes.read_text() == "<p>mine</p>"
    if find_chromium() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    dom = render_in_browser(page, tmp_path / "report.png")
    assert dom.count("<tr>") >= model.n_topics + 1 and "<polyline" in dom
    assert (tmp_path / "report.png").stat().st_size > 10_000


# -- metadata in the search documents -------------------------------------------------------------
def strict_json(line: str):
    """json.loads that refuses NaN and Infinity, as Elasticsearch and Solr do."""
    def refuse(token):
        raise ValueError(f"{token} is not JSON")

    return json.loads(line, parse_constant=refuse)


def metadata_of(d: int) -> dict:
    """Per-document metadata with the awkward cases: names export writes itself (topics, length,
    doc_number) and one already taken by their prefixed form, an integer field with nulls
    (stored as float64 with NaN), a float field with some whole values, a plain integer field."""
    return {"topics": f"label-{d % 3}", "length": d * 10, "doc_number": "x", "meta_topics": "taken",
            "birth": None if d % 4 == 0 else 1700 + d, "score": d / 8, "year": 1900 + d,
            "places": None if d % 5 == 0 else ["usa", "uk"][: d % 3], "note": "[not a list" if d % 2 else ""}


@pytest.fixture(scope="module")
def exported_metadata(tmp_path_factory):
    from bigtopics.ingest import ingest

    root = tmp_path_factory.mktemp("export_metadata")
    spec = CorpusSpec(n_docs=300, n_topics=3, n_words=60, mean_length=20, seed=5)
    write_corpus(spec, root / "plain.jsonl", "jsonl")
    with open(root / "plain.jsonl") as f, open(root / "docs.jsonl", "w") as out:
        for line in f:
            record = json.loads(line)
            out.write(json.dumps({**record, **metadata_of(int(record["id"]))}) + "\n")
    store, run, dt, out = root / "corpus.zarr", root / "run", root / "doc_topics.zarr", root / "out"
    ingest([root / "docs.jsonl"], store, quiet=True, log=lambda m: None)
    train(store, run, TrainSettings(n_topics=spec.n_topics, epochs=1, batch_size=100, tau0=1), quiet=True)
    infer(run, store, dt, quiet=True)
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(out), "--doc-topics", str(dt)])
    assert result.exit_code == 0, result.output
    return out, result.output


def test_search_files_are_strict_json_with_nulls_left_out_and_whole_numbers_as_integers(exported_metadata):
    out, _ = exported_metadata
    es = (out / "search.jsonl").read_text().splitlines()
    solr = (out / "search_solr.jsonl").read_text().splitlines()
    assert len(es) == 2 * len(solr) == 600
    for line in es[1::2] + solr:
        doc = strict_json(line)
        d = int(doc["id"])
        if d % 4 == 0:
            assert "birth" not in doc  # a null in the source is left out, never NaN
        else:
            assert doc["birth"] == 1700 + d and type(doc["birth"]) is int
        assert doc["score"] == d / 8 and type(doc["score"]) is float  # some whole, not all: stays float
        assert doc["year"] == 1900 + d and type(doc["year"]) is int
    for line in es[0::2]:
        strict_json(line)


def test_dfr_browser_conditions_on_a_year_or_date_field(exported_metadata, tmp_path):
    from bigtopics.ingest import Pruning, ingest

    out, _ = exported_metadata
    info = json.loads((out / "dfr-browser" / "info.json").read_text())
    # year 1900 + d over 300 documents: 300 years in at most 20 bins of a round number of years
    assert info["VIS"]["condition"] == {"type": "time", "name": "year, by 20 years",
                                        "spec": {"field": "year_year", "unit": "year", "n": 20}}
    assert info["VIS"]["metadata"]["spec"]["date_field"] == ["year_year"]
    docs = [{"id": f"d{i}", "Date": f"{i % 28 + 1:02d}-FEB-{1950 + i} 15:01:01.79", "text": "sea ship whale sail"}
            for i in range(40)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    store, run, dt = tmp_path / "s.zarr", tmp_path / "run", tmp_path / "dt.zarr"
    ingest(tmp_path / "in.jsonl", store, pruning=Pruning(min_df=1, max_df=1.0, max_vocab=None), quiet=True,
           log=lambda m: None)
    train(store, run, TrainSettings(n_topics=2, epochs=1, batch_size=20), quiet=True)
    infer(run, store, dt, quiet=True)
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(tmp_path / "out"), "--doc-topics", str(dt)])
    assert result.exit_code == 0, result.output
    info = json.loads((tmp_path / "out" / "dfr-browser" / "info.json").read_text())
    # a text date over 40 years, through a column of its bins' starts (the browser's date_field): by 2 years
    assert info["VIS"]["condition"] == {"type": "time", "name": "Date, by 2 years",
                                        "spec": {"field": "Date_year", "unit": "year", "n": 2}}
    assert info["VIS"]["metadata"]["spec"]["date_field"] == ["Date_year"]
    with zipfile.ZipFile(tmp_path / "out" / "dfr-browser" / "meta.csv.zip") as archive:
        rows = list(csv.DictReader(io.StringIO(archive.read("meta.csv").decode())))
    # the first bin at midnight, the others a minute past (so that dfr-browser charts the last bin too)
    assert [(r["Date"], r["Date_year"]) for r in rows] == [
        (d["Date"], f"{1950 + i // 2 * 2}-01-01T00:0{0 if i < 2 else 1}:00Z") for i, d in enumerate(docs)]


def test_list_metadata_is_written_as_arrays_in_search_files(exported_metadata):
    out, _ = exported_metadata
    for es_line, solr_line in zip((out / "search.jsonl").read_text().splitlines()[1::2],
                                  (out / "search_solr.jsonl").read_text().splitlines()):
        for doc in strict_json(es_line), strict_json(solr_line):
            d = int(doc["id"])
            if d % 5 == 0:
                assert "places" not in doc  # missing: left out
            else:
                assert doc["places"] == ["usa", "uk"][: d % 3]  # an array an engine facets on, [] included
            assert doc["note"] == ("[not a list" if d % 2 else "")  # text that only looks like a list stays text


def test_metadata_named_like_export_fields_is_renamed_not_lost(exported_metadata, tmp_path):
    out, output = exported_metadata
    # "meta_topics" is taken by a metadata field, so "topics" moves on to "meta_meta_topics"
    assert "topics -> meta_meta_topics" in output and "length -> meta_length" in output
    for es_line, solr_line in zip((out / "search.jsonl").read_text().splitlines()[1::2],
                                  (out / "search_solr.jsonl").read_text().splitlines()):
        for doc in strict_json(es_line), strict_json(solr_line):
            d = int(doc["id"])
            assert doc["meta_meta_topics"] == f"label-{d % 3}" and doc["meta_topics"] == "taken"
            assert doc["meta_length"] == d * 10 and doc["meta_doc_number"] == "x"
            assert doc["doc_number"] == d  # synthetic ids are document numbers, and no document was dropped
        assert isinstance(strict_json(es_line)["topics"], dict) and isinstance(strict_json(solr_line)["topics"], str)
    from bigtopics.export import search_names

    assert search_names(["id", "meta_id", "year"]) == {"id": "meta_meta_id", "meta_id": "meta_id", "year": "year"}


def test_search_engines_own_field_names_are_renamed():
    from bigtopics.export import search_names

    names = search_names(["_id", "_score", "topics", "meta_topics", "title"])
    assert names == {"_id": "meta__id", "_score": "meta__score", "topics": "meta_meta_topics",
                     "meta_topics": "meta_topics", "title": "title"}


def test_report_of_a_run_whose_metrics_log_a_crash_tore(exported, tmp_path):
    import shutil

    from bigtopics.report import build_report
    from bigtopics.rundir import METRICS_NAME

    model, _, _ = exported
    run = tmp_path / "run"
    shutil.copytree(model.path.parent, run)
    lines = (run / METRICS_NAME).read_text().splitlines()
    (run / METRICS_NAME).write_text("\n".join(lines) + '\n{"minibatch": 9, "seco')  # killed mid-line
    text = build_report(run, tmp_path / "report.html").read_text()
    assert 'aria-label="Throughput"' in text and text.count("<polyline") >= 1


def test_report_names_documents_by_title_where_the_store_has_titles(tmp_path):
    from bigtopics.ingest import Pruning, ingest
    from bigtopics.report import document_names
    from bigtopics.store import open_store

    docs = [{"id": "pg1#0", "title": "Moby Dick", "text": "whale ship sea"}, {"id": "n2", "text": "ship sea"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    ingest(tmp_path / "in.jsonl", tmp_path / "s.zarr", pruning=Pruning(min_df=1, max_df=1.0, max_vocab=None),
           quiet=True, log=lambda m: None)
    assert document_names(open_store(tmp_path / "s.zarr"), [1, 0, 1]) == {0: "Moby Dick [pg1#0]", 1: "n2"}
