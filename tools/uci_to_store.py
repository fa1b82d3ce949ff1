"""Convert a UCI bag-of-words corpus (docword.*.txt[.gz] + vocab.*.txt) into a bigtopics store.

    python tools/uci_to_store.py docword.nytimes.txt.gz vocab.nytimes.txt nytimes.store

docword holds three header lines (D documents, W words, NNZ entries), then NNZ lines
"docID wordID count" (1-based ids), sorted by docID; vocab holds W words, line w for wordID w.

Two streaming passes in bounded memory (a chunk of lines plus arrays over the vocabulary): the
first checks every line and counts each word's frequency, the second writes the documents with
word ids renumbered by descending frequency, as the store requires. Documents without entries
are dropped, words that never occur are left out of the vocabulary; both are counted. Document
ids are the docIDs ("1".."D").
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

import click
import numpy as np

from bigtopics.cli import user_errors
from bigtopics.kernels.docword import parse_triples
from bigtopics.progress import Progress
from bigtopics.store import DEFAULT_ENTRIES_PER_CHUNK, StoreWriter, count_dtype_for, index_dtype_for

CHUNK_BYTES = 8 << 20
HEADER_FIELDS = ("D (number of documents)", "W (number of words)", "NNZ (number of entries)")


class DocwordError(ValueError):
    """A docword or vocab file that does not follow the UCI bag-of-words format."""


@dataclass
class Entries:
    """Consecutive lines of a docword file: docID, wordID, count and the line's number."""

    docs: np.ndarray
    words: np.ndarray
    counts: np.ndarray
    lines: np.ndarray

    def take(self, where) -> Entries:
        return Entries(self.docs[where], self.words[where], self.counts[where], self.lines[where])

    @staticmethod
    def join(parts: list[Entries]) -> Entries:
        return Entries(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("docs", "words", "counts", "lines")))


def _open(path: Path) -> BinaryIO:
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def read_header(stream: BinaryIO, path: Path) -> tuple[int, int, int]:
    values = []
    for number, field in enumerate(HEADER_FIELDS, start=1):
        text = stream.readline().decode("ascii", errors="replace").strip()
        if not (text.isascii() and text.isdigit()):
            raise DocwordError(f"{path}, line {number}: expected the header's {field}, found {text!r}")
        values.append(int(text))
    return values[0], values[1], values[2]


