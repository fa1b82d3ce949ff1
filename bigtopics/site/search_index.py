"""The site's search index: every book's title, id and metadata as words, inverted into posting
lists sharded by term, so that a query loads the shards of its words and nothing else.

Words are what `words()` cuts from a text, and what the search box cuts from a query the same way
(site.js, BT.words): the text lowercased, accents taken off (NFKD, combining marks dropped), runs of
letters and digits. A book's words are those of its title, its id and every metadata value of
every one of its sections (a list value's items one by one; a number as its digits; a float with
a fraction not at all): a search document built from its sections.

A posting is one book holding the word, as key = 2 * book + (1 if the word is in its title), so
that a page can rank books whose title holds every word of the query first. A word's postings,
ascending, are written as the differences of successive keys (the first from 0), each a varint of
5-bit groups, low group first, one character of ALPHABET per group (32 added while more follow):
about one character per posting for a frequent word, three for a word in 1 book of 30,000.

Terms are sorted by their UTF-16 code units, the order in which JavaScript compares strings, and
cut into shards of about SHARD_CHARS characters: data/search/<n>.js holds
[[term, books, postings], ...], and data/search.js the first term of every shard, so a term's
shard is the last whose first term is not after it. A word whose postings are longer than
OWN_FILE_CHARS has them in their own file, data/terms/<m>.js, and its shard entry is
[term, books, m, characters]: a query for a rare word loads one shard of SHARD_CHARS; one for a
frequent word that shard and its own file (at most about one character per book).

Building holds postings in memory up to a budget (a tenth of the memory available, at most
256 MiB, counting POSTING_BYTES and TERM_BYTES each): when full, they are sorted by term and
written to a run file in a temporary folder; at the end the runs are merged (heapq.merge, term by
term; runs are in book order, so a term's pieces concatenate), so the memory of the build does
not grow with the number of books.
"""

from __future__ import annotations

import heapq
import re
import shutil
import tempfile
import unicodedata
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..escape import script_json
from ..memory import budget_bytes
from ..store import list_items

ALPHABET = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", np.uint8)
DIGIT = {c: i for i, c in enumerate(ALPHABET.tobytes().decode())}
SHARD_CHARS = 64 << 10
OWN_FILE_CHARS = 16 << 10
# Held while building: a posting costs about 40 bytes (an int in a list), a term about 200 more
# (its str, its list, its dict entry): an index of ids is mostly terms.
POSTING_BYTES, TERM_BYTES = 40, 200
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """The words of a text as the index and the search box cut them (module docstring)."""
    text = text.lower()
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.category(c).startswith("M"))
    return _WORD.findall(text)


def value_words(value) -> list[str]:
    """The words of one metadata value: a JSON list's items (as ingest stores a list), a text, an
    integer (a float with no fraction counts as one; others and booleans have none)."""
    if isinstance(value, (bool, np.bool_)):
        return []
    if isinstance(value, (int, np.integer)):
        return [str(int(value))]
    if isinstance(value, (float, np.floating)):
        return [str(int(value))] if np.isfinite(value) and float(value).is_integer() else []
    text = str(value)
    items = list_items(text)
    if items is None:
        return words(text)
    return [w for item in items for w in value_words(item)]


def encode(keys: np.ndarray, previous: int = 0) -> str:
    """Ascending keys as varint differences (the first from `previous`), ALPHABET characters."""
    deltas = np.diff(np.asarray(keys, np.int64), prepend=previous).astype(np.uint64)
    groups = np.ones(len(deltas), np.int64)
    rest = deltas >> np.uint64(5)
    while rest.any():
        groups += rest > 0
        rest >>= np.uint64(5)
    out = np.empty(int(groups.sum()), np.uint8)
    starts = np.cumsum(groups) - groups
    for g in range(int(groups.max(initial=0))):
        sel = groups > g
        digit = (deltas[sel] >> np.uint64(5 * g)) & np.uint64(31)
        out[starts[sel] + g] = ALPHABET[(digit | np.where(groups[sel] > g + 1, 32, 0).astype(np.uint64)).astype(
            np.int64)]
    return out.tobytes().decode("ascii")


def decode(text: str) -> list[int]:
    """The keys of encode(keys) (the slow obvious reading, for tests and the merge's first key)."""
    keys, value, shift, total = [], 0, 0, 0
    for c in text:
        digit = DIGIT[c]
        value |= (digit & 31) << shift
        shift += 5
        if digit < 32:
            total += value
            keys.append(total)
            value, shift = 0, 0
    return keys


def _first_key_length(text: str) -> int:
    """Characters of the first varint of an encoded list."""
    n = 0
    while DIGIT[text[n]] >= 32:
        n += 1
    return n + 1


