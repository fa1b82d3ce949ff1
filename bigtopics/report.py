"""report.html: one self-contained page (inline CSS, JS and SVG; no network) describing a run.

Every topic with its top words, size and diagnostics (from <run>/evaluation.json when
`bigtopics evaluate` has been run), the documents most about it (with --doc-topics; kept as a
running top-n per topic while the document topics stream past), and the training curve from
metrics.jsonl (throughput, and the held-out score when the trainer logged one). Each topic's
number stands beside its label (topic_labels.py: its top words, or the one `--topic-labels`
gives), as on the site and in the exports. Every text the page takes from the run or the user
(words, labels, document titles and ids, the run's name, notices) is escape.html_escape'd.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

from .atomic import atomic_write_bytes
from .diagnostics import top_word_ids
from .doc_topics import DocTopics
from .escape import html_escape
from .evaluate import current_evaluation
from .locations import is_url
from .model import Model, load_model
from .options import check_applies
from .places import check_output_file
from .rundir import METRICS_NAME, read_metrics
from .store import StoreError, open_store
from .topic_labels import topic_labels as labels_of_topics  # (build_report takes a topic_labels file)

REPORT_NAME = "report.html"
REPORT_TITLE = "bigtopics report: "  # also how an earlier report is recognised, to be replaced
CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em}
table{border-collapse:collapse;width:100%}td,th{padding:.3em .5em;border-bottom:1px solid #ddd;vertical-align:top}
th{text-align:left;background:#f4f4f4;cursor:pointer}td.n{text-align:right;font-variant-numeric:tabular-nums}
.words{font-weight:600}.label{font-weight:600;color:#4a7fb5}.docs{color:#555;font-size:.9em}.bar{background:#4a7fb5;height:.7em;display:inline-block}
svg{background:#fafafa;border:1px solid #ddd}input{font-size:1em;padding:.3em;width:20em}
"""
JS = """
function filterTopics(q){q=q.toLowerCase();document.querySelectorAll('#topics tbody tr').forEach(function(r){
r.style.display=r.textContent.toLowerCase().indexOf(q)>=0?'':'none';});}
function sortTopics(col){var b=document.querySelector('#topics tbody');var rows=Array.from(b.rows);
rows.sort(function(a,c){return parseFloat(c.cells[col].dataset.v)-parseFloat(a.cells[col].dataset.v);});
rows.forEach(function(r){b.appendChild(r);});}
"""


def top_documents(dt: DocTopics, n_topics: int, n: int) -> list[list[tuple[int, float]]]:
    """Per topic the n documents with the largest weight, as (document, weight), largest first;
    memory is n per topic plus one block."""
    best_docs = np.zeros((0,), np.int64)
    best_topics = np.zeros((0,), np.int64)
    best_weights = np.zeros((0,), np.float64)
    for first, indptr, topics, weights, _ in dt.iter_blocks():
        docs = first + np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        all_docs = np.concatenate([best_docs, docs])
        all_topics = np.concatenate([best_topics, topics])
        all_weights = np.concatenate([best_weights, weights])
        order = np.lexsort((all_docs, -all_weights, all_topics))
        rank = np.arange(len(order)) - np.searchsorted(all_topics[order], all_topics[order])
        keep = order[rank < n]
        best_docs, best_topics, best_weights = all_docs[keep], all_topics[keep], all_weights[keep]
    out = [[] for _ in range(n_topics)]
    for d, k, w in zip(best_docs.tolist(), best_topics.tolist(), best_weights.tolist()):
        out[k].append((d, w))
    return out


