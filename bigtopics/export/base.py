"""What every export writer is given (ExportContext) and the helpers several of them share."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..diagnostics import top_word_ids
from ..doc_topics import DocTopics
from ..model import Model
from ..store import Store
from .text import text_vocab


@dataclass
class ExportOptions:
    """The choices of `bigtopics export` beyond which files (see export.export)."""
    top_words: int = 20
    index: str = "bigtopics"
    doc_topics_threshold: float = 0.0   # MALLET --doc-topics-threshold: 0 writes the dense doc_topics.txt
    doc_topics_max: int = -1            # MALLET --doc-topics-max (sparse form only); negative: all topics
    topic_word_weights: bool = False    # MALLET --topic-word-weights-file: K x V lines
    state: bool = False                 # MALLET --output-state: one line per token
    diagnostics: bool = False           # MALLET --diagnostics-file: a pass over the store
    topic_labels: str | None = None     # a labels file (topic_labels.py); default: each topic's top words


@dataclass
class ExportContext:
    """A loaded model, its top words and labels (topic_labels.py), evaluation diagnostics, and
    (with --doc-topics) the document topics and the store they were inferred from; `run` is the
    run directory."""
    run: Path
    model: Model
    options: ExportOptions
    diagnostics: dict[int, dict]
    log: Callable[[str], None]
    dt: DocTopics | None = None
    store: Store | None = None
    top: list[np.ndarray] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    storage_options: dict | None = None  # for the stores and document topics at URLs

    @property
    def vocab_text(self) -> np.ndarray:
        """The vocabulary as written in the text files (text.escape_word of each word)."""
        if not hasattr(self, "_vocab_text"):
            self._vocab_text = text_vocab(self.model.vocab)
        return self._vocab_text


@dataclass(frozen=True)
class Writer:
    """One export: the files it writes and the function writing them into a folder. `needs`:
    "model", "doc_topics" (--doc-topics given) or "assignments" (a run that kept its per-token
    topics, --exclude-own); `option`: the ExportOptions flag that turns it on (None: always)."""
    files: tuple[str, ...]
    write: Callable[[ExportContext, Path], None]
    needs: str = "model"
    option: str | None = None


def topic_norms(model: Model) -> np.ndarray:
    """V eta + N[k]: the denominator of p(w | k)."""
    return model.n_words * model.eta + model.topic_totals()


def topic_word_probabilities(model: Model, words: np.ndarray) -> np.ndarray:
    """p(w | k) = (eta + N[k, w]) / (V eta + N[k]) of the given (ascending) word ids in every
    topic: dense, K x len(words)."""
    indptr, topics, values = model.rows(words)
    p = np.full((model.n_topics, len(words)), model.eta)
    p[topics, np.repeat(np.arange(len(words)), np.diff(indptr))] += values
    p /= topic_norms(model)[:, None]
    return p


def top_word_union(model: Model, n: int) -> np.ndarray:
    """The ids of the words among some topic's n most probable, ascending."""
    return np.unique(np.concatenate([top_word_ids(model, k, n) for k in range(model.n_topics)]))


def stored_counts(model: Model, k: int, words: np.ndarray, entries=None) -> np.ndarray:
    """N[k, w] for the given word ids (0 where not stored); `entries`: model.topic_entries(k)
    if the caller has read them already."""
    stored, values = entries if entries is not None else model.topic_entries(k)
    position = np.minimum(np.searchsorted(stored, words), max(len(stored) - 1, 0))
    hit = (position < len(stored)) & (stored[position] == words) if len(stored) else np.zeros(len(words), bool)
    return np.where(hit, values[position] if len(stored) else 0.0, 0.0)


def json_line(record) -> str:
    # allow_nan=False: a bare NaN or Infinity is not JSON, and Elasticsearch and Solr reject the line
    return json.dumps(record, allow_nan=False) + "\n"


def doc_rows(dt: DocTopics, store: Store, fields=()):
    """Per block: (first doc, indptr, topics, weights, lengths, ids, {field: values} of `fields`)."""
    for first, indptr, topics, weights, lengths in dt.iter_blocks():
        stop = first + len(indptr) - 1
        meta = {f: store.metadata(f, first, stop) for f in fields}
        yield first, indptr, topics, weights, lengths, store.doc_ids(first, stop), meta
