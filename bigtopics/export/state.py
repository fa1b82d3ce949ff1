"""state.gz: MALLET's --output-state, the topic of every token, with state_instances.txt, the
text a MALLET user imports to load it (`train-topics --input-state`; docs/formats.md gives the
commands). Also read as R mallet (mallet.read.state), dfrtopics (read_sampling_state) and
dfr-browser's preparation scripts read a state. Gzipped text:

    #doc source pos typeindex type topic
    #alpha : alpha_0 alpha_1 ... alpha_{K-1}
    #beta : eta
    doc source pos typeindex type topic          (one line per token)

A run keeps per-token topics only with --exclude-own (the default for more than one epoch;
`run/assignments/`): each document's topics from the last sweep of its latest visit. The state is
those, so it is a sample of the assignments the online estimate averaged, not the table itself:
summed over documents it gives counts close to N[k, w], not equal. Its documents are those
training visited, in the store's order: the documents kept out of training (--heldout, and those
kept out to fit a learned alpha's scale, --scale-docs) have no topics and are in neither file.

MALLET's ParallelTopicModel.initializeFromState walks its instance list's documents in order and
each one's tokens in order, and requires the next state line's `typeindex` to be the token's
index in its alphabet, which MALLET's import numbers by first appearance. So here `doc` is the
document's number among the state's documents (MALLET's index into its instance list), `source`
its id, `pos` the token's place in the document and `typeindex` MALLET's: the word's rank by first
appearance over the state's tokens (MalletTypes). state_instances.txt holds one line per state
document, `id TAB tokens` (ids and words escaped by text.escape_word, so neither holds
whitespace), its tokens in the state's order. The store keeps counts, not word order: a
document's tokens are in the order of their word ids, a word's occurrences together.

A one-epoch run keeps no per-token topics (they would cost 2 bytes a token on disk for nothing
the training needs), so it has no state: NO_ASSIGNMENTS says so.
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..locations import is_url
from ..rundir import ASSIGNMENTS_DIR, read_settings
from ..store import Store, open_store
from .base import ExportContext, Writer
from .text import escape_word

NO_ASSIGNMENTS = ("{flag}: {run} keeps no per-token topics (only runs trained with --exclude-own, the default "
                  "for more than one epoch, do; docs/formats.md, 'state.gz')")
INSTANCES = "state_instances.txt"


def has_assignments(run: Path) -> bool:
    folder = Path(run) / ASSIGNMENTS_DIR
    return (folder / "topics.npy").exists() and (folder / "token_offsets.npy").exists()


def training_store(ctx: ExportContext) -> Store:
    """The store the run was trained on: --doc-topics' store if it is that one, else the run's."""
    record = read_settings(ctx.run)
    store = ctx.store
    if store is None:
        if not is_url(record["store"]) and not Path(record["store"]).exists():
            raise FileNotFoundError(f"the run's store {record['store']} is gone; give it with "
                                    "--doc-topics and --store")
        store = open_store(record["store"], ctx.storage_options)
    if store.fingerprint() != record["store_fingerprint"]:
        raise ValueError(f"{store.location} is not the store {ctx.run} was trained on")
    return store


@dataclass
class StateBlock:
    """The state's documents of one store block: their store numbers, their numbers in the state
    (`first` + 0, 1, ...), lengths, and their tokens one document after another (word ids in the
    state's order, topics, MALLET's type indices)."""
    first: int
    docs: np.ndarray
    lengths: np.ndarray
    words: np.ndarray
    topics: np.ndarray
    types: np.ndarray

    def token_docs(self) -> np.ndarray:
        """Each token's document, numbered within the block."""
        return np.repeat(np.arange(len(self.docs)), self.lengths)


