"""dfr-browser's data folder, `dfr-browser/`: copy it to dfr-browser's `data/` (or point
VIS.files at it) and serve dfr-browser's files; nothing in it needs editing.

  info.json          title and meta_info (HTML, as dfr-browser inserts them: the run's name is
                     escaped), and VIS settings: metadata and bibliography of type "base"
                     (meta.csv has a header), the variable topics are conditioned on
                     (choose_condition), topic ids from 0 and labels (browser_info)
  meta.csv.zip       meta.csv, RFC 4180 with a header: id, title (the id where the store has no
                     titles), every metadata field of the store (lists as their items joined by
                     ", "), tokens (the document's length), and with a date to condition on,
                     <field>_<unit>: the start of each date's bin (choose_condition).
                     dfr-browser inserts every text value into its pages as HTML (a document's
                     citation is its values joined), so each text cell and field name is
                     escape.html_csv_cell: HTML-escaped, and safe from formulas in a spreadsheet
  tw.json            {"alpha": [alpha_k], "tw": [{"words": top words, "weights": N[k, w] rounded}]}
  dt.json.zip        dt.json, each document's length N_d shared among the topics by theta
                     (document_counts: whole tokens summing to N_d), in compressed sparse columns
                     {"i": doc per entry, "p": column pointers (K + 1), "x": counts}. dfr-browser
                     shows a document's length as its row's sum and a topic's share as count / sum:
                     N_d exactly, and theta[d, k] to within 1 / N_d
  topic_scaled.csv   two columns, the topics placed in the plane by classical multidimensional
                     scaling of the Hellinger distances between their distributions over the union
                     of their top SCALED_WORDS words (left out, with a notice, beyond
                     SCALED_CELLS topics x words: dfr-browser then hides only its "scaled" view)

Everything is streamed by document block; dt.json.zip holds the entries of a group of topics at a
time (as many as a quarter of the available memory holds, at DT_BYTES_PER_ENTRY each).
"""

from __future__ import annotations

import csv
import io
import json
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..date_bins import MAX_BINS, Date, DateBins, DateRange, parse_date
from ..doc_topics import DocTopics
from ..escape import html_csv_cells, html_escape
from ..memory import budget_bytes
from ..store import list_items
from .base import ExportContext, Writer, stored_counts, top_word_union, topic_word_probabilities

FOLDER = "dfr-browser"
# a group's (document, topic, count) entries while collected, concatenated and sorted
DT_BYTES_PER_ENTRY = 64
TEXT_CHUNK = 1 << 16
SCALED_WORDS = 100
SCALED_CELLS = 1 << 25
DENSE_CELLS = 1 << 20  # documents x topics rounded at a time (document_counts)
# metadata names (any case) of the variable topics are conditioned on, in this order
TIME_FIELDS = ("year", "date", "published", "issued", "gutenberg_issued")
# the topic page's chart: bars BAR_SHARE of a bin wide (HOURS a unit, as dfr-browser offsets dates by
# whole units); y-axis labels ("100.0%") Y_LABEL_WIDTH px wide, pushed left by half a bin of a plot
# PLOT_WIDTH px wide (that of a wide window: narrower plots need less)
BAR_SHARE = 0.8
HOURS = {"day": 24, "month": 730, "year": 8766}
Y_LABEL_WIDTH = 50
PLOT_WIDTH = 1100


def write_dfr_browser(ctx: ExportContext, out: Path) -> None:
    folder = out / FOLDER
    folder.mkdir()
    write_dfr_topic_words(ctx, folder / "tw.json")
    write_dfr_doc_topics(ctx.dt, ctx.model.alpha_k, folder / "dt.json.zip")
    condition = choose_condition(ctx)
    write_dfr_metadata(ctx, folder / "meta.csv.zip", condition)
    scaled = topic_scaled(ctx)
    if scaled is None:
        ctx.log(f"export: {FOLDER}/topic_scaled.csv left out ({ctx.model.n_topics} topics x their top words is "
                "too large to scale); dfr-browser's other views work without it")
    else:
        (folder / "topic_scaled.csv").write_text("".join(f"{x:.6f},{y:.6f}\n" for x, y in scaled), encoding="utf-8")
    (folder / "info.json").write_text(json.dumps(browser_info(ctx, condition), indent=1), encoding="utf-8")


