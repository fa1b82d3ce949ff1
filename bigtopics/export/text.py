r"""Fields of the text files (vocab.txt, topic_keys.tsv, word_topic_counts.txt, doc_topics.txt,
topic_word_weights.txt, state.gz), escaped so that a field never holds what separates fields.

These files are split on lines, tabs and, for words, spaces, as MALLET writes them and its readers
(little_mallet_wrapper: `line.split("\t")`, then `.split()` for a topic's words) take them apart
(docs/formats.md, "Text files"): a backslash is written `\\`, a tab `\t`, a line feed `\n`, a
carriage return `\r`, and any other character that ends a line (for Python's str.splitlines: \v
\f \x1c-\x1e \x85 \u2028 \u2029) as `\xHH` or `\uHHHH`; in a word (escape_word) every whitespace
character is escaped too, a space as `\x20`. A document id keeps its spaces (escape_id): it is a
field of its own between tabs. `unescape` reverses both.
"""

from __future__ import annotations

import re

import numpy as np

# What a field may not hold as it is: in an id, the backslash, the tab and what ends a line; in a
# word, the backslash and all whitespace.
_ID_ESCAPES = re.compile("[\\\\\t\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
_WORD_ESCAPES = re.compile(r"[\\\s]")
_NAMED_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.DOTALL)
_UNNAMED = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}


def _escape_match(match: re.Match) -> str:
    c = match.group()
    if c in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[c]
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_id(text) -> str:
    """A document id as a field of a tab- and line-separated text file."""
    text = str(text)
    return _ID_ESCAPES.sub(_escape_match, text) if _ID_ESCAPES.search(text) else text


def escape_word(text) -> str:
    """A word as an item of a space-separated list in a text file."""
    text = str(text)
    return _WORD_ESCAPES.sub(_escape_match, text) if _WORD_ESCAPES.search(text) else text


def unescape(text: str) -> str:
    """The id or word a field of the text files was written from (escape_id, escape_word)."""
    def one(match: re.Match) -> str:
        code = match.group(1)
        if code[0] in "xuU" and len(code) > 1:
            return chr(int(code[1:], 16))
        return _UNNAMED.get(code, code)

    return _UNESCAPE.sub(one, text)


def text_ids(ids) -> list[str]:
    """escape_id of each id, checking the whole block at once first (few ids need escaping)."""
    ids = [str(i) for i in ids]
    return [escape_id(i) for i in ids] if _ID_ESCAPES.search("".join(ids)) else ids


def text_vocab(vocab: np.ndarray) -> np.ndarray:
    """A vocabulary as written in the text files (escape_word of each word)."""
    if not _WORD_ESCAPES.search("".join(str(w) for w in vocab)):
        return vocab
    return np.array([escape_word(w) for w in vocab], dtype=object)
