r"""Export a model (and inferred document topics) in the formats other tools read.

Model files (always):
  topic_word.zarr        K x V p(w | k) over the stored entries, anndata csr_matrix encoding
                         (indptr int64, indices uint32, data float32), plus `smoothing` (K): the
                         probability of every word a topic does not store, eta / (V eta + N[k])
  vocab.txt              one word per line, in column order
  topic_keys.tsv         MALLET --output-topic-keys: topic <TAB> alpha <TAB> top words
  word_topic_counts.txt  MALLET --word-topic-counts-file: "type word topic:count ..." with
                         counts N[k, w] rounded, largest first, zeros left out
  topics.jsonl           per topic: id, label, top words and probabilities, diagnostics
  pyldavis.json          pyLDAvis.prepare(**json.load(f)) arguments over a trimmed vocabulary
  tw.json                dfr-browser's topic words
With --doc-topics (output of `bigtopics infer`) and the store it was inferred from:
  doc_topics.txt         MALLET --output-doc-topics, sparse: "#doc name topic proportion ..."
                         then "doc <TAB> name <TAB> topic <TAB> proportion ..." by decreasing weight
  search.jsonl           Elasticsearch/OpenSearch bulk: action line, then the document with
                         `topics` as a rank_features object {"topic_17": 0.42, ...}
  search_solr.jsonl      one Solr document per line, `topics` a delimited-payload string
                         "topic_17|0.42 topic_3|0.11"
  A search document holds id, doc_number, length, topics and the store's metadata: a missing
  number (NaN in the store) is left out of the document, a number field whose values are all
  whole is written as integers, and a metadata field named like one of export's own fields
  (RESERVED) is written as meta_<name>. Every line is strict JSON (no NaN or Infinity).
  dt.json.zip            dfr-browser's sparse document-topic counts (compressed columns)
Everything is written by streaming topics, words or document blocks; the largest thing held is
one block of documents, or for dt.json.zip the entries of a group of topics (bounded).

The text files (vocab.txt, topic_keys.tsv, word_topic_counts.txt, doc_topics.txt) are split on
lines, tabs and, for words, spaces, as MALLET writes them and its readers (little_mallet_wrapper:
`line.split("\t")`, then `.split()` for a topic's words) take them apart. So a field never holds
what separates fields (docs/formats.md, "Text files"): a backslash is written `\\`, a tab `\t`, a
line feed `\n`, a carriage return `\r`, and any other character that ends a line (for Python's
str.splitlines: \v \f \x1c-\x1e \x85 \u2028 \u2029) as `\xHH` or `\uHHHH`; in a word (escape_word)
every whitespace character is escaped too, a space as `\x20`. A document id keeps its spaces
(escape_id): it is a field of its own between tabs. `unescape` reverses both.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np
import zarr

from .atomic import publish_dir, temporary_sibling
from .diagnostics import top_word_ids
from .evaluate import current_evaluation
from .infer import DocTopics
from .model import Model, load_model
from .outputs import check_output, is_url
from .store import CSR_ENCODING, Store, StoreError, default_compressors, open_store

TOP_WORDS = 20
LABEL_WORDS = 3
PYLDAVIS_TERMS = 30
WORDS_PER_WRITE = 1 << 14
DT_ENTRIES_PER_PASS = 1 << 25
# the fields export writes into every search document; metadata of these names, and of any name
# starting with "_" (Elasticsearch's and Solr's own fields), gets META_PREFIX
RESERVED = ("id", "doc_number", "length", "topics")
META_PREFIX = "meta_"
MAX_TOP_WORDS = 100_000
# What a field of the text files may not hold as it is (see the module's docstring): in an id,
# the backslash, the tab and what ends a line; in a word, the backslash and all whitespace.
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
    """A document id as a field of a tab- and line-separated text file (module docstring)."""
    text = str(text)
    return _ID_ESCAPES.sub(_escape_match, text) if _ID_ESCAPES.search(text) else text


def escape_word(text) -> str:
    """A word as an item of a space-separated list in a text file (module docstring)."""
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


def text_vocab(model: Model) -> np.ndarray:
    """The model's vocabulary as written in the text files (escape_word of each word)."""
    vocab = model.vocab
    if not _WORD_ESCAPES.search("".join(str(w) for w in vocab)):
        return vocab
    return np.array([escape_word(w) for w in vocab], dtype=object)


