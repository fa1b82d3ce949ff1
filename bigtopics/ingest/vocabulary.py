"""Step 2 of an ingest: the vocabulary of the store (see bigtopics/ingest/__init__.py).

The workers' vocabularies are merged (`merge_vocabularies`), then either pruned and ordered by
frequency (`prune`, with the `Pruning` rules) or mapped onto a fixed vocabulary (`fixed_ids`, with
a `FixedVocabulary` that `read_vocabulary` reads from a store, a run directory or a model.zarr).
Both give new_id[merged id] = the word's id in the store, or -1 for a word left out.
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..model import MODEL_NAME, load_model
from ..outputs import is_url
from ..rundir import SETTINGS_NAME
from ..store import StoreError, open_store
from ..tokenizer import TokenizerSettings


@dataclass(frozen=True)
class Pruning:
    """Vocabulary pruning, applied in this order."""

    min_df: int = 2  # drop words in fewer documents (typos, OCR noise)
    max_df: float = 0.5  # drop words in more than this fraction of documents
    max_vocab: int | None = 1 << 16  # then keep the most frequent (the core paper's 2^16; uint16 ids)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class FixedVocabulary:
    """The vocabulary of an existing store or model (word id = list position) and the tokenizer
    settings it was made with (the defaults if it records none, e.g. a synthetic store)."""

    source: str
    words: list[str]
    tokenizer: TokenizerSettings


def merge_vocabularies(vocab_files: dict[int, Path]):
    """(words, term_counts, doc_freqs, {worker: local id -> merged id}) over all workers.

    Merged ids follow first appearance over workers in id order, so only the final frequency
    order (computed later) matters for the store."""
    index: dict[str, int] = {}
    term_counts = np.zeros(0, np.int64)
    doc_freqs = np.zeros(0, np.int64)
    local_to_merged = {}
    for worker in sorted(vocab_files):
        vocab = pickle.loads(Path(vocab_files[worker]).read_bytes())
        merged = np.fromiter((index.setdefault(w, len(index)) for w in vocab["words"]), np.int64,
                             count=len(vocab["words"]))
        term_counts = np.concatenate([term_counts, np.zeros(len(index) - len(term_counts), np.int64)])
        doc_freqs = np.concatenate([doc_freqs, np.zeros(len(index) - len(doc_freqs), np.int64)])
        np.add.at(term_counts, merged, vocab["term_counts"])
        np.add.at(doc_freqs, merged, vocab["doc_freqs"])
        local_to_merged[worker] = merged
    return list(index), term_counts, doc_freqs, local_to_merged


def prune(words: list[str], term_counts: np.ndarray, doc_freqs: np.ndarray, n_docs: int, pruning: Pruning):
    """(new_id, pruned): new_id[w] is the store id of word w or -1; ids follow decreasing term
    count, ties by the word. pruned maps each rule to (words, tokens) it removed."""
    alive = term_counts > 0  # stop words and words seen only in skipped rows
    pruned = {}

    def drop(rule: str, mask: np.ndarray) -> None:
        nonlocal alive
        hit = alive & mask
        pruned[rule] = (int(hit.sum()), int(term_counts[hit].sum()))
        alive &= ~mask

    drop("zero", term_counts == 0)
    drop("min_df", doc_freqs < pruning.min_df)
    drop("max_df", doc_freqs > pruning.max_df * n_docs)
    survivors = sorted(np.flatnonzero(alive).tolist(), key=lambda w: (-term_counts[w], words[w]))
    limit = len(survivors) if pruning.max_vocab is None else pruning.max_vocab
    beyond = np.zeros(len(words), bool)
    beyond[survivors[limit:]] = True
    drop("max_vocab", beyond)
    new_id = np.full(len(words), -1, np.int64)
    new_id[survivors[:limit]] = np.arange(min(limit, len(survivors)))
    return new_id, pruned


def fixed_ids(words: list[str], term_counts: np.ndarray, vocabulary: list[str]):
    """(new_id, pruned): new_id[w] is word w's id in the fixed `vocabulary` or -1; pruned maps
    "out_of_vocabulary" to the (words, tokens) outside it."""
    index = {word: i for i, word in enumerate(vocabulary)}
    new_id = np.fromiter((index.get(word, -1) for word in words), np.int64, count=len(words))
    outside = (new_id < 0) & (term_counts > 0)  # stop words have no tokens left to drop
    return new_id, {"out_of_vocabulary": (int(outside.sum()), int(term_counts[outside].sum()))}


def read_vocabulary(source: str | os.PathLike, storage_options: dict | None = None) -> FixedVocabulary:
    """The vocabulary and tokenizer settings of a store (a path or a URL), a run directory or a
    model.zarr.

    A run is read through the store its settings.json names (that store records the tokenizer;
    a model records only the training settings and its store's fingerprint), or through its
    model if that store is gone."""
    if is_url(source) and not str(source).startswith("file://"):
        store = open_store(source, storage_options)
        return _fixed(store.location, store.vocab, store.settings)
    path = Path(str(source).removeprefix("file://"))
    if (path / SETTINGS_NAME).is_file():
        recorded_store = json.loads((path / SETTINGS_NAME).read_text())["store"]
        store_path = Path(recorded_store)
        if is_url(recorded_store):
            try:
                return read_vocabulary(recorded_store, storage_options)
            except FileNotFoundError:
                pass
        elif (store_path / "zarr.json").exists():
            return read_vocabulary(store_path)
        if not (path / MODEL_NAME / "zarr.json").exists():
            raise StoreError(f"--vocabulary {source}: the run's store {store_path} is gone and the run has no model yet")
        path = path / MODEL_NAME
    if not (path / "zarr.json").exists():
        raise StoreError(f"--vocabulary {source} is not a store, a run directory or a model.zarr "
                         f"(it has no zarr.json or {SETTINGS_NAME})")
    if "model_format_version" in json.loads((path / "zarr.json").read_text()).get("attributes", {}):
        model = load_model(path)
        words, recorded = model.vocab, model.attrs.get("store_fingerprint", {}).get("settings") or {}
    else:
        store = open_store(path)
        words, recorded = store.vocab, store.settings
    return _fixed(str(path.resolve()), words, recorded)


def _fixed(source: str, words, recorded: dict) -> FixedVocabulary:
    tokenizer = TokenizerSettings(**recorded["tokenizer"]) if "tokenizer" in recorded else TokenizerSettings()
    return FixedVocabulary(source, [str(w) for w in words], tokenizer)
