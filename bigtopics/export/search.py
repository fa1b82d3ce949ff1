"""Bulk files for Elasticsearch/OpenSearch and Solr (docs/search.md).

  search.jsonl       Elasticsearch/OpenSearch bulk: action line, then the document with `topics`
                     as a rank_features object {"topic_17": 0.42, ...}
  search_solr.jsonl  one Solr document per line, `topics` a delimited-payload string
                     "topic_17|0.42 topic_3|0.11"

A search document holds id, doc_number, length, topics and the store's metadata: a missing number
(NaN in the store) is left out of the document, a number field whose values are all whole is
written as integers, a field whose values were lists in the input (ingest keeps them as JSON text)
is written as a JSON array, so that both engines facet and filter on its items, and a metadata
field named like one of export's own fields (RESERVED) is written as meta_<name>. Every line is
strict JSON (no NaN or Infinity).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..store import Store
from .base import ExportContext, Writer, doc_rows, json_line

# the fields export writes into every search document; metadata of these names, and of any name
# starting with "_" (Elasticsearch's and Solr's own fields), gets META_PREFIX
RESERVED = ("id", "doc_number", "length", "topics")
META_PREFIX = "meta_"


def search_names(fields) -> dict[str, str]:
    """Metadata field -> its name in the search documents. A field named like one export writes
    itself or a search engine keeps (RESERVED, and every name starting with "_") would overwrite it,
    be overwritten or be refused: it gets META_PREFIX, repeated until no other field has the name."""
    taken = set(RESERVED) | set(fields)
    names = {}
    for f in fields:
        name = f
        if f in RESERVED or f.startswith("_"):
            while name in taken:
                name = META_PREFIX + name
            taken.add(name)
        names[f] = name
    return names


def _field_blocks(store: Store, name: str):
    return (store.metadata(name, lo, lo + store.docs_per_block) for lo in store.block_starts())


def whole_number_fields(store: Store) -> set[str]:
    """Float metadata fields whose finite values are all whole numbers (within +-2^53, where
    float64 holds integers exactly). Ingest stores an integer field with missing values as
    float64 (NaN where missing): these are written back as integers, decided per field rather
    than per value so that a search engine sees one type per field."""
    whole = set()
    for f in store.metadata_fields:
        if store.metadata(f, 0, 0).dtype.kind != "f":
            continue
        if all(_is_whole(v[np.isfinite(v)]).all() for v in _field_blocks(store, f)):
            whole.add(f)
    return whole


def _is_whole(values: np.ndarray) -> np.ndarray:
    return (values == np.round(values)) & (np.abs(values) <= 2.0 ** 53)


def _is_json_list(text: str) -> bool:
    if not (text.startswith("[") and text.endswith("]")):
        return False
    try:
        return isinstance(json.loads(text), list)
    except ValueError:
        return False


def list_fields(store: Store) -> set[str]:
    """Text metadata fields whose every non-empty value is a JSON array: ingest writes a list
    value (Reuters' `places`, books' `subjects`) as its JSON text, and a field is a list field
    only if every value was (decided per field, streaming one block at a time)."""
    found = set()
    for f in store.metadata_fields:
        if store.metadata(f, 0, 0).dtype.kind not in "UOT":
            continue
        seen = False
        for values in _field_blocks(store, f):
            filled = [v for v in values.tolist() if v]
            if not all(_is_json_list(v) for v in filled):
                break
            seen = seen or bool(filled)
        else:
            if seen:
                found.add(f)
    return found


def _json_column(values: np.ndarray, whole: bool, is_list: bool) -> list:
    """A block of metadata as JSON values; None (left out of the document) for a missing value."""
    if is_list:
        return [json.loads(v) if v else None for v in values.tolist()]
    if values.dtype.kind != "f":
        return values.tolist()
    return [(int(v) if whole else v) if np.isfinite(v) else None for v in values.tolist()]


def write_search(ctx: ExportContext, out: Path) -> None:
    store, index = ctx.store, ctx.options.index
    es_path, solr_path = out / "search.jsonl", out / "search_solr.jsonl"
    names, whole, lists = search_names(store.metadata_fields), whole_number_fields(store), list_fields(store)
    renamed = [f"{f} -> {name}" for f, name in names.items() if name != f]
    if renamed:
        ctx.log(f"export: metadata fields named like export's own are renamed in {es_path.name} and "
                f"{solr_path.name}: {', '.join(renamed)}")
    with open(es_path, "w", encoding="utf-8") as es, open(solr_path, "w", encoding="utf-8") as solr:
        for first, indptr, topics, weights, lengths, ids, meta in doc_rows(ctx.dt, store, names):
            columns = {names[f]: _json_column(v, f in whole, f in lists) for f, v in meta.items()}
            es_lines, solr_lines = [], []
            for d in range(len(indptr) - 1):
                row = slice(indptr[d], indptr[d + 1])
                doc = {"id": str(ids[d]), "doc_number": first + d, "length": int(lengths[d]),
                       **{name: v[d] for name, v in columns.items() if v[d] is not None}}
                pairs = list(zip(topics[row].tolist(), weights[row].tolist()))
                es_lines.append(json_line({"index": {"_index": index, "_id": str(ids[d])}}))
                es_lines.append(json_line({**doc, "topics": {f"topic_{t}": float(f"{w:.6g}") for t, w in pairs}}))
                solr_lines.append(json_line({**doc, "topics": " ".join(f"topic_{t}|{w:.6g}" for t, w in pairs)}))
            es.write("".join(es_lines))
            solr.write("".join(solr_lines))


WRITERS = (Writer(("search.jsonl", "search_solr.jsonl"), write_search, needs="doc_topics"),)
