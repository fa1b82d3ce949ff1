"""What every input format shares: the record a source document becomes, the options of the
formats, and the error of a line that cannot be read as asked."""

from __future__ import annotations

from dataclasses import dataclass, field


class InputError(ValueError):
    """Input that cannot be read as asked: names the file (and line)."""


@dataclass
class FormatOptions:
    format: str | None = None  # None: by extension
    text_field: str = "text"
    id_field: str = "id"
    bow_field: str = "counts"
    skip_bad: bool = False

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Record:
    doc_id: str
    text: str | bytes | None = None  # bytes only if ASCII
    counts: dict | None = None  # bow-jsonl
    meta: dict = field(default_factory=dict)
