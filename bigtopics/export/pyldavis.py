"""pyldavis.json: the arguments of pyLDAvis.prepare, `pyLDAvis.prepare(**json.load(f))`.

pyLDAvis uses doc_topic_dists and doc_lengths only through the topic token counts
sum_d theta_dk N_d, so a single document holding every token, theta_k = N[k] / sum_k N[k] with
doc_lengths = [sum_k N[k]], gives it exactly the model's topic sizes without a documents x topics
matrix (nor a K x K identity, which at K = 20,000 is 400 million numbers). topic_term_dists are
the model's p(w | k) = (eta + N[k, w]) / (V eta + N[k]), unchanged. pyLDAvis derives every term
frequency from these two (sum_k p(w | k) N[k], the model's count of the word), not from
term_frequency, which is given as the same numbers. Topics keep their ids: sort_topics false,
start_index 0.

Up to MAX_CELLS topics x words the vocabulary is whole. Beyond, it is the union of every topic's
top PYLDAVIS_TERMS words and one more term, OTHER_WORDS, holding the rest of each topic's mass, so
that the rows still sum to 1 (pyLDAvis refuses rows that do not) while every listed word keeps
the model's probability. The file is written a topic's row at a time; beyond MAX_FILE_CELLS
topics x terms (pyLDAvis compares every pair of topics: it could not show such a model) it is
left out with a notice.

pyLDAvis's page (prepared_data_to_html, save_html) copies its data into a <script> element as
json.dumps writes it, with "<" and "/" unescaped: a word holding "</script>" would end the
element and what follows would run. Each word is written escape.inert_in_script (U+200B, a zero
width space, after a "<" starting "</" or "<!"), which the page shows as the word.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..escape import inert_in_script
from ..memory import available_bytes, format_bytes
from .base import ExportContext, Writer, top_word_union, topic_word_probabilities

PYLDAVIS_TERMS = 30
MAX_CELLS = 1 << 21
MAX_FILE_CELLS = 1 << 25
OTHER_WORDS = "(all other words)"


def pyldavis_terms(ctx: ExportContext) -> np.ndarray:
    model = ctx.model
    if model.n_topics * model.n_words <= MAX_CELLS:
        return np.arange(model.n_words)
    return top_word_union(model, PYLDAVIS_TERMS)


def write_pyldavis(ctx: ExportContext, out: Path) -> None:
    model = ctx.model
    terms = pyldavis_terms(ctx)
    columns = len(terms) + (len(terms) < model.n_words)
    cells = model.n_topics * columns
    if cells > MAX_FILE_CELLS or 8 * cells > available_bytes() // 2:
        ctx.log(f"export: pyldavis.json left out ({model.n_topics:,} topics x {columns:,} terms are {cells:,} "
                f"probabilities, {format_bytes(8 * cells)} in memory, beyond the {MAX_FILE_CELLS:,} pyLDAvis can show; "
                f"{format_bytes(available_bytes())} available); the other files are written")
        return
    dists = topic_word_probabilities(model, terms)
    vocab = [inert_in_script(str(w)) for w in model.vocab[terms]]
    if len(terms) < model.n_words:
        dists = np.concatenate([dists, np.maximum(1.0 - dists.sum(1, keepdims=True), 0.0)], axis=1)
        vocab.append(OTHER_WORDS)
    totals = model.topic_totals()
    total = float(totals.sum())
    shares = totals / total if total > 0 else np.full(model.n_topics, 1.0 / model.n_topics)
    head = {"doc_topic_dists": [shares.tolist()], "doc_lengths": [total], "vocab": vocab,
            "term_frequency": (dists.T @ totals).tolist(), "sort_topics": False, "start_index": 0}
    with open(out / "pyldavis.json", "w", encoding="utf-8") as f:
        f.write('{"topic_term_dists": [')
        for k, row in enumerate(dists):  # a row at a time: the text of K x terms numbers is never held whole
            f.write(("," if k else "") + json.dumps(row.tolist()))
        f.write("], " + json.dumps(head)[1:])


WRITERS = (Writer(("pyldavis.json",), write_pyldavis),)
