"""Step 2 of an ingest: the vocabulary of the store (see bigtopics/ingest/__init__.py).

The workers' vocabularies, spilled as runs (runs.py), are merged from disk a few partitions at a
time and either pruned and ordered by frequency (`pruned_vocabulary`, with the `Pruning` rules) or
counted against a fixed vocabulary (`fixed_vocabulary_counts`, with a `FixedVocabulary` that
`read_vocabulary` reads from a store, a run directory or a model.zarr). Then runs.write_remaps
gives each run the store id of each of its words, or -1 for a word left out.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..locations import is_url
from ..model import MODEL_NAME, load_model
from ..places import attributes_kind, read_json
from ..rundir import SETTINGS_NAME, read_settings
from ..store import StoreError, open_store
from ..tokenizer import TokenizerSettings
from .runs import KnownWords, merged_words


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


def pruned_vocabulary(spill_dir: Path, runs: list[dict], n_docs: int, pruning: Pruning, budget: int):
    """(words, term_counts, doc_freqs, pruned, n_distinct) of the store, from the workers' runs.

    Words are ordered by decreasing term count, ties by the word (so the result is deterministic);
    pruned maps each rule to the (words, tokens) it removed; n_distinct counts the distinct
    words seen (stop words excepted). Only the words that can still be among the max_vocab most
    frequent are made Python strings, so memory is bounded by the budget and max_vocab."""
    pruned = {rule: (0, 0) for rule in ("zero", "min_df", "max_df", "max_vocab")}
    limit = pruning.max_vocab
    kept: list[tuple[int, str, int]] = []  # (-term count, word, document frequency)
    threshold = n_survivors = survivor_tokens = n_distinct = 0
    for words in merged_words(spill_dir, runs, budget):
        tf, df = words.tf, words.df
        n_distinct += len(tf)
        alive = tf > 0  # stop words and words seen only in skipped rows
        for rule, mask in (("zero", tf == 0), ("min_df", df < pruning.min_df),
                           ("max_df", df > pruning.max_df * n_docs)):
            hit = alive & mask
            pruned[rule] = (pruned[rule][0] + int(hit.sum()), pruned[rule][1] + int(tf[hit].sum()))
            alive &= ~mask
        n_survivors += int(alive.sum())
        survivor_tokens += int(tf[alive].sum())
        candidates = np.flatnonzero(alive & (tf >= threshold))
        if limit is not None and len(candidates) > limit:  # ties at the cut stay: the word decides
            candidates = candidates[tf[candidates] >= np.partition(tf[candidates], -limit)[-limit]]
        kept.extend(zip((-tf[candidates]).tolist(), words.strings(candidates), df[candidates].tolist()))
        if limit is not None and len(kept) > limit:
            kept.sort()
            del kept[limit:]
            threshold = -kept[-1][0]
    kept.sort()
    if limit is not None:
        del kept[limit:]
    counts = np.array([-t for t, _, _ in kept], np.int64)
    pruned["max_vocab"] = (n_survivors - len(kept), survivor_tokens - int(counts.sum()))
    return [w for _, w, _ in kept], counts, np.array([d for _, _, d in kept], np.int64), pruned, n_distinct


def fixed_vocabulary_counts(spill_dir: Path, runs: list[dict], known: KnownWords, n_words: int, budget: int):
    """(term_counts, doc_freqs, pruned, n_distinct) of the words of a fixed vocabulary (`known`,
    n_words of them) in the workers' runs; pruned maps "out_of_vocabulary" to the (words, tokens)
    outside it, n_distinct counts the distinct words seen (stop words excepted)."""
    counts, dfs = np.zeros((2, n_words), np.int64)  # zero for words never seen
    outside_words = outside_tokens = n_distinct = 0
    for words in merged_words(spill_dir, runs, budget):
        n_distinct += len(words.tf)
        ids = known.ids(words.hashes, words.chars, words.offsets)
        inside = ids >= 0
        np.add.at(counts, ids[inside], words.tf[inside])
        np.add.at(dfs, ids[inside], words.df[inside])
        outside = ~inside & (words.tf > 0)  # stop words have no tokens left to drop
        outside_words += int(outside.sum())
        outside_tokens += int(words.tf[outside].sum())
    return counts, dfs, {"out_of_vocabulary": (outside_words, outside_tokens)}, n_distinct


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
        recorded_store = read_settings(path)["store"]
        store_path = Path(recorded_store)
        if is_url(recorded_store):
            try:
                return read_vocabulary(recorded_store, storage_options)
            except FileNotFoundError:
                pass
        elif (store_path / "zarr.json").exists():
            return read_vocabulary(store_path)
        if not (path / MODEL_NAME / "zarr.json").exists():
            raise StoreError(f"--vocabulary {source}: the run's store {store_path} is gone "
                             "and the run has no model yet")
        path = path / MODEL_NAME
    if not (path / "zarr.json").exists():
        raise StoreError(f"--vocabulary {source} is not a store, a run directory or a model.zarr "
                         f"(it has no zarr.json or {SETTINGS_NAME})")
    if attributes_kind(read_json(path / "zarr.json").get("attributes")) == "model":
        model = load_model(path)
        words, recorded = model.vocab, model.attrs.get("store_fingerprint", {}).get("settings") or {}
    else:
        store = open_store(path)
        words, recorded = store.vocab, store.settings
    return _fixed(str(path.resolve()), words, recorded)


def _fixed(source: str, words, recorded: dict) -> FixedVocabulary:
    recorded = recorded if isinstance(recorded, dict) else {}  # (a model's crafted fingerprint: no settings)
    try:
        tokenizer = TokenizerSettings.from_record(recorded.get("tokenizer", {}))
    except ValueError as e:
        raise StoreError(f"--vocabulary {source} is damaged: its tokenizer settings {e}") from None
    return FixedVocabulary(source, [str(w) for w in words], tokenizer)
