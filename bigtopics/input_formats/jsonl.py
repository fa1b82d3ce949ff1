"""jsonl: one JSON object a line; the text and id fields are options, the other fields the
document's metadata."""

from __future__ import annotations

from .base import FormatOptions, InputError, Record
from .json_objects import metadata, parse_object


def parse_line(line: str | bytes, where: str, options: FormatOptions) -> Record | None:
    parsed = parse_object(line, where, options)
    if parsed is None:
        return None
    doc_id, obj = parsed
    text = obj.pop(options.text_field, None)
    if not isinstance(text, str):
        raise InputError(f"no text field {options.text_field!r} (a string); set --text-field")
    return Record(doc_id, text=text, meta=metadata(obj))
