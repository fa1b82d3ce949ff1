"""Text -> word ids: the tokenizer and the growing vocabulary it interns words into.

Default tokens are runs of Unicode letters and combining marks (categories L* and M*, so that
accents in decomposed text and the vowel signs of Indic scripts stay inside their word),
lowercased, NFC-normalized, at least `min_length` characters long. `token_pattern` replaces the
letter runs by a regular expression (slower: it goes through Python's `re`).

Running text is scanned and interned by numba kernels (bigtopics/kernels/tokens.py) without a
Python string per token; only new words become Python strings, when the vocabulary is read out.
Stop words are interned first, so they are exactly the ids below `n_stop`.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from .kernels.tokens import build_slots, intern_letter_runs, intern_spans

N_CODE_POINTS = 0x110000


@dataclass(frozen=True)
class TokenizerSettings:
    min_length: int = 3
    token_pattern: str | None = None
    stoplist: str = "en"  # "en", "none", or a file with one word per line
    keep_case: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_record(cls, record) -> "TokenizerSettings":
        """The settings `to_dict` recorded (in a store's settings), each checked for its type:
        ValueError saying what is wrong with a damaged or crafted record."""
        kinds = {"min_length": int, "token_pattern": (str, type(None)), "stoplist": str, "keep_case": bool}
        if not isinstance(record, dict):
            raise ValueError(f"are a JSON {type(record).__name__}, not an object")
        for name, value in record.items():
            if name not in kinds:
                raise ValueError(f"hold {str(name)[:40]!r}, which is not a tokenizer setting")
            if not isinstance(value, kinds[name]) or (name == "min_length" and isinstance(value, bool)):
                raise ValueError(f"hold {name} = {str(value)[:40]!r}, of the wrong type")
        try:
            re.compile(record.get("token_pattern") or "")
        except re.error as e:
            raise ValueError(f"hold a token_pattern that is not a regular expression ({e})") from None
        return cls(**record)


# Planes 0-3 and the special-purpose plane 14 are the only ones with letters or marks
# (4-13 are unassigned, 15-16 private use); skipping the rest makes the table quick to build.
ASSIGNED_RANGES = ((0, 0x40000), (0xE0000, 0xE1000))


@functools.lru_cache(maxsize=1)
def word_char_table() -> np.ndarray:
    """is_word_char[c] for every code point c: Unicode category L* (letters) or M* (marks)."""
    category = unicodedata.category
    table = np.zeros(N_CODE_POINTS, bool)
    for lo, hi in ASSIGNED_RANGES:
        table[lo:hi] = np.fromiter((category(chr(c))[0] in "LM" for c in range(lo, hi)), bool, count=hi - lo)
    return table


def load_stoplist(spec: str) -> list[str]:
    """The stop words named by `spec`: "en" (built in), "none", or a path to a word-per-line file."""
    if spec == "none":
        return []
    if spec == "en":
        text = resources.files("bigtopics").joinpath("data/stoplist_en.txt").read_text(encoding="utf-8")
    else:
        path = Path(spec)
        if not path.is_file():
            raise FileNotFoundError(f"stop list {spec!r} is neither 'en', 'none' nor a file")
        text = path.read_text(encoding="utf-8", errors="replace")
    return [w for line in text.splitlines() if (w := line.strip()) and not w.startswith("#")]


def code_points(text: str | bytes) -> np.ndarray:
    """The code points of text: a uint8 view of ASCII bytes, else uint32."""
    if isinstance(text, bytes):
        return np.frombuffer(text, np.uint8)
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), np.uint8)
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)


class Tokenizer:
    """Turns texts into arrays of word ids, growing one vocabulary across calls.

    Ids are assigned in order of first appearance; ids < n_stop are stop words. Text passed as
    bytes must be ASCII (the caller's fast path for undecoded ASCII input).
    """

    def __init__(self, settings: TokenizerSettings):
        self.settings = settings
        self.pattern = re.compile(settings.token_pattern) if settings.token_pattern else None
        self.is_word_char = word_char_table()
        self.slots = np.full(1 << 12, -1, np.int32)
        self.word_hash = np.zeros(1 << 10, np.uint64)
        self.pool = np.zeros(1 << 13, np.uint32)
        self.pool_offsets = np.zeros(len(self.word_hash) + 1, np.int64)
        self.n_words = 0
        stop = load_stoplist(settings.stoplist)
        if settings.keep_case:  # a stop word still matches at the start of a sentence or in capitals
            stop = [v for w in stop for v in (w, w.capitalize(), w.upper())]
        stop = [self.normalize(w) for w in stop]
        self._intern_words(list(dict.fromkeys(stop)))
        self.n_stop = self.n_words

    # -- text ---------------------------------------------------------------------------
    def normalize(self, text: str | bytes) -> str | bytes:
        if isinstance(text, str) and not text.isascii() and not unicodedata.is_normalized("NFC", text):
            text = unicodedata.normalize("NFC", text)
        return text if self.settings.keep_case else text.lower()

    def token_ids(self, text: str | bytes) -> np.ndarray:
        """The word id of every token of text, in order (stop words included)."""
        text = self.normalize(text)
        if self.pattern is not None:
            if isinstance(text, bytes):
                text = text.decode("ascii")
            spans = [m.span() for m in self.pattern.finditer(text) if m.end() - m.start() >= self.settings.min_length]
            starts = np.fromiter((s for s, _ in spans), np.int64, count=len(spans))
            stops = np.fromiter((e for _, e in spans), np.int64, count=len(spans))
            return self._intern_spans(code_points(text), starts, stops)
        chars = code_points(text)
        out = np.empty(max(16, len(chars) // (self.settings.min_length + 1) + 1), np.int32)
        pos = n_out = 0
        while True:
            pos, n_out, self.n_words = intern_letter_runs(
                chars, pos, self.is_word_char, self.settings.min_length, self.slots, self.word_hash, self.pool,
                self.pool_offsets, self.n_words, out, n_out,
            )
            if pos >= len(chars):
                return out[:n_out]
            if n_out == len(out):
                out = np.concatenate([out, np.empty_like(out)])
            else:
                self._grow()

    def word_ids(self, words: list[str]) -> np.ndarray:
        """The ids of pre-counted words (bow-jsonl), kept as given: normalized like any token (NFC,
        lowercased unless keep_case), so that spellings that differ only so share an id, but
        neither split nor dropped by min_length or token_pattern (someone else tokenized them:
        "c++", "x11" and two-letter words stay)."""
        return self._intern_words([self.normalize(w) for w in words])

    # -- vocabulary ---------------------------------------------------------------------
    def words(self, start: int = 0) -> list[str]:
        """Words start..n_words-1, in id order."""
        offsets = self.pool_offsets[start : self.n_words + 1]
        if len(offsets) < 2:
            return []
        text = self.pool[offsets[0] : offsets[-1]].tobytes().decode("utf-32-le", "surrogatepass")
        rel = offsets - offsets[0]
        return [text[a:b] for a, b in zip(rel[:-1].tolist(), rel[1:].tolist())]

    def _intern_words(self, words: list[str]) -> np.ndarray:
        lengths = np.fromiter(map(len, words), np.int64, count=len(words))
        starts = np.cumsum(lengths + 1) - lengths - 1
        return self._intern_spans(code_points("\0".join(words)), starts, starts + lengths)

    def _intern_spans(self, chars: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        out = np.empty(len(starts), np.int32)
        k = 0
        while True:
            k, self.n_words = intern_spans(
                chars, starts, stops, k, self.slots, self.word_hash, self.pool, self.pool_offsets, self.n_words, out
            )
            if k >= len(starts):
                return out
            self._grow()

    def _grow(self) -> None:
        """Double whichever table is full (the pool last: the token that did not fit may be long,
        and doubling until it fits is still geometric)."""
        if 2 * (self.n_words + 1) > len(self.slots):
            self.slots = build_slots(self.word_hash, self.n_words, 2 * len(self.slots))
        elif self.n_words + 1 >= len(self.word_hash):
            self.word_hash = np.concatenate([self.word_hash, np.zeros_like(self.word_hash)])
            self.pool_offsets = np.concatenate([self.pool_offsets,
                                                np.zeros(len(self.word_hash) + 1 - len(self.pool_offsets), np.int64)])
        else:
            self.pool = np.concatenate([self.pool, np.zeros_like(self.pool)])
