"""The input formats of ingest, by name: a new format of one document a line is a module with a
`parse_line(line, where, options) -> Record | None` (None: a line that holds no document) and a
line here. `txt`, one document a file, is read whole by ingest/inputs.py."""

from . import bow_jsonl, jsonl, lines, tsv
from .base import FormatOptions, InputError, Record

LINE_FORMATS = {"lines": lines.parse_line, "jsonl": jsonl.parse_line, "tsv": tsv.parse_line,
                "bow-jsonl": bow_jsonl.parse_line}
FORMATS = ("txt", *LINE_FORMATS)

__all__ = ["FORMATS", "LINE_FORMATS", "FormatOptions", "InputError", "Record"]
