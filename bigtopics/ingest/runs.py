"""The vocabulary of an ingest on disk, in bounded memory (step 2; see bigtopics/ingest/__init__.py).

A worker's vocabulary grows with every new string it meets, and OCR'd text has a new string every
few words. So a worker spills its vocabulary as a *run* once it holds more than its share of the
memory budget, and starts a new one (`write_run`): the run's words with their term counts and
document frequencies, ordered by hash, as flat files

    run-NAME.hash    uint64  hash of each word (kernels/tokens.hash_span), sorted
    run-NAME.local   int32   the word's id in the run (what the run's spilled units hold)
    run-NAME.tf      int64   term count
    run-NAME.df      int64   document frequency
    run-NAME.offsets int64   word i's code points are chars[offsets[i]:offsets[i + 1]]
    run-NAME.chars   uint32  code points

The top 8 bits of the hash cut every run into the same N_PARTITIONS partitions, so a partition
of all runs together holds every occurrence of its words. `merged_words` reads a few partitions
at a time, as many as fit the budget, and sums each word's counts over the runs: the exact
counts, whatever the number of distinct strings, with memory bounded by the budget and the
distinct strings counted. `write_remaps` then gives each run its local id -> store id map.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..kernels.vocab import gather_words, group_same_words, hash_words, match_words

N_PARTITIONS = 256
PARTITION_SHIFT = np.uint64(64 - 8)
FIELDS = {"hash": np.uint64, "local": np.int32, "tf": np.int64, "df": np.int64, "offsets": np.int64,
          "chars": np.uint32}


def run_path(spill_dir: Path, name: str, field: str) -> Path:
    return Path(spill_dir) / f"run-{name}.{field}"


def remap_path(spill_dir: Path, name: str) -> Path:
    return Path(spill_dir) / f"remap-{name}.int64"


def write_array(path: Path, values: np.ndarray) -> None:
    """The bytes of `values` to `path`, through Python's file writes: numpy's own (tofile, save)
    report a full disk without its errno ("N requested and M written"), so not as a full disk."""
    with open(path, "wb") as f:
        f.write(np.ascontiguousarray(values).data)


def write_run(spill_dir: Path, name: str, tok, term_counts: np.ndarray, doc_freqs: np.ndarray) -> dict:
    """Spill the words of a tokenizer (stop words excepted) with their counts as run `name`;
    returns what the merge needs to know of it."""
    first, n = tok.n_stop, tok.n_words
    order = np.argsort(tok.word_hash[first:n], kind="stable")
    local = (order + first).astype(np.int32)
    chars, offsets = gather_words(tok.pool, tok.pool_offsets, local)
    hashes = tok.word_hash[local]
    arrays = {"hash": hashes, "local": local, "tf": term_counts[local], "df": doc_freqs[local], "offsets": offsets,
              "chars": chars}
    for field, values in arrays.items():
        write_array(run_path(spill_dir, name, field), values.astype(FIELDS[field], copy=False))
    bounds = np.searchsorted(hashes >> PARTITION_SHIFT, np.arange(N_PARTITIONS + 1, dtype=np.uint64))
    return {"name": name, "n_local": n, "n_entries": len(local), "n_chars": len(chars), "bounds": bounds.tolist()}


def read_run(spill_dir: Path, name: str, start: int, stop: int, fields=("hash", "tf", "df")) -> dict:
    """Entries start..stop-1 of a run: the given fields, and "offsets" (from 0) and "chars"."""
    def read(field, a, count):
        dtype = np.dtype(FIELDS[field])
        return np.fromfile(run_path(spill_dir, name, field), dtype, count=count, offset=a * dtype.itemsize)

    out = {field: read(field, start, stop - start) for field in fields}
    offsets = read("offsets", start, stop - start + 1)
    out["chars"] = read("chars", int(offsets[0]), int(offsets[-1] - offsets[0]))
    out["offsets"] = offsets - offsets[0]
    return out


@dataclass
class Words:
    """Distinct words with their counts summed over all runs; `strings(i)` makes Python strings of some."""

    hashes: np.ndarray
    tf: np.ndarray
    df: np.ndarray
    chars: np.ndarray
    offsets: np.ndarray

    def strings(self, which: np.ndarray) -> list[str]:
        chars, offsets = gather_words(self.chars, self.offsets, np.asarray(which, np.int64))
        return decode_words(chars, offsets)


def decode_words(chars: np.ndarray, offsets: np.ndarray) -> list[str]:
    text = chars.tobytes().decode("utf-32-le", "surrogatepass")
    return [text[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def partition_groups(runs: list[dict], budget: int) -> list[tuple[int, int]]:
    """Consecutive partitions [a, b) whose entries over all runs fit `budget` bytes together (a
    partition on its own if it alone does not)."""
    entries = np.zeros(N_PARTITIONS, np.int64)
    for run in runs:
        entries += np.diff(run["bounds"])
    n_chars = sum(run["n_chars"] for run in runs)
    # read arrays, their concatenation and sort order, the sums: about 3 copies of each entry
    entry_bytes = 3 * (8 * 5 + 4 * n_chars / max(1, entries.sum()))
    groups, start, size = [], 0, 0.0
    for p in range(N_PARTITIONS):
        if p > start and size + entries[p] * entry_bytes > budget:
            groups.append((start, p))
            start, size = p, 0.0
        size += entries[p] * entry_bytes
    groups.append((start, N_PARTITIONS))
    return groups


def merged_words(spill_dir: Path, runs: list[dict], budget: int) -> Iterator[Words]:
    """The distinct words of all runs, a group of partitions at a time, with summed counts."""
    for a, b in partition_groups(runs, budget) if runs else []:
        parts = [read_run(spill_dir, run["name"], run["bounds"][a], run["bounds"][b]) for run in runs]
        hashes = np.concatenate([p["hash"] for p in parts])
        tf = np.concatenate([p["tf"] for p in parts])
        df = np.concatenate([p["df"] for p in parts])
        chars = np.concatenate([p["chars"] for p in parts])
        bases = np.cumsum([0] + [len(p["chars"]) for p in parts])
        offsets = np.concatenate([[0]] + [p["offsets"][1:] + base for p, base in zip(parts, bases)])
        del parts
        order = np.argsort(hashes, kind="stable")
        starts, distinct = group_same_words(hashes[order], order, chars, offsets)
        if not distinct:  # two different words with the same 64-bit hash: group by the words themselves
            words = decode_words(chars, offsets)
            order = np.array(sorted(range(len(words)), key=lambda i: (hashes[i], words[i])), np.int64)
            keys = [(hashes[i], words[i]) for i in order]
            starts = np.array([j for j in range(len(keys)) if j == 0 or keys[j] != keys[j - 1]] + [len(keys)],
                              np.int64)
        if len(order):
            yield _distinct(hashes, tf, df, chars, offsets, order, starts)


def _distinct(hashes, tf, df, chars, offsets, order, starts) -> Words:
    first = order[starts[:-1]]
    sel_chars, sel_offsets = gather_words(chars, offsets, first)
    return Words(hashes[first], np.add.reduceat(tf[order], starts[:-1]), np.add.reduceat(df[order], starts[:-1]),
                 sel_chars, sel_offsets)


class KnownWords:
    """A list of words to look words up in, by hash and then by code points (`ids`)."""

    def __init__(self, words: list[str]):
        lengths = np.fromiter(map(len, words), np.int64, count=len(words))
        self.offsets = np.concatenate([[0], np.cumsum(lengths)])
        self.chars = np.frombuffer("".join(words).encode("utf-32-le", "surrogatepass"), np.uint32)
        hashes = hash_words(self.chars, self.offsets)
        self.order = np.argsort(hashes, kind="stable")
        self.sorted_hashes = hashes[self.order]

    def ids(self, hashes: np.ndarray, chars: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """ids[i] = the position of word i in the list, or -1."""
        return match_words(hashes, chars, offsets, self.sorted_hashes, self.order, self.chars, self.offsets)


def write_remaps(spill_dir: Path, runs: list[dict], known: KnownWords) -> None:
    """For each run, remap-NAME.int64: int64[n_local], the store id of each of its local ids, or -1."""
    for run in runs:
        entries = read_run(spill_dir, run["name"], 0, run["n_entries"], fields=("hash", "local"))
        remap = np.full(run["n_local"], -1, np.int64)
        remap[entries["local"]] = known.ids(entries["hash"], entries["chars"], entries["offsets"])
        write_array(remap_path(spill_dir, run["name"]), remap)
