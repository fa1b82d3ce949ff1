"""`bigtopics site`: a static website for browsing a model of a library (docs/commands.md, "site").

Three pages (index.html, topic.html, doc.html) and their script and style are copied from
templates/; everything they show is in data/ as JavaScript files that call BT.put(name, value),
loaded by inserting a <script> element, which browsers allow from file:// as well as from a web
server (fetch() of a JSON file is refused from file://). No page asks for anything outside the
folder. The pages build their content with DOM calls (text nodes, setAttribute), never by parsing
text as HTML, and the data files are escape.script_json, so no title, id, word or metadata value
can run as code.

    site.json                 what wrote the folder (how `--overwrite` recognises it), counts
    data/site.js              run summary, topics (label, words, size, coherence), fields, training curve,
                              the first book of every shard of books
    data/fields.js            each charted metadata field's values and their tokens
    data/topics/<k>.js        topic k: its top words with p(w|k), its weight over each metadata
                              field, the books most about it with their sections most about it
    data/books/<shard>.js     BOOKS_PER_SHARD books (fewer when they hold many sections): each
                              book's metadata and topics, and every section's topics in order
    data/titles/<shard>.js    TITLES_PER_SHARD [title, id, byline] rows: the search results' lines
    data/search.js, data/search/<n>.js, data/terms/<m>.js
                              the search index, sharded by term (site/search_index.py)
    csv/                      topics, topic words, document and book topics, topic by field,
                              training curve; a text cell a spreadsheet would run as a formula
                              starts with "'" (escape.spreadsheet_cell)

One page per document would be one file per document: a million files for a library of a
million sections, slow to write, copy and serve. Instead doc.html#b=<book> reads the shard of
its book, so the folder holds about n_books / BOOKS_PER_SHARD data files, and the build is one
streaming pass over the store and the document topics (site/collect.py); its memory does not
grow with the number of documents. The folder is written under a hidden name and renamed into
place when complete.

Wherever a page names a topic it shows its number (from 0) and its label (topic_labels.py: its
top words, or the one `--topic-labels` gives), as the report and the exports do.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from importlib.resources import files
from pathlib import Path

import numpy as np

from ..atomic import clear_leftovers, publish_dir, temporary_sibling
from ..doc_topics import DocTopics
from ..escape import csv_text_field, script_json, spreadsheet_cell
from ..evaluate import current_evaluation, evaluation_path
from ..model import alpha_attribute, load_model
from ..options import check_integer
from ..outputs import check_output
from ..progress import Progress
from ..report import training_documents
from ..rundir import METRICS_NAME, read_metrics
from ..topic_labels import topic_labels as labels_of_topics  # (build_site takes a topic_labels file)
from .collect import NAME_FIELDS, TopBooks, stream_books
from .facets import FieldTally
from .search_index import SearchIndexWriter

SITE_FORMAT_VERSION = 1
SITE_MARKER = "site.json"
PAGES = ("index.html", "topic.html", "doc.html", "site.js", "site.css")
BOOKS_PER_SHARD = 500
SECTIONS_PER_SHARD = 4000
TITLES_PER_SHARD = 500
# a book's byline in search results: the first of these fields the store has
BYLINE_FIELDS = ("author", "authors", "creator")
TRAINING_FIELDS = ("minibatch", "epoch", "docs_seen", "tokens_seen", "seconds", "tokens_per_s", "heldout_loglik",
                   "heldout_perplexity", "table_entries", "peak_rss_bytes", "final")


def _js(name: str, value) -> bytes:
    return f"BT.put({script_json(name)},{script_json(value, separators=(',', ':'))});\n".encode()


def _round(x: float) -> float:
    return float(f"{x:.4g}")


class ShardWriter:
    """Writes a stream of items into data/<kind>/<shard>.js files, closing a shard after `size`
    items or `weight` units (sections) of them; `starts` are each shard's first item number."""

    def __init__(self, folder: Path, kind: str, size: int, weight: int | None = None):
        self.folder, self.kind, self.size, self.max_weight = folder / "data" / kind, kind, size, weight
        self.folder.mkdir(parents=True)
        self.items, self.weight, self.starts, self.count = [], 0, [], 0

    def add(self, item, weight: int = 0) -> None:
        if not self.items:
            self.starts.append(self.count)
        self.items.append(item)
        self.count += 1
        self.weight += weight
        if len(self.items) >= self.size or (self.max_weight and self.weight >= self.max_weight):
            self.flush()

    def flush(self) -> None:
        if self.items:
            shard = len(self.starts) - 1
            (self.folder / f"{shard}.js").write_bytes(_js(f"{self.kind}/{shard}", self.items))
            self.items, self.weight = [], 0


