"""One JSON object a line, as jsonl and bow-jsonl read it: the object, its id, and the fields left
over as the document's metadata (scalars as they are; lists and objects as JSON text)."""

from __future__ import annotations

import json
import math

from .base import FormatOptions, InputError

METADATA_INT_RANGE = (-(1 << 63), 1 << 63)  # what an int64 column holds


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: Python reads it as inf, which JSON cannot write back
        raise InputError(f"the number {text[:30]} is beyond a 64-bit float; write it as a string")
    return value


def _no_constant(name: str):
    raise InputError(f"{name} is not a JSON number; write it as a string or leave the field out")


def parse_object(line: str | bytes, where: str, options: FormatOptions) -> tuple[str, dict] | None:
    """(the document's id, the object without it), or None for a blank line. Numbers are finite:
    NaN, Infinity and 1e400 (which Python would read as inf) are refused, since every page and file
    we write them to reads JSON, which has no such values."""
    if not line.strip():
        return None
    try:
        obj = json.loads(line, parse_float=_finite_float, parse_constant=_no_constant)
    except InputError:
        raise
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON: {e.msg} at column {e.colno}") from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read") from None
    except ValueError as e:  # a number of more than 4,300 digits, say
        raise InputError(f"malformed JSON: {e}") from None
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, found {type(obj).__name__}")
    doc_id = obj.pop(options.id_field, None)
    return (where if doc_id is None else str(doc_id)), obj


def metadata(obj: dict) -> dict:
    """Scalars as they are; lists and objects as JSON text."""
    low, high = METADATA_INT_RANGE
    for name, value in obj.items():
        if type(value) is int and not low <= value < high:
            raise InputError(f"metadata field {name!r} holds an integer beyond 64 bits ({str(value)[:30]}); "
                             "write it as a string")
    try:
        return {
            k: json.dumps(v, ensure_ascii=False, sort_keys=True) if isinstance(v, (list, dict)) else v
            for k, v in obj.items()
        }
    except RecursionError:  # (nested just short of what json.loads refuses)
        raise InputError("JSON nested too deeply to read") from None