def write_dfr_topic_words(ctx: ExportContext, path: Path) -> None:
    model = ctx.model
    tw = [{"words": [str(w) for w in model.vocab[words]],
           "weights": np.rint(stored_counts(model, k, words)).astype(int).tolist()} for k, words in enumerate(ctx.top)]
    path.write_text(json.dumps({"alpha": model.alpha_k.tolist(), "tw": tw}), encoding="utf-8")


def document_counts(indptr: np.ndarray, topics: np.ndarray, weights: np.ndarray, lengths: np.ndarray,
                    alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each document's token counts over every topic, summing to its length N_d, as (document in
    the block, topic, count) for the counts above 0, by document then topic: the largest-remainder
    rounding of theta[d, k] N_d (floors, then one more token to the topics with the largest
    remainders, ties to the lower topic). theta[d, k] is the stored weight, and for the topics
    infer left out, what the stored weights leave in proportion to alpha_k (their exact theta with
    infer --threshold 0, where only topics with no tokens are left out). So count / N_d is within
    1 / N_d of theta[d, k] and the counts sum to N_d. Dense over DENSE_CELLS documents x topics at a time."""
    n_topics, n_docs = len(alpha), len(lengths)
    step = max(1, DENSE_CELLS // n_topics)
    found = []
    for lo in range(0, n_docs, step):
        hi = min(n_docs, lo + step)
        a, b = indptr[lo], indptr[hi]
        rows = np.repeat(np.arange(hi - lo), np.diff(indptr[lo:hi + 1]))
        theta = np.zeros((hi - lo, n_topics))
        theta[rows, topics[a:b]] = weights[a:b]
        left_out = np.ones_like(theta, dtype=bool)
        left_out[rows, topics[a:b]] = False
        rest = np.maximum(1.0 - theta.sum(1), 0.0)
        prior = np.where(left_out, alpha, 0.0)
        prior_sum = prior.sum(1)
        theta += prior * np.divide(rest, prior_sum, out=np.zeros_like(rest), where=prior_sum > 0)[:, None]
        theta /= np.maximum(theta.sum(1), 1e-300)[:, None]
        expected = theta * lengths[lo:hi, None]
        floors = np.floor(expected)
        short = lengths[lo:hi] - floors.sum(1).astype(np.int64)  # tokens still to give, 0 to K
        order = np.argsort(floors - expected, axis=1, kind="stable")  # largest remainder first
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(n_topics)[None, :].repeat(hi - lo, 0), axis=1)
        counts = floors.astype(np.int64) + (rank < short[:, None])
        doc, topic = np.nonzero(counts)
        found.append((lo + doc, topic, counts[doc, topic]))
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return tuple(np.concatenate(parts) for parts in zip(*found))


def write_dfr_doc_topics(dt: DocTopics, alpha: np.ndarray, path: Path, entries_per_pass: int | None = None) -> None:
    """dt.json (zipped): document_counts of every document. Topics are grouped so that one pass
    over the document topics collects at most entries_per_pass entries (default: what the memory
    budget holds); each group's columns are written in order."""
    entries_per_pass = entries_per_pass or budget_bytes() // DT_BYTES_PER_ENTRY

    def blocks():
        for first, indptr, topics, weights, lengths in dt.iter_blocks():
            docs, t, counts = document_counts(indptr, topics, weights, lengths, alpha)
            yield first + docs, t, counts

    per_topic = np.zeros(dt.n_topics, np.int64)
    for _, topics, _ in blocks():
        per_topic += np.bincount(topics, minlength=dt.n_topics)
    p = np.concatenate([[0], np.cumsum(per_topic)])
    groups, lo = [], 0
    while lo < dt.n_topics:
        hi = lo + 1
        while hi < dt.n_topics and p[hi + 1] - p[lo] <= entries_per_pass:
            hi += 1
        groups.append((lo, hi))
        lo = hi
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("dt.json", "w", force_zip64=True) as raw:
        def write(text):
            raw.write(text.encode())

        for name, column in (("i", 0), ("x", 1)):
            write(("{" if name == "i" else ",") + f'"{name}":[')
            first_value = True
            for lo, hi in groups:
                docs, topics, counts = [], [], []
                for d, t, c in blocks():
                    keep = (t >= lo) & (t < hi)
                    docs.append(d[keep])
                    topics.append(t[keep])
                    counts.append(c[keep])
                docs, topics, counts = np.concatenate(docs), np.concatenate(topics), np.concatenate(counts)
                order = np.lexsort((docs, topics))
                values = (docs if column == 0 else counts)[order]
                for start in range(0, len(values), TEXT_CHUNK):  # as text a chunk at a time
                    write(("" if first_value else ",") + ",".join(map(str, values[start:start + TEXT_CHUNK].tolist())))
                    first_value = False
            write("]")
        write(',"p":[' + ",".join(map(str, p.tolist())) + "]}")