class StateDocuments:
    """The documents in the state (module docstring), a store block at a time, and MALLET's type
    index of every word: `types[w]`, by first appearance over the blocks read so far (-1 for a word
    not yet seen); `n_types` of them. Memory is one block plus V numbers."""

    def __init__(self, ctx: ExportContext):
        folder = ctx.run / ASSIGNMENTS_DIR
        self.saved = np.load(folder / "topics.npy", mmap_mode="r")
        self.offsets = np.load(folder / "token_offsets.npy", mmap_mode="r")
        self.store = training_store(ctx)
        if len(self.offsets) != self.store.n_docs + 1 or int(self.offsets[-1]) != len(self.saved):
            raise ValueError(f"{folder} does not match {self.store.location} (damaged saved assignments?)")
        self.unvisited = np.iinfo(self.saved.dtype).max
        self.types = np.full(self.store.n_words, -1, np.int64)
        self.n_types = 0
        self.n_docs = 0

    def blocks(self):
        """StateBlock per store block, in order (the type indices grow as they go: read them whole once)."""
        self.types[:] = -1
        self.n_types = self.n_docs = 0
        for block in self.store.iter_blocks():
            lo, hi = int(self.offsets[block.start]), int(self.offsets[block.start + block.n_docs])
            topics = np.asarray(self.saved[lo:hi]).astype(np.int64)
            lengths = block.doc_lengths.astype(np.int64)
            words = np.repeat(block.indices.astype(np.int64), block.data.astype(np.int64))
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
            visited = np.zeros(block.n_docs, bool)
            visited[lengths > 0] = topics[starts[lengths > 0]] != self.unvisited
            keep = np.repeat(visited, lengths)
            words, topics = words[keep], topics[keep]
            self._number(words)
            docs = block.start + np.flatnonzero(visited)
            yield StateBlock(self.n_docs, docs, lengths[visited], words, topics, self.types[words])
            self.n_docs += len(docs)

    def _number(self, words: np.ndarray) -> None:
        """Give the words seen for the first time their MALLET type indices, in order of appearance."""
        new = words[self.types[words] < 0]
        if len(new):
            distinct, first = np.unique(new, return_index=True)
            self.types[distinct[np.argsort(first)]] = self.n_types + np.arange(len(distinct))
            self.n_types += len(distinct)


def kept_out_notice(ctx: ExportContext, n_in_state: int, n_docs: int) -> None:
    """Say which of the store's documents the state leaves out, and why."""
    if n_in_state == n_docs:
        return
    settings = read_settings(ctx.run)["settings"]
    ctx.log(f"export: state.gz and {INSTANCES} hold the {n_in_state:,} documents training visited; the other "
            f"{n_docs - n_in_state:,} (held out: {settings.get('heldout', 0):,}; kept out for alpha's scale: "
            f"{settings.get('scale_docs') or 0:,}; any not yet visited) have no sampled topics")


def write_state(ctx: ExportContext, out: Path) -> None:
    model, vocab = ctx.model, ctx.vocab_text
    documents = StateDocuments(ctx)
    store = documents.store
    # mtime 0 and no file name in the gzip header: the same model gives the same bytes
    with open(out / "state.gz", "wb") as raw, gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=raw,
                                                            mtime=0) as packed, \
            io.TextIOWrapper(packed, encoding="utf-8") as f, \
            open(out / INSTANCES, "w", encoding="utf-8", newline="\n") as instances:
        f.write("#doc source pos typeindex type topic\n")
        f.write("#alpha : " + "".join(f"{a!r} " for a in model.alpha_k.tolist()) + "\n")
        f.write(f"#beta : {model.eta!r}\n")
        for state in documents.blocks():
            ids = [escape_word(i) for i in store.doc_ids(int(state.docs[0]), int(state.docs[-1]) + 1)] \
                if len(state.docs) else []
            ends = np.cumsum(state.lengths)
            for i, (d, end) in enumerate(zip(state.docs.tolist(), ends.tolist())):  # a document at a time
                start = end - int(state.lengths[i])
                name = ids[d - int(state.docs[0])]
                words = vocab[state.words[start:end]].tolist()
                prefix = f"{state.first + i} {name} "
                f.write("".join(f"{prefix}{pos} {t} {word} {k}\n" for pos, (t, word, k) in
                                enumerate(zip(state.types[start:end].tolist(), words,
                                              state.topics[start:end].tolist()))))
                instances.write(f"{name}\t{' '.join(words)}\n")
    kept_out_notice(ctx, documents.n_docs, store.n_docs)


WRITERS = (Writer(("state.gz", INSTANCES), write_state, needs="assignments", option="state"),)