def js_order(term: str) -> bytes:
    """A sort key that orders terms as JavaScript compares strings (by UTF-16 code units)."""
    return term.encode("utf-16-be")


def _js(name: str, value) -> bytes:
    return f"BT.put({script_json(name)},{script_json(value, separators=(',', ':'))});\n".encode()


class SearchIndexWriter:
    """Collects (book, words) and writes data/search.js, data/search/ and data/terms/ (module
    docstring). Books must come in ascending order."""

    def __init__(self, data: Path, spill_bytes: int | None = None):
        self.data = data
        self.spill_bytes = spill_bytes or budget_bytes(0.1, floor=32 << 20, ceiling=256 << 20)
        self.spill_dir = Path(tempfile.mkdtemp(prefix=".search-runs-", dir=data))
        self.postings: dict[str, list[int]] = defaultdict(list)
        self.held = 0
        self.runs: list[Path] = []

    def add(self, book: int, title_words, other_words) -> None:
        title, terms = set(title_words), len(self.postings)
        other = set(other_words) - title
        for word in title:
            self.postings[word].append(2 * book + 1)
        for word in other:
            self.postings[word].append(2 * book)
        self.held += (len(title) + len(other)) * POSTING_BYTES + (len(self.postings) - terms) * TERM_BYTES
        if self.held >= self.spill_bytes:
            self._spill()

    def _spill(self) -> None:
        """The postings held, sorted by term, as a run file of lines "term TAB books TAB last key TAB
        encoded keys"."""
        path = self.spill_dir / f"{len(self.runs)}.run"
        with open(path, "w", encoding="utf-8") as out:
            for term in sorted(self.postings, key=js_order):
                keys = self.postings[term]
                out.write(f"{term}\t{len(keys)}\t{keys[-1]}\t{encode(np.array(keys))}\n")
        self.runs.append(path)
        self.postings, self.held = defaultdict(list), 0

    def finish(self) -> dict:
        """Merge the runs into the shards; returns counts (terms, shards, own files) for site.js."""
        try:
            if self.postings or not self.runs:
                self._spill()
            shards = _ShardWriter(self.data)
            handles = [open(p, encoding="utf-8") for p in self.runs]  # noqa: SIM115 (closed below)
            try:
                lines = heapq.merge(*handles, key=lambda line: js_order(line[:line.index("\t")]))
                term, books, last, pieces = None, 0, 0, []
                for line in lines:
                    t, n, k, encoded = line.rstrip("\n").split("\t")
                    if t != term:
                        if term is not None:
                            shards.add(term, books, "".join(pieces))
                        term, books, last, pieces = t, 0, 0, []
                    if pieces:  # rebase the piece's first key (a difference from 0) on the previous piece's last
                        head = _first_key_length(encoded)
                        encoded = encode(np.array([decode(encoded[:head])[0]]), last) + encoded[head:]
                    pieces.append(encoded)
                    books += int(n)
                    last = int(k)
                if term is not None:
                    shards.add(term, books, "".join(pieces))
            finally:
                for h in handles:
                    h.close()
            return shards.finish()
        finally:
            shutil.rmtree(self.spill_dir, ignore_errors=True)

    def abandon(self) -> None:
        shutil.rmtree(self.spill_dir, ignore_errors=True)


class _ShardWriter:
    """Terms in order into data/search/<n>.js shards and data/terms/<m>.js own files."""

    def __init__(self, data: Path):
        self.data = data
        (data / "search").mkdir()
        (data / "terms").mkdir()
        self.entries, self.chars, self.firsts, self.own, self.terms = [], 0, [], 0, 0

    def add(self, term: str, books: int, encoded: str) -> None:
        if not self.entries:
            self.firsts.append(term)
        if len(encoded) > OWN_FILE_CHARS:
            (self.data / "terms" / f"{self.own}.js").write_bytes(_js(f"terms/{self.own}", encoded))
            self.entries.append([term, books, self.own, len(encoded)])
            self.own += 1
            self.chars += len(term) + 24
        else:
            self.entries.append([term, books, encoded])
            self.chars += len(term) + len(encoded) + 12
        self.terms += 1
        if self.chars >= SHARD_CHARS:
            self._flush()

    def _flush(self) -> None:
        if self.entries:
            n = len(self.firsts) - 1
            (self.data / "search" / f"{n}.js").write_bytes(_js(f"search/{n}", self.entries))
            self.entries, self.chars = [], 0

    def finish(self) -> dict:
        self._flush()
        return {"shards": self.firsts, "n_terms": self.terms, "n_own_files": self.own}