def write_dfr_metadata(ctx: ExportContext, path: Path, condition: Condition) -> None:
    store = ctx.store
    titled = "title" in store.metadata_fields
    fields = [f for f in store.metadata_fields if f not in ("id", "title", "tokens")]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("meta.csv", "w", force_zip64=True) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        writer = csv.writer(text, lineterminator="\r\n")
        # (the condition's column is named after a field of TIME_FIELDS, which escaping leaves as it is)
        writer.writerow(html_csv_cells(["id", "title", *fields, "tokens",
                                        *([condition.column] if condition.column else [])]))
        for first, _, _, _, lengths in ctx.dt.iter_blocks():
            stop = first + len(lengths)
            ids = html_csv_cells(store.doc_ids(first, stop).tolist())
            columns = [html_csv_cells(_csv_values(store.metadata(f, first, stop))) for f in fields]
            columns.append(lengths.tolist())
            if condition.column:
                columns.append(condition.keys(store, first, stop))
            titles = html_csv_cells(_csv_values(store.metadata("title", first, stop))) if titled else ids
            writer.writerows([ids[i], titles[i] or ids[i], *(c[i] for c in columns)] for i in range(len(ids)))
        text.flush()
        text.detach()


def _csv_values(values: np.ndarray) -> list:
    if values.dtype.kind == "f":
        return ["" if not math.isfinite(v) else int(v) if v == int(v) and abs(v) < 2 ** 53 else v
                for v in values.tolist()]
    return [_list_text(v) if isinstance(v, str) else v for v in values.tolist()]


def _list_text(value: str) -> str:
    """A list the store keeps as JSON text (store.list_items) as its items joined by ", ", as a
    citation shows it; any other text unchanged."""
    items = list_items(value)
    if items is None:
        return value
    return ", ".join(item if isinstance(item, str) else json.dumps(item, ensure_ascii=False) for item in items)


@dataclass
class Condition:
    """dfr-browser's VIS.condition: a metadata field's dates (`source`) binned by `bins`, through
    the meta.csv column `column` of each date's bin start ("1987-02-01T00:01:00Z": the browser's
    Date() refuses some real dates, as Reuters' "27-MAR-1987 08:45:34.42C G T M"); else the documents'
    lengths (a continuous variable, `column` None). `n_bins`: bins from the first to the last;
    `first`: the earliest date."""
    vis: dict
    n_bins: int
    column: str | None = None
    source: str | None = None
    bins: DateBins | None = None
    first: Date | None = None

    def keys(self, store, first: int, stop: int) -> list[str]:
        """The starts of the bins of documents [first, stop) as UTC times: midnight for the first
        bin, a minute past for the others. dfr-browser's bins run from the earliest date by whole
        steps while a step is before the latest date: so they start where ours do, and the last
        bin's start is before the latest date."""
        origin = self.bins.start(self.first)
        starts = [self.bins.start(parse_date(v)) for v in _csv_values(store.metadata(self.source, first, stop))]
        return [f"{s}T00:0{0 if s == origin else 1}:00Z" for s in starts]