def export(run, output, *, doc_topics=None, store=None, top_words: int = TOP_WORDS, index: str = "bigtopics",
           overwrite: bool = False, log=None, storage_options: dict | None = None) -> list[str]:
    """Write every export of a run into the directory `output` (published atomically); notices
    (renamed metadata fields, a stale evaluation.json) go to `log` (default: stderr). `doc_topics`
    and `store` may be URLs (`storage_options` for them; bigtopics/outputs.py); `output` is local."""
    from .settings import check_integer

    log = log or (lambda msg: print(msg, file=sys.stderr))
    check_integer(top_words, "--top-words", 1, MAX_TOP_WORDS)
    model = load_model(run)
    output = Path(output)
    check_output(output, overwrite, [p for p in (model.path, doc_topics, store) if p], kind="export")
    dt = DocTopics(doc_topics, storage_options) if doc_topics else None
    if dt is not None:
        store = store or dt.attrs.get("store")
        if store is None or (not is_url(store) and not Path(store).exists()):
            raise FileNotFoundError(f"the store {store} that {doc_topics} was inferred from is gone; give --store")
        store = open_store(store, storage_options)
        if store.n_docs != dt.n_docs or dt.n_topics != model.n_topics:
            raise StoreError(f"{doc_topics} ({dt.n_docs:,} documents, {dt.n_topics} topics) does not match "
                             f"{store.location} ({store.n_docs:,} documents) and the model ({model.n_topics} topics)")
    tmp = temporary_sibling(output)
    tmp.mkdir(parents=True)
    try:
        diagnostics = _diagnostics(run, model, log)
        write_topic_word(model, tmp / "topic_word.zarr")
        (tmp / "vocab.txt").write_text("".join(f"{w}\n" for w in text_vocab(model)), encoding="utf-8")
        top = [top_word_ids(model, k, top_words) for k in range(model.n_topics)]
        write_topic_keys(model, top, tmp / "topic_keys.tsv")
        write_word_topic_counts(model, tmp / "word_topic_counts.txt")
        write_topics_jsonl(model, top, diagnostics, tmp / "topics.jsonl")
        write_pyldavis(model, tmp / "pyldavis.json")
        write_dfr_topic_words(model, top, tmp / "tw.json")
        if dt is not None:
            write_doc_topics_txt(dt, store, tmp / "doc_topics.txt")
            write_search(dt, store, tmp / "search.jsonl", tmp / "search_solr.jsonl", index, log)
            write_dfr_doc_topics(dt, tmp / "dt.json.zip")
        publish_dir(tmp, output, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return sorted(p.name for p in output.iterdir())


def _diagnostics(run, model: Model, log) -> dict[int, dict]:
    """Per-topic diagnostics from <run>/evaluation.json (`bigtopics evaluate`), if it scored this model."""
    evaluation, notice = current_evaluation(run, model)
    if notice:
        log(notice)
    skip = {"topic", "top_words"}
    return {k: {key: v for key, v in r.items() if key not in skip} for k, r in evaluation.items()}


def topic_norms(model: Model) -> np.ndarray:
    return model.n_words * model.eta + model.topic_totals()


def write_topic_word(model: Model, path: Path) -> None:
    norms = topic_norms(model)
    group = zarr.open_group(path, mode="w")
    group.attrs.update({**CSR_ENCODING, "shape": [model.n_topics, model.n_words],
                        "description": "p(w|k) of stored entries; every other word of topic k has smoothing[k]"})
    nnz = model.n_entries

    def create(name, length, dtype, chunk):
        return group.create_array(name, shape=(length,), chunks=(max(1, min(chunk, length)),), dtype=dtype,
                                  compressors=default_compressors(dtype))

    indices, data = create("indices", nnz, np.uint32, 1 << 20), create("data", nnz, np.float32, 1 << 20)
    indptr = np.zeros(model.n_topics + 1, np.int64)
    for k in range(model.n_topics):
        words, values = model.topic_entries(k)
        lo = indptr[k]
        indptr[k + 1] = lo + len(words)
        if len(words):
            indices[lo : lo + len(words)] = words.astype(np.uint32)
            data[lo : lo + len(words)] = ((model.eta + values) / norms[k]).astype(np.float32)
    create("indptr", model.n_topics + 1, np.int64, 1 << 16)[:] = indptr
    create("smoothing", model.n_topics, np.float64, 1 << 16)[:] = model.eta / norms


def write_topic_keys(model: Model, top: list[np.ndarray], path: Path) -> None:
    vocab = text_vocab(model)
    with open(path, "w", encoding="utf-8") as f:
        for k, words in enumerate(top):
            f.write(f"{k}\t{model.alpha:g}\t{' '.join(vocab[words])}\n")


def write_word_topic_counts(model: Model, path: Path) -> None:
    vocab = text_vocab(model)
    with open(path, "w", encoding="utf-8") as f:
        for lo in range(0, model.n_words, WORDS_PER_WRITE):
            words = np.arange(lo, min(lo + WORDS_PER_WRITE, model.n_words))
            indptr, topics, values = model.rows(words)
            counts = np.rint(values).astype(np.int64)
            lines = []
            for i, w in enumerate(words):
                t, c = topics[indptr[i] : indptr[i + 1]], counts[indptr[i] : indptr[i + 1]]
                order = np.lexsort((t, -c))
                pairs = " ".join(f"{t[j]}:{c[j]}" for j in order if c[j] > 0)
                lines.append(f"{w} {vocab[w]}" + (f" {pairs}" if pairs else "") + "\n")
            f.write("".join(lines))


def topic_label(model: Model, words: np.ndarray) -> str:
    return " ".join(model.vocab[words[:LABEL_WORDS]])


def _json_line(record) -> str:
    # allow_nan=False: a bare NaN or Infinity is not JSON, and Elasticsearch and Solr reject the line
    return json.dumps(record, allow_nan=False) + "\n"


def write_topics_jsonl(model: Model, top: list[np.ndarray], diagnostics: dict, path: Path) -> None:
    norms, totals = topic_norms(model), model.topic_totals()
    with open(path, "w", encoding="utf-8") as f:
        for k, words in enumerate(top):
            record = {"topic": k, "label": topic_label(model, words), "top_words": [str(w) for w in model.vocab[words]],
                      "probabilities": [round(float(p), 6) for p in (stored_counts(model, k, words) + model.eta) / norms[k]],
                      "tokens": float(totals[k]), "share": float(totals[k] / max(totals.sum(), 1e-300)),
                      "smoothing": float(model.eta / norms[k]), **diagnostics.get(k, {})}
            f.write(_json_line(record))


def write_pyldavis(model: Model, path: Path, n_terms: int = PYLDAVIS_TERMS) -> None:
    """Arguments of pyLDAvis.prepare without a documents x topics matrix: pyLDAvis only uses
    doc_topic_dists and doc_lengths through the topic token counts sum_d theta_dk N_d, so the
    identity with doc_lengths = N[k] gives exactly the model's topic sizes. The vocabulary is
    trimmed to the union of every topic's top n_terms words; term frequencies are sum_k N[k, w]
    and the rows of topic_term_dists are renormalised over the trimmed vocabulary."""
    terms = np.unique(np.concatenate([top_word_ids(model, k, n_terms) for k in range(model.n_topics)]))
    indptr, topics, values = model.rows(terms)
    term_frequency = np.add.reduceat(values, indptr[:-1]) if len(values) else np.zeros(len(terms))
    term_frequency[np.diff(indptr) == 0] = 0.0
    dists = np.full((model.n_topics, len(terms)), model.eta)
    dists[topics, np.repeat(np.arange(len(terms)), np.diff(indptr))] += values
    dists /= dists.sum(1, keepdims=True)
    totals = model.topic_totals()
    payload = {"topic_term_dists": dists.round(8).tolist(), "doc_topic_dists": np.eye(model.n_topics).tolist(),
               "doc_lengths": totals.round(3).tolist(), "vocab": [str(w) for w in model.vocab[terms]],
               "term_frequency": np.maximum(term_frequency, 1e-3).round(3).tolist()}
    path.write_text(json.dumps(payload), encoding="utf-8")


def stored_counts(model: Model, k: int, words: np.ndarray) -> np.ndarray:
    """N[k, w] for the given word ids (0 where not stored)."""
    stored, values = model.topic_entries(k)
    position = np.minimum(np.searchsorted(stored, words), max(len(stored) - 1, 0))
    hit = (position < len(stored)) & (stored[position] == words) if len(stored) else np.zeros(len(words), bool)
    return np.where(hit, values[position] if len(stored) else 0.0, 0.0)


def write_dfr_topic_words(model: Model, top: list[np.ndarray], path: Path) -> None:
    """dfr-browser's tw.json: {"alpha": [...], "tw": [{"words": [...], "weights": [...]}]},
    weights the (rounded) token counts N[k, w]."""
    tw = [{"words": [str(w) for w in model.vocab[words]],
           "weights": np.rint(stored_counts(model, k, words)).astype(int).tolist()} for k, words in enumerate(top)]
    path.write_text(json.dumps({"alpha": [model.alpha] * model.n_topics, "tw": tw}), encoding="utf-8")


def _doc_rows(dt: DocTopics, store: Store, fields=()):
    """Per block: (first doc, indptr, topics, weights, lengths, ids, {field: values} of `fields`)."""
    for first, indptr, topics, weights, lengths in dt.iter_blocks():
        stop = first + len(indptr) - 1
        meta = {f: store.metadata(f, first, stop) for f in fields}
        yield first, indptr, topics, weights, lengths, store.doc_ids(first, stop), meta


def write_doc_topics_txt(dt: DocTopics, store: Store, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("#doc name topic proportion ...\n")
        for first, indptr, topics, weights, _, ids, _ in _doc_rows(dt, store):
            ids = text_ids(ids)
            lines = []
            for d in range(len(indptr) - 1):
                pairs = "".join(f"\t{t}\t{w:.6g}" for t, w in zip(topics[indptr[d] : indptr[d + 1]],
                                                                   weights[indptr[d] : indptr[d + 1]]))
                lines.append(f"{first + d}\t{ids[d]}{pairs}\n")
            f.write("".join(lines))


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


def whole_number_fields(store: Store) -> set[str]:
    """Float metadata fields whose finite values are all whole numbers (within +-2^53, where
    float64 holds integers exactly). Ingest stores an integer field with missing values as
    float64 (NaN where missing): these are written back as integers, decided per field rather
    than per value so that a search engine sees one type per field."""
    whole = set()
    for f in store.metadata_fields:
        if store.metadata(f, 0, 0).dtype.kind != "f":
            continue
        blocks = (store.metadata(f, lo, lo + store.docs_per_block) for lo in store.block_starts())
        if all(_is_whole(v[np.isfinite(v)]).all() for v in blocks):
            whole.add(f)
    return whole


def _is_whole(values: np.ndarray) -> np.ndarray:
    return (values == np.round(values)) & (np.abs(values) <= 2.0 ** 53)


def _json_column(values: np.ndarray, whole: bool) -> list:
    """A block of metadata as JSON values; None (left out of the document) for a missing number."""
    if values.dtype.kind != "f":
        return values.tolist()
    return [(int(v) if whole else v) if np.isfinite(v) else None for v in values.tolist()]


def write_search(dt: DocTopics, store: Store, es_path: Path, solr_path: Path, index: str, log) -> None:
    names, whole = search_names(store.metadata_fields), whole_number_fields(store)
    renamed = [f"{f} -> {name}" for f, name in names.items() if name != f]
    if renamed:
        log(f"export: metadata fields named like export's own are renamed in {es_path.name} and "
            f"{solr_path.name}: {', '.join(renamed)}")
    with open(es_path, "w", encoding="utf-8") as es, open(solr_path, "w", encoding="utf-8") as solr:
        for first, indptr, topics, weights, lengths, ids, meta in _doc_rows(dt, store, names):
            columns = {names[f]: _json_column(v, f in whole) for f, v in meta.items()}
            es_lines, solr_lines = [], []
            for d in range(len(indptr) - 1):
                row = slice(indptr[d], indptr[d + 1])
                doc = {"id": str(ids[d]), "doc_number": first + d, "length": int(lengths[d]),
                       **{name: v[d] for name, v in columns.items() if v[d] is not None}}
                pairs = list(zip(topics[row].tolist(), weights[row].tolist()))
                es_lines.append(_json_line({"index": {"_index": index, "_id": str(ids[d])}}))
                es_lines.append(_json_line({**doc, "topics": {f"topic_{t}": float(f"{w:.6g}") for t, w in pairs}}))
                solr_lines.append(_json_line({**doc, "topics": " ".join(f"topic_{t}|{w:.6g}" for t, w in pairs)}))
            es.write("".join(es_lines))
            solr.write("".join(solr_lines))


def write_dfr_doc_topics(dt: DocTopics, path: Path, entries_per_pass: int = DT_ENTRIES_PER_PASS) -> None:
    """dfr-browser's dt.json (zipped): the documents x topics token counts round(theta N_d) in
    compressed sparse columns {"i": doc per entry, "p": column pointers (K + 1), "x": counts}.
    Topics are grouped so that one pass over the document topics collects at most
    entries_per_pass entries; each group's columns are written in order."""
    per_topic = np.zeros(dt.n_topics, np.int64)
    for _, indptr, topics, weights, lengths in dt.iter_blocks():
        counts = np.rint(weights * np.repeat(lengths, np.diff(indptr)))
        per_topic += np.bincount(topics[counts > 0], minlength=dt.n_topics)
    p = np.concatenate([[0], np.cumsum(per_topic)])
    groups, lo = [], 0
    while lo < dt.n_topics:
        hi = lo + 1
        while hi < dt.n_topics and p[hi + 1] - p[lo] <= entries_per_pass:
            hi += 1
        groups.append((lo, hi))
        lo = hi
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("dt.json", "w", force_zip64=True) as raw:
        def write(text):
            raw.write(text.encode())

        for name, column in (("i", 0), ("x", 1)):
            write(("{" if name == "i" else ",") + f'"{name}":[')
            first_value = True
            for lo, hi in groups:
                docs, topics, counts = [], [], []
                for first, indptr, t, weights, lengths in dt.iter_blocks():
                    c = np.rint(weights * np.repeat(lengths, np.diff(indptr))).astype(np.int64)
                    keep = (t >= lo) & (t < hi) & (c > 0)
                    docs.append(first + np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))[keep])
                    topics.append(t[keep])
                    counts.append(c[keep])
                docs, topics, counts = np.concatenate(docs), np.concatenate(topics), np.concatenate(counts)
                order = np.lexsort((docs, topics))
                values = (docs if column == 0 else counts)[order]
                if len(values):
                    write(("" if first_value else ",") + ",".join(map(str, values.tolist())))
                    first_value = False
            write("]")
        write(',"p":[' + ",".join(map(str, p.tolist())) + "]}")
