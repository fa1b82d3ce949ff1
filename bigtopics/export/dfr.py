"""dfr-browser's data folder, `dfr-browser/`: copy it to dfr-browser's `data/` (or point
VIS.files at it) and serve dfr-browser's files; nothing in it needs editing.

  info.json          title and meta_info (HTML, as dfr-browser inserts them: the run's name is
                     escaped), and VIS settings for metadata that is not JSTOR's:
                     metadata and bibliography of type "base" (meta.csv has a header), and the
                     variable topics are conditioned on (choose_condition)
  meta.csv.zip       meta.csv, RFC 4180 with a header: id, title (the id where the store has no
                     titles), every metadata field of the store, tokens (the document's length),
                     and with a text date to condition on, <field>_year (choose_condition).
                     dfr-browser inserts every text value into its pages as HTML (a document's
                     citation is its values joined), so each text cell and field name is
                     escape.html_csv_cell: HTML-escaped, and safe from formulas in a spreadsheet
  tw.json            {"alpha": [alpha_k], "tw": [{"words": top words, "weights": N[k, w] rounded}]}
  dt.json.zip        dt.json, the documents x topics token counts round(theta[d, k] N_d) in
                     compressed sparse columns {"i": doc per entry, "p": column pointers (K + 1),
                     "x": counts}
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
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..doc_topics import DocTopics
from ..escape import html_csv_cells, html_escape
from ..memory import budget_bytes
from .base import ExportContext, Writer, stored_counts, top_word_union, topic_counts, topic_word_probabilities

FOLDER = "dfr-browser"
# a group's (document, topic, count) entries while collected, concatenated and sorted
DT_BYTES_PER_ENTRY = 64
TEXT_CHUNK = 1 << 16
SCALED_WORDS = 100
SCALED_CELLS = 1 << 25
CONDITION_BINS = 20
# metadata names (any case) of the variable topics are conditioned on, in this order
TIME_FIELDS = ("year", "date", "published", "issued", "gutenberg_issued")
YEAR = re.compile(r"\b\d{4}\b")


def write_dfr_browser(ctx: ExportContext, out: Path) -> None:
    folder = out / FOLDER
    folder.mkdir()
    write_dfr_topic_words(ctx, folder / "tw.json")
    write_dfr_doc_topics(ctx.dt, folder / "dt.json.zip")
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


def write_dfr_doc_topics(dt: DocTopics, path: Path, entries_per_pass: int | None = None) -> None:
    """dt.json (zipped). Topics are grouped so that one pass over the document topics collects at
    most entries_per_pass entries (default: what the memory budget holds); each group's columns
    are written in order."""
    entries_per_pass = entries_per_pass or budget_bytes() // DT_BYTES_PER_ENTRY
    per_topic = np.zeros(dt.n_topics, np.int64)
    for _, indptr, topics, weights, lengths in dt.iter_blocks():
        counts = topic_counts(indptr, weights, lengths)
        per_topic += np.bincount(topics[counts > 0], minlength=dt.n_topics)
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
                for first, indptr, t, weights, lengths in dt.iter_blocks():
                    c = topic_counts(indptr, weights, lengths)
                    keep = (t >= lo) & (t < hi) & (c > 0)
                    docs.append(first + np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))[keep])
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
                                        *([condition.column] if condition.source else [])]))
        for first, _, _, _, lengths in ctx.dt.iter_blocks():
            stop = first + len(lengths)
            ids = html_csv_cells(store.doc_ids(first, stop).tolist())
            columns = [html_csv_cells(_csv_values(store.metadata(f, first, stop))) for f in fields]
            columns.append(lengths.tolist())
            if condition.source:  # the year of each date, as a date the browser cannot misread
                dates = store.metadata(condition.source, first, stop).tolist()
                columns.append([f"{YEAR.search(v).group()}-01-01" for v in dates])
            titles = html_csv_cells(_csv_values(store.metadata("title", first, stop))) if titled else ids
            writer.writerows([ids[i], titles[i] or ids[i], *(c[i] for c in columns)] for i in range(len(ids)))
        text.flush()
        text.detach()


def _csv_values(values: np.ndarray) -> list:
    if values.dtype.kind == "f":
        return ["" if not math.isfinite(v) else int(v) if v == int(v) and abs(v) < 2 ** 53 else v
                for v in values.tolist()]
    return values.tolist()


@dataclass
class Condition:
    """dfr-browser's VIS.condition, and for a text date the field its years are taken from
    (`source`) into their own column of meta.csv (`column`)."""
    vis: dict
    source: str | None = None
    column: str | None = None


def choose_condition(ctx: ExportContext) -> Condition:
    """Topics over the first metadata field named like a time (TIME_FIELDS) whose every document
    has a value, spanning more than one year, in about CONDITION_BINS bins: a number (a year)
    by a round width; a text date ("1994-08-01", "26-FEB-1987 15:01:01.79") by a round number of
    years, through a column of its years (the browser's Date() refuses some real dates, as
    Reuters' "27-MAR-1987 08:45:34.42C G T M"). Else over the documents' lengths. A field's range
    is read a block at a time."""
    store = ctx.store
    by_name = {f.lower(): f for f in store.metadata_fields}
    for name in TIME_FIELDS:
        f = by_name.get(name)
        if f is None:
            continue
        numeric = store.metadata(f, 0, 0).dtype.kind in "iuf"
        lo, hi, complete = math.inf, -math.inf, True
        for start in store.block_starts():
            values = store.metadata(f, start, start + store.docs_per_block)
            if numeric:
                years = values.astype(np.float64)
            else:
                found = [YEAR.search(v) for v in values.tolist()]
                years = np.array([float(m.group()) if m else math.nan for m in found])
            complete = complete and bool(np.isfinite(years).all())
            if not complete:
                break
            if len(years):
                lo, hi = min(lo, float(years.min())), max(hi, float(years.max()))
        if not complete or not hi > lo:
            continue
        step = _round_step((hi - lo) / CONDITION_BINS)
        if numeric:
            return Condition({"type": "continuous", "name": f, "spec": {"field": f, "step": step}})
        column = f"{f}_year"
        while column in store.metadata_fields:  # a name no field of the store has
            column += "_"
        return Condition({"type": "time", "name": f, "spec": {"field": column, "unit": "year", "n": max(int(step), 1)}},
                         source=f, column=column)
    top = max((float(block[4].max()) for block in ctx.dt.iter_blocks() if len(block[4])), default=1.0)
    return Condition({"type": "continuous", "name": "tokens", "spec": {"field": "tokens",
                                                                        "step": _round_step(top / CONDITION_BINS)}})


def _round_step(width: float) -> float:
    """1, 2 or 5 times a power of ten, at least `width`."""
    if width <= 0:
        return 1
    power = 10.0 ** math.floor(math.log10(width))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= width)
    return int(step) if step >= 1 else step


def browser_info(ctx: ExportContext, condition: Condition) -> dict:
    model, store = ctx.model, ctx.store
    vis = {"metadata": {"type": "base", "spec": {"date_field": [condition.column] if condition.column else []}},
           "bib": {"type": "base"}, "bib_view": {"major": "all", "minor": "raw"}, "condition": condition.vis}
    if condition.column:  # the topic page's bars as wide as most of a bin (dfr-browser's default is 90 days)
        vis["topic_view"] = {"time": {"bar": {"unit": "day", "w": 250 * condition.vis["spec"]["n"]}}}
    run_name = html_escape(ctx.run.name)  # dfr-browser inserts title and meta_info as HTML
    return {
        "title": f"bigtopics: {run_name}",
        "meta_info": f"<p>{model.n_topics} topics over {store.n_docs:,} documents and {model.n_words:,} words "
                     f"(sum of alpha {model.alpha_k.sum():g}, eta {model.eta:g}), exported by bigtopics from "
                     f"{run_name}. Document weights are token counts, round(theta N_d).</p>",
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