class CsvFile:
    """A CSV file written row by row."""

    def __init__(self, path: Path, header: list[str]):
        self.handle = open(path, "w", newline="", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self.writer = csv.writer(self.handle, lineterminator="\n")
        self.writer.writerow(header)

    def rows(self, rows) -> None:
        self.writer.writerows(rows)

    def close(self) -> None:
        self.handle.close()


def _significant(values: np.ndarray, digits: int = 4) -> np.ndarray:
    """values rounded to `digits` significant digits."""
    values = np.asarray(values, np.float64)
    scale = 10.0 ** (digits - 1 - np.floor(np.log10(np.where(values == 0, 1.0, np.abs(values)))))
    return np.round(values * scale) / scale


def _pairs(topics: np.ndarray, weights: np.ndarray) -> list:
    """[[topic, weight]], weights to 4 significant digits."""
    return list(zip(topics.tolist(), _significant(weights).tolist()))  # (json writes a tuple as a list)


def build_site(run, output, *, doc_topics, store=None, n_words: int = 30, n_books: int = 25, n_sections: int = 5,
               topic_labels: str | Path | None = None, overwrite: bool = False, quiet: bool = False, log=None,
               storage_options: dict | None = None) -> dict:
    """Write the site for RUN and its document topics into the folder `output`; returns counts
    (topics, books, documents, data files). `doc_topics` and `store` may be URLs; `topic_labels`
    a labels file (topic_labels.py), read and checked before anything is written."""

    log = log or (lambda msg: print(msg, file=sys.stderr))
    check_integer(n_words, "--words", 1, 1000)
    check_integer(n_books, "--top-books", 1, 10000)
    run = Path(run)
    model = load_model(run)
    labels = labels_of_topics(model, topic_labels)
    output = Path(output)
    clear_leftovers(output, log, "site")  # what a site build killed earlier left beside it
    check_output(output, overwrite, [p for p in (model.path, doc_topics, store) if p], kind="site")
    dt = DocTopics(doc_topics, storage_options)
    store = dt.source_store(store, model.n_topics, storage_options)
    evaluation, notice = current_evaluation(run, model)
    if notice:
        log(notice)
    tmp = temporary_sibling(output)
    tmp.mkdir(parents=True)
    try:
        templates = files("bigtopics.site") / "templates"
        for name in PAGES:
            (tmp / name).write_bytes((templates / name).read_bytes())
        (tmp / "csv").mkdir()
        counts = _write_data(tmp, run, model, labels, dt, store, evaluation, n_words, n_books, n_sections, quiet)
        (tmp / SITE_MARKER).write_text(json.dumps({"created_by": "bigtopics", "site_format_version":
                                                   SITE_FORMAT_VERSION, "run": str(run), "doc_topics": dt.location,
                                                   "store": store.location, **counts}, indent=1) + "\n")
        publish_dir(tmp, output, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"output": str(output), **counts}


def _write_data(folder: Path, run: Path, model, labels: list[str], dt, store, evaluation: dict, n_words: int,
                n_books: int, n_sections: int, quiet: bool) -> dict:
    K = model.n_topics
    tallies = {f: FieldTally(f, K) for f in store.metadata_fields if f not in NAME_FIELDS}
    top = TopBooks(K, n_books, n_sections)
    books = ShardWriter(folder, "books", BOOKS_PER_SHARD, SECTIONS_PER_SHARD)
    titles = ShardWriter(folder, "titles", TITLES_PER_SHARD)
    index = SearchIndexWriter(folder / "data")
    byline = next((f for f in BYLINE_FIELDS if f in store.metadata_fields), None)
    doc_csv = CsvFile(folder / "csv" / "doc_topics.csv", ["doc", "id", "book_id", "topic", "weight"])
    book_csv = CsvFile(folder / "csv" / "book_topics.csv", ["book", "book_id", "title", "tokens", "topic", "weight"])
    sectioned = "section_of" in store.metadata_fields

    def on_book(book, topics, weights) -> None:
        record = {"b": book.number, "id": book.id, "title": book.title, "meta": book.meta, "tokens": book.tokens,
                  "topics": _pairs(topics, weights)}
        # the sections' numbers rounded in one call a book, not one a section (a library of 100,000
        # sections spent a quarter of its build in numpy's per-call cost)
        _, entry_topics, entry_weights = book.entries()
        ends = np.cumsum([len(s.topics) for s in book.sections]).tolist()
        spans = list(zip([0, *ends[:-1]], ends))
        topic_ids, significant = entry_topics.tolist(), _significant(entry_weights).tolist()
        if sectioned:
            record["sections"] = [{"d": s.doc, "id": s.id, "i": s.index, "n": s.tokens,
                                   "topics": list(zip(topic_ids[a:b], significant[a:b]))}
                                  for s, (a, b) in zip(book.sections, spans)]
        books.add(record, len(book.sections))
        author = book.meta.get(byline) if byline else None
        titles.add([book.title, book.id, "; ".join(map(str, author)) if isinstance(author, list) else author])
        index.add(book.number, book.title_words, book.words)
        book_id = csv_text_field(book.id)
        rounded = np.round(entry_weights, 6).tolist()
        for s, (a, b) in zip(book.sections, spans):  # (by hand: csv.writer's per-field checks cost more than the rest)
            head = f"{s.doc},{csv_text_field(s.id)},{book_id},"
            doc_csv.handle.write("".join(f"{head}{k},{w}\n" for k, w in zip(topic_ids[a:b], rounded[a:b])))
        book_csv.rows([book.number, spreadsheet_cell(book.id), spreadsheet_cell(book.title), book.tokens, k, w]
                      for k, w in zip(topics.tolist(), np.round(weights, 6).tolist()))

    try:
        with Progress("site", total=store.n_docs, unit="docs", quiet=quiet) as progress:
            n_book_total = stream_books(store, dt, on_book, tallies, top, progress)
    except BaseException:
        index.abandon()
        raise
    finally:
        doc_csv.close()
        book_csv.close()
    books.flush()
    titles.flush()
    search = index.finish()
    (folder / "data" / "search.js").write_bytes(_js("search", {
        "shards": search["shards"], "titles_per_shard": TITLES_PER_SHARD, "n_books": n_book_total,
        "byline": byline}))
    fields = {name: result for name, tally in tallies.items() if (result := tally.result()) is not None}
    topics = _write_topics(folder, model, labels, evaluation, fields, top, n_words)
    training = _training(run)
    (folder / "csv" / "training.csv").write_bytes(training_csv(training))
    summary = {
        "run": run.name, "n_topics": K, "n_words": model.n_words, "alpha": alpha_attribute(model.alpha),
        "eta": model.eta,
        "n_docs": store.n_docs, "n_books": n_book_total, "sectioned": sectioned,
        "progress": model.attrs.get("progress") or {}, "topics": topics, "epochs": _epochs(model, store.n_docs),
        "fields": [{"name": name, "numeric": r["numeric"], "kind": r["kind"], "unit": r["unit"],
                    "n_values": len(r["values"]), "n_distinct": r["n_distinct"]} for name, r in fields.items()],
        "book_shards": books.starts, "title_shards": len(titles.starts), "search_shards": len(search["shards"]),
        "search_terms": search["n_terms"], "search_own_files": search["n_own_files"], "training": training,
        "heldout": _heldout(run, model),
        "coherence": "UMass over the top 10 words" if evaluation else None,
    }
    (folder / "data" / "site.js").write_bytes(_js("site", summary))
    return {"n_topics": K, "n_books": n_book_total, "n_docs": store.n_docs,
            "data_files": sum(1 for _ in (folder / "data").rglob("*.js"))}  # site.js, fields.js, shards, topics


def _write_topics(folder: Path, model, labels: list[str], evaluation: dict, fields: dict, top: TopBooks,
                  n_words: int) -> list:
    """data/topics/<k>.js and the topic CSVs; returns the topics' summaries for data/site.js."""
    (folder / "data" / "topics").mkdir()
    totals = model.topic_totals()
    share = totals / max(totals.sum(), 1e-300)
    summaries = []
    topics_csv = CsvFile(folder / "csv" / "topics.csv", ["topic", "label", "share", "tokens", "coherence",
                                                         "npmi", "c_v", "top_words"])
    words_csv = CsvFile(folder / "csv" / "topic_words.csv", ["topic", "rank", "word", "probability"])
    field_csvs = {name: CsvFile(folder / "csv" / f"topic_by_{_file_name(name)}.csv",
                                [spreadsheet_cell(name), "tokens", "topic", "share"])
                  for name in fields}
    try:
        for k in range(model.n_topics):
            words = model.top_words(k, n_words)
            coherence = evaluation.get(k, {}).get("coherence")
            measures = {m: evaluation.get(k, {}).get(m) for m in ("npmi", "c_v")}  # (older evaluations lack them)
            summaries.append({"k": k, "label": labels[k], "share": _round(share[k]), "coherence": coherence,
                              "words": [w for w, _ in words[:10]]})
            by_field = {name: [None if x != x else _round(x) for x in r["share"][k]] for name, r in fields.items()}
            page = {"k": k, "label": labels[k], "share": float(share[k]), "tokens": float(totals[k]),
                    "coherence": coherence, **measures, "words": [[w, _round(p)] for w, p in words],
                    "by_field": by_field, "books": top.result(k)}
            (folder / "data" / "topics" / f"{k}.js").write_bytes(_js(f"topics/{k}", page))
            figures = [coherence, measures["npmi"], measures["c_v"]]
            topics_csv.rows([[k, spreadsheet_cell(labels[k]), f"{share[k]:.6g}", f"{totals[k]:.6g}",
                              *("" if x is None else f"{x:.6g}" for x in figures),
                              spreadsheet_cell(" ".join(w for w, _ in words[:20]))]])
            words_csv.rows([k, rank, spreadsheet_cell(w), f"{p:.6g}"] for rank, (w, p) in enumerate(words))
            for name, r in fields.items():
                field_csvs[name].rows([spreadsheet_cell(v), f"{n:.6g}", k, "" if s != s else f"{s:.6g}"]
                                      for v, n, s in zip(r["values"], r["tokens"], r["share"][k]))
    finally:
        for f in (topics_csv, words_csv, *field_csvs.values()):
            f.close()
    (folder / "data" / "fields.js").write_bytes(_js("fields", {name: {"values": r["values"], "tokens": r["tokens"]}
                                                                 for name, r in fields.items()}))
    return summaries


def _epochs(model, n_docs: int) -> float:
    """Passes over the training documents so far: document visits over the documents not held out
    (of the store the model was trained on; `n_docs`, the site's store, if it does not record it)."""
    visits = (model.attrs.get("progress") or {}).get("docs_seen", 0)
    return visits / training_documents(model, max(n_docs, 1))


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def _training(run: Path) -> list[dict]:
    """The metrics log's records (the training curve), also as csv/training.csv."""
    path = run / METRICS_NAME
    records = [{k: r.get(k) for k in TRAINING_FIELDS} for r in read_metrics(path)] if path.exists() else []
    return records


def _heldout(run: Path, model) -> dict | None:
    """The held-out scores of <run>/evaluation.json, if it scored the model as it is now."""
    path = evaluation_path(run)
    if not path.exists():
        return None
    if current_evaluation(run, model)[1]:  # figures of another model
        return None
    return json.loads(path.read_text()).get("heldout")


def training_csv(records: list[dict]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=TRAINING_FIELDS)
    writer.writeheader()
    writer.writerows(records)
    return out.getvalue().encode()
