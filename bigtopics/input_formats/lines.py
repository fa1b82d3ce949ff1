"""lines: one document a line; its id is file:line."""

from __future__ import annotations

from .base import FormatOptions, Record


def parse_line(line: str | bytes, where: str, options: FormatOptions) -> Record | None:
    return Record(where, text=line)