def choose_condition(ctx: ExportContext) -> Condition:
    """Topics over the first metadata field named like a time (TIME_FIELDS) whose every document
    has a date (date_bins.parse_date: a year, an ISO date, Reuters' "26-FEB-1987 15:01:01.79")
    spanning more than one bin, binned by days, weeks, months or years by the span (date_bins).
    Else over the documents' lengths, in about MAX_BINS bins of a round width. A field's dates are
    read a block at a time."""
    store = ctx.store
    by_name = {f.lower(): f for f in store.metadata_fields}
    for name in TIME_FIELDS:
        f = by_name.get(name)
        if f is None:
            continue
        found = DateRange()
        for start in store.block_starts():
            dates = [parse_date(v) for v in _csv_values(store.metadata(f, start, start + store.docs_per_block))]
            if None in dates:
                break
            for date in dates:
                found.add(date)
        else:
            bins = found.bins()
            if bins is not None:
                column = f"{f}_{bins.unit}"
                while column in store.metadata_fields:  # a name no field of the store has
                    column += "_"
                vis = {"type": "time", "name": f"{f}, {bins.describe()}",
                       "spec": {"field": column, "unit": bins.unit, "n": bins.width}}
                return Condition(vis, bins.count(found.last), column, source=f, bins=bins, first=found.first)
    top = max((float(block[4].max()) for block in ctx.dt.iter_blocks() if len(block[4])), default=1.0)
    step = _round_step(top / MAX_BINS)
    return Condition({"type": "continuous", "name": "tokens", "spec": {"field": "tokens", "step": step}},
                     int(top // step) + 1)


def _round_step(width: float) -> float:
    """1, 2 or 5 times a power of ten, at least `width`."""
    if width <= 0:
        return 1
    power = 10.0 ** math.floor(math.log10(width))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= width)
    return int(step) if step >= 1 else step


def browser_info(ctx: ExportContext, condition: Condition) -> dict:
    """info.json. Topics are numbered from 0 as everywhere in bigtopics (VIS.topic_ids; dfr-browser
    numbers from 1 by default, and its URLs #/topic/<id> take these ids) and labelled "<k> <label>"
    (VIS.topic_labels, keyed by dfr-browser's own 1-based index). The stacked chart of topics over
    the condition stacks from its axis, not as a streamgraph (whose baseline wanders below the axis
    where a bin has no documents). The topic page's time bars are most of a bin wide, and its left
    margin holds the y axis' labels, which dfr-browser pushes left by half a bin."""
    model, store = ctx.model, ctx.store
    half_bin = PLOT_WIDTH / 2 / max(condition.n_bins - 1 + BAR_SHARE, 1)
    vis = {"metadata": {"type": "base", "spec": {"date_field": [condition.column] if condition.column else []}},
           "bib": {"type": "base"}, "bib_view": {"major": "all", "minor": "raw"}, "condition": condition.vis,
           "topic_ids": list(range(model.n_topics)),
           "topic_labels": {str(k + 1): f"{k} {label}" for k, label in enumerate(ctx.labels)},
           "model_view": {"conditional": {"streamgraph": False}},
           "topic_view": {"m": {"left": Y_LABEL_WIDTH + math.ceil(half_bin)}}}
    if condition.bins is not None:  # in hours: dfr-browser offsets dates by whole units
        bar = {"unit": "hour", "w": int(BAR_SHARE * condition.bins.width * HOURS[condition.bins.unit])}
        vis["topic_view"]["time"] = {"bar": bar}
        vis["model_view"]["list"] = {"spark": {"time": {"bar": bar}}}
    else:
        vis["topic_view"]["continuous"] = {"bar": {"w": BAR_SHARE}}
    run_name = html_escape(ctx.run.name)  # dfr-browser inserts title and meta_info as HTML
    return {
        "title": f"bigtopics: {run_name}",
        "meta_info": f"<p>{model.n_topics} topics over {store.n_docs:,} documents and {model.n_words:,} words "
                     f"(sum of alpha {model.alpha_k.sum():g}, eta {model.eta:g}), exported by bigtopics from "
                     f"{run_name}. Topics are numbered from 0. A document's weights are its length N_d shared "
                     "among the topics by theta (rounded to whole tokens that sum to N_d), so its shares are "
                     "theta to within 1/N_d.</p>",
        "VIS": vis,
    }


def topic_scaled(ctx: ExportContext) -> np.ndarray | None:
    """K x 2 coordinates: classical MDS of the Hellinger distances between the topics' p(w | k)
    over the union U of their top SCALED_WORDS words (each restricted distribution renormalised);
    None when K x |U| exceeds SCALED_CELLS."""
    model = ctx.model
    words = top_word_union(model, SCALED_WORDS)
    if model.n_topics * len(words) > SCALED_CELLS:
        return None
    p = topic_word_probabilities(model, words)
    roots = np.sqrt(p / p.sum(1, keepdims=True))
    # the double-centred K x K Gram matrix of the roots is (roots - their mean)(...)^T, so its top
    # eigenvectors scaled are the centred roots' top left singular vectors times their singular
    # values: the same coordinates without a K x K matrix
    vectors, values, _ = np.linalg.svd(roots - roots.mean(0), full_matrices=False)
    coords = vectors[:, :2] * values[:2]
    if coords.shape[1] < 2:
        coords = np.pad(coords, ((0, 0), (0, 2 - coords.shape[1])))
    return coords


WRITERS = (Writer((FOLDER,), write_dfr_browser, needs="doc_topics"),)
