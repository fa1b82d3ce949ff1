"""A topic's weight over the values of a metadata field, tallied in one pass (site/collect.py).

Per value v of a field, the tokens of each topic, sum_{d has v} N_d theta[d, k], and the tokens of
the value, sum_{d has v} N_d; a topic's weight over v is their ratio, the share of v's tokens in k.
What a value is depends on the field:
  - a list (ingest stores a JSON list as its text; Gutenberg's subjects, Reuters' categories):
    each item is a value, and a document counts under every item it has;
  - a date (1994-08-01, 1851, 26-FEB-1987 15:01:01.79): the values are the years, months or days
    the dates span (years when they span two years or more, else months when they span two months
    or more, else days), every bin from the first to the last, an empty one without a share;
  - a number, or another text: the value itself.
Memory is bounded by K and the number of distinct values, never by documents: a field keeps at
most max(MAX_FIELD_VALUES, MAX_TALLY_CELLS / K) distinct values (a field with more, an id, is
dropped when it reaches them), and charts the MAX_FIELD_VALUES with the most tokens; a number
field with more than MAX_FIELD_VALUES values is not charted (one value a document: an id).
"""

from __future__ import annotations

import datetime

import numpy as np

from ..date_bins import PRECISION, parse_date, position
from ..store import list_items

MAX_FIELD_VALUES = 500
MAX_TALLY_CELLS = 2_000_000