def _line_chunks(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """(lines before this chunk, chunk of whole lines) over the rest of the stream."""
    lines_before = 0
    carry = b""
    while True:
        data = stream.read(CHUNK_BYTES)
        if not data:
            if carry:
                yield lines_before, carry
            return
        data = carry + data
        cut = data.rfind(b"\n") + 1
        carry = data[cut:]
        if cut:
            yield lines_before, data[:cut]
            lines_before += data.count(b"\n", 0, cut)


def _parse(chunk: bytes, first_line: int, path: Path) -> Entries:
    values, row_lines, bad_line = parse_triples(np.frombuffer(chunk, np.uint8))
    if bad_line >= 0:
        text = chunk.split(b"\n")[bad_line].decode("utf-8", errors="replace").strip()
        raise DocwordError(f"{path}, line {first_line + bad_line}: expected 'docID wordID count' "
                           f"(three whole numbers), found {text[:80]!r}")
    return Entries(values[:, 0], values[:, 1], values[:, 2], row_lines + first_line)


def _check(entries: Entries, n_docs: int, n_words: int, previous_doc: int, path: Path) -> None:
    """Ranges and docID order; the error names the first offending line."""
    problems = (
        ((entries.docs < 1) | (entries.docs > n_docs), f"docID outside 1..{n_docs}"),
        ((entries.words < 1) | (entries.words > n_words), f"wordID outside 1..{n_words}"),
        (entries.counts < 1, "count below 1"),
        (np.diff(entries.docs, prepend=previous_doc) < 0, "docIDs are not in ascending order"),
    )
    for bad, reason in problems:
        if bad.any():
            i = int(np.argmax(bad))
            raise DocwordError(f"{path}, line {entries.lines[i]}: {reason} "
                               f"('{entries.docs[i]} {entries.words[i]} {entries.counts[i]}')")


def _check_no_repeats(entries: Entries, n_words: int, path: Path) -> None:
    keys = entries.docs * (n_words + 1) + entries.words
    if (np.diff(keys) > 0).all():  # the usual layout: words ascending within each document
        return
    order = np.argsort(keys, kind="stable")
    repeated = np.flatnonzero(np.diff(keys[order]) == 0)
    if len(repeated):
        i = order[repeated[0] + 1]
        raise DocwordError(f"{path}, line {entries.lines[i]}: docID {entries.docs[i]} lists "
                           f"wordID {entries.words[i]} a second time")


def iter_documents(path: Path, desc: str, quiet: bool = True) -> Iterator[Entries]:
    """The docword file's entries, checked, in batches of whole documents."""
    with _open(path) as stream:
        n_docs, n_words, n_entries = read_header(stream, path)
        held: list[Entries] = []  # the last document read so far may continue in the next chunk
        previous_doc = 0
        with Progress(desc, total=n_entries, unit="entries", quiet=quiet) as progress:
            for lines_before, chunk in _line_chunks(stream):
                entries = _parse(chunk, len(HEADER_FIELDS) + 1 + lines_before, path)
                if len(entries.docs) == 0:
                    continue
                _check(entries, n_docs, n_words, previous_doc, path)
                previous_doc = int(entries.docs[-1])
                complete = int(np.searchsorted(entries.docs, previous_doc))
                if complete > 0:
                    batch = Entries.join([*held, entries.take(slice(0, complete))])
                    _check_no_repeats(batch, n_words, path)
                    yield batch
                    held = []
                held.append(entries.take(slice(complete, None)))
                progress.update(len(entries.docs))
        if held:
            batch = Entries.join(held)
            _check_no_repeats(batch, n_words, path)
            yield batch


def read_vocab(path: Path, n_words: int) -> np.ndarray:
    words = path.read_text(encoding="utf-8").splitlines()
    while words and not words[-1].strip():
        words.pop()
    if len(words) != n_words:
        raise DocwordError(f"{path} has {len(words)} words; the docword header says W = {n_words}")
    return np.array([w.strip() for w in words], dtype=object)


def convert(docword: str | os.PathLike, vocab: str | os.PathLike, out: str | os.PathLike, *,
            overwrite: bool = False, quiet: bool = True,
            entries_per_chunk: int = DEFAULT_ENTRIES_PER_CHUNK) -> dict:
    """Write the store; returns counts of documents, words, entries and what was dropped."""
    docword, vocab, out = Path(docword), Path(vocab), Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} already exists (use --overwrite to replace it)")
    with _open(docword) as stream:
        n_docs, n_words, n_entries = read_header(stream, docword)
    words = read_vocab(vocab, n_words)

    # Pass 1: check everything and count, so that pass 2 cannot fail half way.
    frequency = np.zeros(n_words, np.int64)
    docs_present = entries_seen = max_count = 0
    for batch in iter_documents(docword, f"{docword.name}, pass 1/2", quiet):
        frequency += np.bincount(batch.words - 1, weights=batch.counts, minlength=n_words).astype(np.int64)
        docs_present += int(np.count_nonzero(np.diff(batch.docs, prepend=0)))
        entries_seen += len(batch.docs)
        max_count = max(max_count, int(batch.counts.max()))
    if entries_seen != n_entries:
        raise DocwordError(f"{docword}: the header says NNZ = {n_entries} entries, the file has {entries_seen}")

    order = np.argsort(-frequency, kind="stable")[: int(np.count_nonzero(frequency))]
    new_id = np.full(n_words, -1, np.int64)
    new_id[order] = np.arange(len(order))
    doc_freqs = np.zeros(len(order), np.int64)

    # Pass 2: renumber the words and write the documents.
    with StoreWriter(
        out,
        index_dtype=index_dtype_for(len(order)),
        count_dtype=count_dtype_for(max_count),
        entries_per_chunk=entries_per_chunk,
        docs_per_chunk=max(1, int(entries_per_chunk * docs_present / max(1, n_entries))),
        overwrite=overwrite,
    ) as writer:
        for batch in iter_documents(docword, f"{docword.name}, pass 2/2", quiet):
            ids = new_id[batch.words - 1]
            within_docs = np.lexsort((ids, batch.docs))  # docIDs already ascend; words must too
            doc_starts = np.flatnonzero(np.diff(batch.docs, prepend=0))
            indptr = np.append(doc_starts, len(ids))
            indices = ids[within_docs]
            writer.append(indptr, indices, batch.counts[within_docs], batch.docs[doc_starts].astype(str))
            doc_freqs += np.bincount(indices, minlength=len(order))
        writer.commit(
            words[order],
            frequency[order],
            doc_freqs,
            attrs={"settings": {"source": "uci_bag_of_words", "docword": docword.name, "vocab": vocab.name,
                                "empty_docs_dropped": n_docs - docs_present,
                                "unused_words_dropped": n_words - len(order)}},
        )
    return {
        "n_docs": docs_present,
        "n_words": len(order),
        "n_entries": entries_seen,
        "n_tokens": int(frequency.sum()),
        "empty_docs_dropped": n_docs - docs_present,
        "unused_words_dropped": n_words - len(order),
    }


@click.command()
@click.argument("docword", type=click.Path(exists=True, dir_okay=False))
@click.argument("vocab", type=click.Path(exists=True, dir_okay=False))
@click.argument("out", type=click.Path())
@click.option("--overwrite", is_flag=True, help="replace OUT if it exists")
@click.option("--quiet", is_flag=True, help="no progress output")
@user_errors
def main(docword, vocab, out, overwrite, quiet):
    """Convert UCI bag-of-words DOCWORD + VOCAB into the bigtopics store OUT."""
    summary = convert(docword, vocab, out, overwrite=overwrite, quiet=quiet)
    click.echo(
        f"wrote {out}: {summary['n_docs']:,} documents, {summary['n_words']:,} words, "
        f"{summary['n_tokens']:,} tokens; dropped {summary['empty_docs_dropped']:,} empty documents "
        f"and {summary['unused_words_dropped']:,} words that never occur"
    )


if __name__ == "__main__":
    main()
