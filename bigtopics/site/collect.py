"""One streaming pass over a store and its document topics for the site (site/build.py).

Documents are grouped into books: a run of consecutive documents with the same `section_of`
(ingest --section-tokens writes a book's sections one after another), or each document alone
in a store without sections. A book's topic proportions are its sections' weighted by tokens,

    theta[b, k] = sum_{d in b} N_d theta[d, k] / sum_{d in b} N_d.

The pass hands each finished book to `on_book` (which writes its page data) and keeps, in
memory bounded by K and the number of distinct metadata values, never by documents:
  - per topic the `n_books` books with the largest theta[b, k], each with its `n_sections`
    sections most about k (a running top-n, like report.top_documents);
  - per metadata field and value, the tokens of each topic, sum_d N_d theta[d, k], and the
    tokens of the value, for the topic's weight over that field. A field with more than
    MAX_FIELD_VALUES distinct values (an id, a title) is dropped as soon as it has that many;
    a text value that starts with a year (1851, 2003-11-01) counts as that year.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..doc_topics import DocTopics, by_weight
from ..store import Store

MAX_FIELD_VALUES = 500
# Fields that name a document or a book rather than describe it: never tallied.
NAME_FIELDS = ("title", "section_of", "id")
YEAR = re.compile(r"^\s*(-?\d{4})(?:$|[-/ T])")


@dataclass
class Section:
    """One document of a book: its number in the store, id, position, tokens and topics
    (topic ids by decreasing weight, weights)."""

    doc: int
    id: str
    index: int
    tokens: int
    topics: np.ndarray
    weights: np.ndarray


@dataclass
class Book:
    """A book (or a document without sections): its number among the books, id, title,
    metadata of its first section, tokens, sections, and its topics by decreasing weight."""

    number: int
    id: str
    title: str
    meta: dict
    sections: list[Section] = field(default_factory=list)

    tokens: int = 0

    def add(self, section: Section) -> None:
        self.sections.append(section)
        self.tokens += section.tokens

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every section's topics as flat arrays: (section's position in the book, topic, weight)."""
        sizes = [len(s.topics) for s in self.sections]
        position = np.repeat(np.arange(len(self.sections)), sizes)
        return position, np.concatenate([s.topics for s in self.sections]), np.concatenate(
            [s.weights for s in self.sections])

    def topics(self) -> tuple[np.ndarray, np.ndarray]:
        """(topic ids, theta[b, k]) by decreasing weight (ties: lower id first)."""
        position, topics, weights = self.entries()
        if not len(topics):
            return topics.astype(np.int64), weights.astype(np.float64)
        lengths = np.array([s.tokens for s in self.sections], np.float64)
        ids, inverse = np.unique(topics, return_inverse=True)
        theta = np.bincount(inverse, weights=weights * lengths[position]) / max(self.tokens, 1)
        order = np.lexsort((ids, -theta))
        return ids[order], theta[order]


class FieldTally:
    """Tokens of each topic per value of one metadata field (see the module docstring)."""

    def __init__(self, name: str, n_topics: int):
        self.name, self.n_topics = name, n_topics
        self.index: dict = {}
        self.topic_tokens = np.zeros((0, n_topics))
        self.tokens = np.zeros(0)
        self.dropped = False

    @staticmethod
    def key(value):
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, (float, np.floating)):
            return None if np.isnan(value) else float(value)
        match = YEAR.match(str(value))
        return int(match.group(1)) if match else (str(value) or None)

    def add(self, values: np.ndarray, doc_of: np.ndarray, topics: np.ndarray, token_weights: np.ndarray,
            lengths: np.ndarray) -> None:
        """Values of a block's documents; its entries (document, topic, N_d theta) and lengths."""
        if self.dropped:
            return
        uniques, inverse = np.unique(values, return_inverse=True)
        rows = np.array([self._row(self.key(v)) for v in uniques], np.int64)
        if self.dropped:
            return
        row_of_doc = rows[inverse]
        known = row_of_doc >= 0
        np.add.at(self.tokens, row_of_doc[known], lengths[known])
        entry_known = known[doc_of]
        np.add.at(self.topic_tokens, (row_of_doc[doc_of][entry_known], topics[entry_known]),
                  token_weights[entry_known])

    def _row(self, key) -> int:
        if key is None:
            return -1
        row = self.index.get(key)
        if row is None:
            if len(self.index) >= MAX_FIELD_VALUES:
                self.dropped = True
                self.index, self.topic_tokens, self.tokens = {}, np.zeros((0, self.n_topics)), np.zeros(0)
                return -1
            row = self.index[key] = len(self.index)
            self.topic_tokens = np.vstack([self.topic_tokens, np.zeros((1, self.n_topics))])
            self.tokens = np.append(self.tokens, 0.0)
        return row

    def result(self) -> dict | None:
        """{"values": sorted values, "tokens": per value, "share": per topic per value, the
        fraction of the value's tokens in the topic}, or None for a dropped or empty field."""
        if self.dropped or not self.index:
            return None
        keys = list(self.index)
        numeric = all(isinstance(k, (int, float)) and not isinstance(k, bool) for k in keys)
        order = sorted(range(len(keys)), key=(lambda i: keys[i]) if numeric else (lambda i: str(keys[i])))
        tokens = self.tokens[order]
        share = self.topic_tokens[order] / np.maximum(tokens, 1e-300)[:, None]
        return {"values": [keys[i] for i in order], "numeric": numeric, "tokens": tokens.tolist(),
                "share": share.T}