class _Table:
    """Tokens per topic for a growing set of keys, at most `cap` of them (then dropped)."""

    def __init__(self, n_topics: int, cap: int):
        self.n_topics, self.cap = n_topics, cap
        self.index: dict = {}
        self.topic_tokens = np.zeros((16, n_topics))
        self.tokens = np.zeros(16)
        self.dropped = False

    def rows(self, keys: list) -> list[int]:
        out = []
        for key in keys:
            row = self.index.get(key)
            if row is None:
                if len(self.index) >= self.cap:
                    self.dropped = True
                    self.index, self.topic_tokens, self.tokens = {}, np.zeros((0, self.n_topics)), np.zeros(0)
                    return []
                row = self.index[key] = len(self.index)
                if row >= len(self.tokens):  # (capacity doubles: a value is added in amortised O(K))
                    self.topic_tokens = np.vstack([self.topic_tokens, np.zeros_like(self.topic_tokens)])
                    self.tokens = np.concatenate([self.tokens, np.zeros_like(self.tokens)])
            out.append(row)
        return out

    def add(self, keys_of_unique: list[list], inverse: np.ndarray, doc_of: np.ndarray, topics: np.ndarray,
            token_weights: np.ndarray, lengths: np.ndarray) -> None:
        """Add a block: each distinct value's keys, each document's distinct value (inverse), its
        entries (document, topic, N_d theta) and lengths."""
        if self.dropped:
            return
        rows = [self.rows(keys) for keys in keys_of_unique]
        if self.dropped:
            return
        sizes = np.array([len(r) for r in rows], np.int64)
        flat = np.array([r for rs in rows for r in rs], np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        n_rows = sizes[inverse]  # rows (keys) of each document
        # (document, row) pairs, then (entry, row) pairs: a document counts under each of its keys
        doc_pair = np.repeat(np.arange(len(inverse)), n_rows)
        pair_row = flat[np.repeat(starts[inverse], n_rows) + _ranks(n_rows)]
        np.add.at(self.tokens, pair_row, lengths[doc_pair])
        entry_pairs = n_rows[doc_of]
        entry = np.repeat(np.arange(len(doc_of)), entry_pairs)
        entry_row = flat[np.repeat(starts[inverse[doc_of]], entry_pairs) + _ranks(entry_pairs)]
        np.add.at(self.topic_tokens, (entry_row, topics[entry]), token_weights[entry])

    def arrays(self) -> tuple[list, np.ndarray, np.ndarray]:
        n = len(self.index)
        return list(self.index), self.tokens[:n], self.topic_tokens[:n]


def _ranks(sizes: np.ndarray) -> np.ndarray:
    """0, 1, ..., size - 1 for each size, concatenated."""
    total = int(sizes.sum())
    return np.arange(total) - np.repeat(np.cumsum(sizes) - sizes, sizes)


class FieldTally:
    """A topic's weight over one metadata field's values (module docstring)."""

    def __init__(self, name: str, n_topics: int):
        self.name, self.n_topics = name, n_topics
        cap = max(MAX_FIELD_VALUES, MAX_TALLY_CELLS // max(n_topics, 1))
        self.values = _Table(n_topics, cap)  # numbers, texts, list items
        self.dates = {unit: _Table(n_topics, cap) for unit in ("year", "month", "day")}
        self.undated = False  # a value not a date was seen: not a date field
        self.is_list = False
        self.numeric = True
        self.level = PRECISION["day"]  # the coarsest date seen (date_bins.PRECISION: 0 a year, 1 a month, 2 a day)

    def add(self, values: np.ndarray, doc_of: np.ndarray, topics: np.ndarray, token_weights: np.ndarray,
            lengths: np.ndarray) -> None:
        """Values of a block's documents; its entries (document, topic, N_d theta) and lengths."""
        uniques, inverse = np.unique(values, return_inverse=True)
        inverse, uniques = inverse.reshape(-1), uniques.tolist()
        self.values.add([self._keys(v) for v in uniques], inverse, doc_of, topics, token_weights, lengths)
        if self.undated:
            return
        if values.dtype.kind not in "OUT":
            self.undated = True
            return
        dates = [parse_date(v, at_start=True) if v else None for v in uniques]
        if any(d is None and v for d, v in zip(dates, uniques)):
            self.undated = True
            return
        for d in dates:
            if d is not None:
                self.level = min(self.level, PRECISION[d.precision])
        for unit, table in self.dates.items():
            table.add([[] if d is None else [position(d, unit)] for d in dates], inverse, doc_of, topics, token_weights,
                      lengths)

    def _keys(self, value) -> list:
        if isinstance(value, bool):
            self.numeric = False
            return [value]
        if isinstance(value, (int, float)):
            return [] if value != value else [value]  # (NaN: missing)
        self.numeric = False
        if not value:
            return []
        items = list_items(value)
        if items is None:
            return [value]
        self.is_list = True
        return [json_key(item) for item in items if item not in (None, "")]

    def result(self) -> dict | None:
        """{"values", "tokens", "share" (per topic per value, None for an empty bin), "kind"
        (number, date, list or text), "unit" (a date's), "n_distinct"}, or None for a field
        with nothing to chart."""
        if not self.undated:
            dated = self._dates()
            if dated is not None:
                return dated
        if self.values.dropped or not self.values.index:
            return None
        keys, tokens, topic_tokens = self.values.arrays()
        if self.numeric and len(keys) > MAX_FIELD_VALUES:
            return None
        keep = np.argsort(-tokens, kind="stable")[:MAX_FIELD_VALUES]
        order = sorted(keep.tolist(), key=(lambda i: keys[i]) if self.numeric else (lambda i: str(keys[i])))
        return _result([keys[i] for i in order], tokens[order], topic_tokens[order],
                       "number" if self.numeric else "list" if self.is_list else "text", None, len(keys))

    def _dates(self) -> dict | None:
        years = self.dates["year"]
        if years.dropped or not years.index:
            return None
        unit = "year"
        if max(years.index) - min(years.index) < 2 and self.level > 0:
            months = self.dates["month"].index
            unit = "month" if max(months) - min(months) >= 2 or self.level == 1 else "day"
        table = self.dates[unit]
        if table.dropped:
            return None
        keys, tokens, topic_tokens = table.arrays()
        if unit == "year":  # the years there are, on a numeric axis
            order = np.argsort(keys)
            return _result([keys[i] for i in order], tokens[order], topic_tokens[order], "date", unit, len(keys))
        bins = list(range(min(keys), max(keys) + 1))  # every bin from the first to the last
        row = {key: i for i, key in enumerate(keys)}
        full_tokens = np.array([tokens[row[b]] if b in row else 0.0 for b in bins])
        full_topics = np.array([topic_tokens[row[b]] if b in row else np.zeros(self.n_topics) for b in bins])
        return _result([_label(b, unit) for b in bins], full_tokens, full_topics, "date", unit, len(keys))


def json_key(item):
    """A list item as a value: numbers and booleans as they are, anything else as text."""
    return item if isinstance(item, (int, float, bool)) else str(item)


def _label(key: int, unit: str) -> str:
    if unit == "month":
        return f"{key // 12:04d}-{key % 12 + 1:02d}"
    return datetime.date.fromordinal(key).isoformat()


def _result(values: list, tokens: np.ndarray, topic_tokens: np.ndarray, kind: str, unit: str | None,
            n_distinct: int) -> dict:
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(tokens[:, None] > 0, topic_tokens / np.where(tokens > 0, tokens, 1)[:, None], np.nan)
    return {"values": values, "tokens": tokens.tolist(), "share": share.T, "kind": kind, "unit": unit,
            "numeric": kind == "number" or unit == "year", "n_distinct": n_distinct}