def svg_plot(xs, ys, *, title: str, x_label: str, y_label: str, width: int = 640, height: int = 220,
             from_zero: bool = False) -> str:
    """A line plot as inline SVG, axes labelled with their ranges; with from_zero the y axis starts
    at 0 (for a rate, whose ups and downs an axis drawn from its minimum would magnify)."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    pad = 72
    if len(xs) == 0:
        return f"<p>{html_escape(title)}: no data.</p>"
    x0, x1 = xs.min(), max(xs.max(), xs.min() + 1e-9)
    y0 = min(ys.min(), 0.0) if from_zero else ys.min()
    y1 = max(ys.max(), y0 + 1e-9)
    px = pad + (xs - x0) / (x1 - x0) * (width - 2 * pad)
    py = height - pad + (ys - y0) / (y1 - y0) * (2 * pad - height)
    points = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px, py))
    e = html_escape
    return (f'<svg width="{width}" height="{height}" role="img" aria-label="{e(title)}">'
            f'<text x="{width / 2}" y="18" text-anchor="middle" font-weight="600">{e(title)}</text>'
            f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#888"/>'
            f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#888"/>'
            f'<polyline fill="none" stroke="#4a7fb5" stroke-width="2" points="{points}"/>'
            + "".join(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="#4a7fb5"/>' for a, b in zip(px, py))
            + f'<text x="{pad}" y="{height - pad + 16}" font-size="11">{x0:,.4g}</text>'
            f'<text x="{width - pad}" y="{height - pad + 16}" font-size="11" text-anchor="end">{x1:,.4g}</text>'
            f'<text x="{pad - 4}" y="{height - pad}" font-size="11" text-anchor="end">{_number(y0)}</text>'
            f'<text x="{pad - 4}" y="{pad + 4}" font-size="11" text-anchor="end">{_number(y1)}</text>'
            f'<text x="{width / 2}" y="{height - 10}" text-anchor="middle" font-size="12">{e(x_label)}</text>'
            f'<text x="14" y="{height / 2}" text-anchor="middle" font-size="12" '
            f'transform="rotate(-90 14 {height / 2})">{e(y_label)}</text></svg>')


def _number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1e4 else f"{x:.4g}"


def training_curves(run: Path) -> str:
    path = run / METRICS_NAME
    if not path.exists():
        return "<p>No metrics.jsonl in this run.</p>"
    records = read_metrics(path)  # (a line torn by a crash is skipped, not an error)
    parts = [svg_plot([r["seconds"] for r in records], [r["tokens_per_s"] for r in records],
                      title="Throughput", x_label="seconds of training", y_label="tokens / s", from_zero=True)]
    heldout = [r for r in records if r.get("heldout_loglik") is not None]
    if heldout:
        parts.append(svg_plot([r["seconds"] for r in heldout], [r["heldout_loglik"] for r in heldout],
                              title="Held-out log-likelihood per token", x_label="seconds of training",
                              y_label="nats / token"))
    else:
        parts.append("<p>No held-out score was logged during training.</p>")
    return "\n".join(parts)


def training_summary(model: Model) -> str:
    """What the model was trained on: the store's documents less those held out, and the
    visits of them (a document is visited once an epoch), e.g. "trained on 1,464 documents: 14,640
    document visits (10.00 epochs), 3,318,670 tokens"."""
    progress = model.attrs.get("progress") or {}
    visits, tokens = int(progress.get("docs_seen", 0)), int(progress.get("tokens_seen", 0))
    training = training_documents(model)
    if training is None:
        return f"trained on {visits:,} document visits, {tokens:,} tokens"
    return (f"trained on {training:,} documents: {visits:,} document visits ({visits / training:.2f} epochs), "
            f"{tokens:,} tokens")


def training_documents(model: Model, n_docs: int | None = None) -> int | None:
    """The documents the model is trained on: those of its training store (as the model records
    it, else `n_docs`) less the held-out ones and those kept out to fit alpha's scale, at least 1;
    None if neither gives the number."""
    n_docs = (model.attrs.get("store_fingerprint") or {}).get("n_docs") or n_docs
    if not n_docs:
        return None
    settings = model.attrs.get("settings") or {}
    return max(int(n_docs) - int(settings.get("heldout", 0)) - int(settings.get("scale_docs") or 0), 1)


def document_names(store, doc_numbers) -> dict[int, str]:
    """Each document's name for readers: its title where the store has one ("Moby Dick
    [pg2701#3]"), else its id. Reads each chunk of ids and titles that holds any of them once."""
    step = store.group["doc_ids"].chunks[0]
    titled = "title" in store.metadata_fields
    names = {}
    wanted = sorted({int(d) for d in doc_numbers})
    for first, in_chunk in itertools.groupby(wanted, key=lambda d: d - d % step):
        ids = store.doc_ids(first, first + step)
        titles = store.metadata("title", first, first + step) if titled else None
        for d in in_chunk:
            title = titles[d - first] if titles is not None else ""
            title = title if isinstance(title, str) else ""  # a numeric or missing title is no name
            names[d] = f"{title} [{ids[d - first]}]" if title else str(ids[d - first])
    return names


def _prior_text(model: Model) -> str:
    """alpha as the page states it: the number, or for a learned alpha its range and sum."""
    if np.ndim(model.alpha) == 0:
        return f"{model.alpha:g}"
    scale = model.attrs.get("alpha_scale")
    scaled = (f"; the training documents' fit times {scale['factor']:.3g}, the factor that best predicts "
              f"{scale['documents']:,} documents kept out of training") if scale else ""
    return (f"learned, {model.alpha.min():.3g} to {model.alpha.max():.3g} (sum {model.alpha_sum:.3g}{scaled}; "
            "click the alpha column to order the topics by it)")


def is_report(path) -> bool:
    """Whether the file at `path` is a report bigtopics wrote (its title, in its first bytes)."""
    try:
        with open(path, "rb") as f:
            return REPORT_TITLE.encode() in f.read(512)
    except OSError:
        return False


