"""bow-jsonl: one JSON object a line with a pre-counted {word: count} field; the other fields are
the document's metadata."""

from __future__ import annotations

from .base import FormatOptions, InputError, Record
from .json_objects import metadata, parse_object

MAX_COUNT = 1 << 32  # a document's counts, summed, must fit the uint32 counts of a row


def parse_line(line: str | bytes, where: str, options: FormatOptions) -> Record | None:
    parsed = parse_object(line, where, options)
    if parsed is None:
        return None
    doc_id, obj = parsed
    counts = obj.pop(options.bow_field, None)
    if not isinstance(counts, dict) or not all(type(c) is int and c >= 0 for c in counts.values()):
        raise InputError(f"field {options.bow_field!r} must map words to counts (non-negative integers); "
                         "set --bow-field")
    if sum(counts.values()) >= MAX_COUNT:
        raise InputError(f"the counts of field {options.bow_field!r} add up to 2^32 or more, more than a document "
                         "can hold")
    if any(not word.strip() for word in counts):
        raise InputError(f"field {options.bow_field!r} has an empty word")
    return Record(doc_id, counts=counts, meta=metadata(obj))
