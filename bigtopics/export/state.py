"""state.gz: MALLET's --output-state, the topic of every token, as R mallet
(mallet.read.state / load.from.mallet.state), dfrtopics (read_sampling_state) and dfr-browser's
preparation scripts read it. Gzipped text:

    #doc source pos typeindex type topic
    #alpha : alpha_0 alpha_1 ... alpha_{K-1}
    #beta : eta
    doc source pos typeindex type topic          (one line per token)

A run keeps per-token topics only with --exclude-own (the default for more than one epoch;
`run/assignments/`): each document's topics from the last sweep of its latest visit. The state is
those, so it is a sample of the assignments the online estimate averaged, not the table itself:
summed over documents it gives counts close to N[k, w], not equal. `doc` is the store's document
number and `source` its id (text.escape_word, as the line is split on spaces); documents never
visited (held out with --heldout) have no topics and no lines. The store keeps counts, not word
order: `pos` numbers a document's tokens in the order of its word ids, a word's occurrences
together. A one-epoch run keeps no per-token topics (they would cost 2 bytes a token on disk
for nothing the training needs), so it has no state: NO_ASSIGNMENTS says so.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import numpy as np

from ..locations import is_url
from ..rundir import ASSIGNMENTS_DIR, read_settings
from ..store import Store, open_store
from .base import ExportContext, Writer
from .text import escape_word

NO_ASSIGNMENTS = ("{flag}: {run} keeps no per-token topics (only runs trained with --exclude-own, the default "
                  "for more than one epoch, do; docs/formats.md, 'state.gz')")


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


def write_state(ctx: ExportContext, out: Path) -> None:
    model, vocab = ctx.model, ctx.vocab_text
    folder = ctx.run / ASSIGNMENTS_DIR
    topics = np.load(folder / "topics.npy", mmap_mode="r")
    offsets = np.load(folder / "token_offsets.npy", mmap_mode="r")
    store = training_store(ctx)
    if len(offsets) != store.n_docs + 1 or int(offsets[-1]) != len(topics):
        raise ValueError(f"{folder} does not match {store.location} (damaged saved assignments?)")
    unvisited = np.iinfo(topics.dtype).max
    # mtime 0 and no file name in the gzip header: the same model gives the same bytes
    with open(out / "state.gz", "wb") as raw, gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=raw,
                                                            mtime=0) as packed, \
            io.TextIOWrapper(packed, encoding="utf-8") as f:
        f.write("#doc source pos typeindex type topic\n")
        f.write("#alpha : " + "".join(f"{a!r} " for a in model.alpha_k.tolist()) + "\n")
        f.write(f"#beta : {model.eta!r}\n")
        middles = [f" {w} {word} " for w, word in enumerate(vocab)]  # " typeindex type ", once per word
        for block in store.iter_blocks():
            ids = [escape_word(i) for i in store.doc_ids(block.start, block.start + block.n_docs).tolist()]
            for i in range(block.n_docs):  # a document's lines at a time: memory is one document
                d = block.start + i
                doc_topics = topics[offsets[d]:offsets[d + 1]]
                if len(doc_topics) == 0 or doc_topics[0] == unvisited:
                    continue
                words, counts = block.row(i)
                prefix = f"{d} {ids[i]} "
                f.write("".join(f"{prefix}{pos}{middles[w]}{k}\n" for pos, (w, k) in
                                enumerate(zip(np.repeat(words, counts).tolist(), doc_topics.tolist()))))


WRITERS = (Writer(("state.gz",), write_state, needs="assignments", option="state"),)