def build_report(run, output=None, *, doc_topics=None, store=None, n_words: int = 12, n_docs: int = 5,
                 topic_labels: str | Path | None = None, overwrite: bool = False, log=None,
                 storage_options: dict | None = None) -> Path:
    """Write the report (default <run>/report.html); returns its path. It replaces an earlier
    report, but another existing file only with overwrite, and never where places.py forbids. A
    notice that evaluation.json is stale goes to `log` (default: stderr) and onto the page.
    `doc_topics` and `store` may be URLs (`storage_options` for them; bigtopics/locations.py);
    `topic_labels` a labels file (topic_labels.py), read and checked before anything is written."""
    log = log or (lambda msg: print(msg, file=sys.stderr))
    if doc_topics is None:
        check_applies([f"--store {store}"] * (store is not None), "--doc-topics")  # (it names their documents)
    run = Path(run)
    model: Model = load_model(run)
    labels = labels_of_topics(model, topic_labels)
    output = Path(output) if output else run / REPORT_NAME
    check_output_file(output, overwrite, is_report, "a bigtopics report", run_file=REPORT_NAME)
    evaluation, notice = current_evaluation(run, model)
    if notice:
        log(notice)
    documents = [[] for _ in range(model.n_topics)]
    doc_name = {}
    if doc_topics:
        dt = DocTopics(doc_topics, storage_options)
        documents = top_documents(dt, model.n_topics, n_docs)
        store_path = store or dt.attrs.get("store")
        names_from = None
        if store_path and is_url(store_path):  # a recorded store that is gone leaves the names out
            try:
                names_from = open_store(store_path, storage_options)
            except FileNotFoundError:
                if store:
                    raise
        elif store_path and Path(store_path).exists():
            names_from = open_store(store_path)
        if names_from is not None:
            if names_from.n_docs != dt.n_docs:
                raise StoreError(f"{store_path} has {names_from.n_docs:,} documents, {doc_topics} "
                                 f"{dt.n_docs:,}: give the store the document topics were inferred from")
            doc_name = document_names(names_from, [d for listed in documents for d, _ in listed])
    totals = model.topic_totals()
    share = totals / max(totals.sum(), 1e-300)
    alpha = model.alpha_k
    e = html_escape
    rows = []
    for k in range(model.n_topics):
        words = " ".join(model.vocab[top_word_ids(model, k, n_words)])
        diag = evaluation.get(k, {})
        coherence = diag.get("coherence")
        docs = ", ".join(f"{e(doc_name.get(d, str(d)))} ({w:.0%})" for d, w in documents[k])
        rows.append(
            f'<tr><td data-v="{-k}">{k} <span class="label">{e(labels[k])}</span></td>'
            f'<td class="n" data-v="{share[k]}"><span class="bar" style="width:{share[k] * 300:.0f}px"></span> '
            f'{share[k]:.1%}</td><td class="n" data-v="{alpha[k]}">{alpha[k]:.3g}</td>'
            f'<td class="n" data-v="{coherence if coherence is not None else "-Infinity"}">'
            f'{"" if coherence is None else f"{coherence:.1f}"}</td>'
            f'<td><div class="words">{e(words)}</div><div class="docs">{docs}</div></td></tr>')
    trained_on = training_summary(model)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{REPORT_TITLE}{e(run.name)}</title>
<style>{CSS}</style><script>{JS}</script></head><body>
<h1>Topic model report: {e(run.name)}</h1>
<p>{model.n_topics} topics over {model.n_words:,} words; alpha {_prior_text(model)}, eta {model.eta:g};
{e(trained_on)}.
Coherence is UMass over the top 10 words (closer to 0 is better){"" if evaluation else
f" — <strong>{e(notice)}</strong>" if notice else " — run <code>bigtopics evaluate</code> to fill it in"}.</p>
<h2>Training</h2>
{training_curves(run)}
<h2>Topics</h2>
<p><input placeholder="filter topics by word or document" oninput="filterTopics(this.value)"></p>
<table id="topics"><thead><tr><th onclick="sortTopics(0)">topic and label</th><th onclick="sortTopics(1)">size</th>
<th onclick="sortTopics(2)">alpha</th><th onclick="sortTopics(3)">coherence</th>
<th>top words, and the documents most about the topic</th></tr></thead>
<tbody>
{"".join(rows)}
</tbody></table></body></html>
"""
    atomic_write_bytes(output, page.encode("utf-8"))
    return output


def find_chromium() -> str | None:
    import shutil

    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def render_in_browser(page: Path | str, screenshot: Path, *, width: int = 1200, height: int = 1600) -> str:
    """Open the page (a file, or a URL such as file:///site/topic.html#k=3) in headless Chromium:
    save a screenshot and return the DOM after scripts ran (those that load more scripts too:
    Chromium's virtual clock runs up to 10 s of timers and loads first).

    The check behind "the report renders": `python -c 'from bigtopics.report import *;
    print(render_in_browser(Path("run/report.html"), Path("report.png"))[:500])'`, then look at
    report.png. Needs chromium (apt-get install -y chromium).
    """
    import subprocess

    browser = find_chromium()
    if browser is None:
        raise FileNotFoundError("no chromium found (apt-get install -y chromium)")
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--virtual-time-budget=10000", "--hide-scrollbars"]
    url = page if isinstance(page, str) and ":" in page else Path(page).resolve().as_uri()
    # one browser for both: the screenshot and the DOM of the same load, at half the start-up time
    return subprocess.run(flags + [f"--screenshot={Path(screenshot).resolve()}", f"--window-size={width},{height}",
                                   "--dump-dom", url], check=True, capture_output=True, text=True, timeout=120).stdout
