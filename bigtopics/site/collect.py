"""One streaming pass over a store and its document topics for the site (site/build.py).

Documents are grouped into books: a run of consecutive documents with the same `section_of`
(ingest --section-tokens writes a book's sections one after another), or each document alone
in a store without sections. A book's topic proportions are its sections' weighted by tokens,

    theta[b, k] = sum_{d in b} N_d theta[d, k] / sum_{d in b} N_d.

The pass hands each finished book to `on_book` (which writes its page data) and keeps, in
memory bounded by K and the number of distinct metadata values, never by documents:
  - per topic the `n_books` books with the largest theta[b, k], each with its `n_sections`
    sections most about k (a running top-n, like report.top_documents);
  - per metadata field and value, the tokens of each topic (site/facets.py: list items one by
    one, dates binned by the span they cover);
and gives each book the words it is found by (site/search_index.py): those of its title, its id
and every metadata value of each of its sections.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..doc_topics import DocTopics, by_weight
from ..store import Store, list_items
from .facets import FieldTally
from .search_index import value_words, words

# Fields that name a document or a book rather than describe it: never tallied.
NAME_FIELDS = ("title", "section_of", "id")
# Fields of a section, not of its book: not in the book's metadata nor among its words.
SECTION_FIELDS = ("section_index", "section_of")


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
    title_words: set[str] = field(default_factory=set)
    words: set[str] = field(default_factory=set)  # of its id and its sections' metadata

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
    word_fields = [f for f in fields if f not in SECTION_FIELDS]
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
        # per field: (the words of each distinct value, each document's value)
        value_words_of = [_words_of_values(meta[f]) for f in word_fields]
        title_of = word_fields.index("title") if "title" in word_fields else -1
        for i in range(len(lengths)):
            book_id = str(book_ids[i])
            if current is None or current.id != book_id:
                if current is not None:
                    finish(current)
                title = str(titles[i]) if titles is not None else ""
                current = Book(n_books, book_id, title, {f: _plain(meta[f][i]) for f in fields
                                                         if f not in SECTION_FIELDS + NAME_FIELDS})
                current.words.update(words(book_id))
                n_books += 1
            for j, (value_words_list, inverse) in enumerate(value_words_of):
                (current.title_words if j == title_of else current.words).update(value_words_list[inverse[i]])
            a, b = indptr[i], indptr[i + 1]
            current.add(Section(first + i, str(ids[i]), int(section_index[i]) if section_index is not None else 0,
                                int(lengths[i]), topics[a:b], weights[a:b]))
        if progress is not None:
            progress.update(len(lengths))
    if current is not None:
        finish(current)
    return n_books


def _words_of_values(values: np.ndarray) -> tuple[list[list[str]], np.ndarray]:
    """The words of each distinct value of a block's column, and each document's value."""
    uniques, inverse = np.unique(values, return_inverse=True)
    return [value_words(v) for v in uniques.tolist()], inverse.reshape(-1)


def _plain(value):
    """A metadata value as JSON takes it (a list stored as JSON text as the list)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and np.isnan(value):
        return None
    if isinstance(value, (int, float, bool)):
        return value
    items = list_items(str(value))
    return str(value) if items is None else items