class TopBooks:
    """Per topic the n books with the largest theta[b, k], with their sections most about k."""

    def __init__(self, n_topics: int, n_books: int, n_sections: int):
        self.n_books, self.n_sections = n_books, n_sections
        self.best: list[list[tuple[float, int, dict]]] = [[] for _ in range(n_topics)]

    def add(self, book: Book, topics: np.ndarray, weights: np.ndarray) -> None:
        entries = None
        for k, w in zip(topics.tolist(), weights.tolist()):
            best = self.best[k]
            if len(best) >= self.n_books and (w, -book.number) <= (best[-1][0], -best[-1][1]):
                continue
            if entries is None:
                entries = book.entries()
            position, entry_topics, entry_weights = entries
            hits = np.flatnonzero(entry_topics == k)
            hits = hits[np.lexsort((position[hits], -entry_weights[hits]))][: self.n_sections]
            entry = {"book": book.number, "id": book.id, "title": book.title, "weight": w, "tokens": book.tokens,
                     "n_sections": len(book.sections),
                     "sections": [{"doc": s.doc, "id": s.id, "index": s.index, "weight": float(entry_weights[h])}
                                  for h in hits.tolist() for s in (book.sections[position[h]],)]}
            best.append((w, book.number, entry))
            best.sort(key=lambda item: (-item[0], item[1]))
            del best[self.n_books:]

    def result(self, k: int) -> list[dict]:
        return [entry for _, _, entry in self.best[k]]


def stream_books(store: Store, dt: DocTopics, on_book, tallies: dict[str, FieldTally], top: TopBooks,
                 progress=None) -> int:
    """Pass over the store's documents with their topics in blocks; returns the number of books."""
    fields = store.metadata_fields
    sectioned = "section_of" in fields
    step = store.docs_per_block
    current: Book | None = None
    n_books = 0

    def finish(book: Book) -> None:
        topics, weights = book.topics()
        top.add(book, topics, weights)
        on_book(book, topics, weights)

    for (first, indptr, topics, weights, lengths) in dt.iter_blocks(step):
        topics, weights = by_weight(indptr, topics, weights)  # a section's topics largest first
        stop = first + len(lengths)
        ids = store.doc_ids(first, stop)
        meta = {f: store.metadata(f, first, stop) for f in fields}
        doc_of = np.repeat(np.arange(len(lengths)), np.diff(indptr))
        token_weights = weights * lengths[doc_of]
        for name, tally in tallies.items():
            tally.add(meta[name], doc_of, topics, token_weights, lengths)
        book_ids = meta["section_of"] if sectioned else ids
        titles = meta.get("title")
        section_index = meta.get("section_index")
        for i in range(len(lengths)):
            book_id = str(book_ids[i])
            if current is None or current.id != book_id:
                if current is not None:
                    finish(current)
                title = str(titles[i]) if titles is not None else ""
                current = Book(n_books, book_id, title, {f: _plain(meta[f][i]) for f in fields
                                                         if f not in ("section_index",) + NAME_FIELDS})
                n_books += 1
            a, b = indptr[i], indptr[i + 1]
            current.add(Section(first + i, str(ids[i]), int(section_index[i]) if section_index is not None else 0,
                                int(lengths[i]), topics[a:b], weights[a:b]))
        if progress is not None:
            progress.update(len(lengths))
    if current is not None:
        finish(current)
    return n_books


def _plain(value):
    """A metadata value as JSON takes it."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and np.isnan(value):
        return None
    return value if isinstance(value, (int, float, bool)) else str(value)
