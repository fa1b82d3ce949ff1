"""tsv: MALLET's id<TAB>label<TAB>text, one document a line; the label is kept as metadata `label`."""

from __future__ import annotations

from .base import FormatOptions, InputError, Record


def parse_line(line: str | bytes, where: str, options: FormatOptions) -> Record | None:
    text = line.decode("ascii") if isinstance(line, bytes) else line
    parts = text.split("\t", 2)
    if len(parts) < 3:
        if not text.strip():
            return None
        raise InputError(f"expected id<TAB>label<TAB>text, found {len(parts)} field(s)")
    return Record(parts[0], text=parts[2], meta={"label": parts[1]})
