"""An OCR-like corpus for measuring and testing `bigtopics ingest` at library scale.

Each document is `--words` tokens drawn from a Zipf-Mandelbrot law over a vocabulary of
`--vocab` pseudo-words (bigtopics.synth.pseudo_words), followed by `--junk` strings of random
letters (5 to 12 of them), as OCR makes of stains, page numbers and broken hyphenation: nearly
every one is seen once in the whole collection, so the number of distinct strings grows with the
number of documents (40 a document by default), as it does in a digital library.

    .venv/bin/python tools/ocr_corpus.py ocr.jsonl.gz --docs 400000          # JSON Lines (gzip by name)
    .venv/bin/python tools/ocr_corpus.py books/ --layout tree --docs 100000  # one .txt a document

`--layout tree` writes one small text file per document in nested folders
(`DIR/ddd/ddd/doc-N.txt`, 1,000 files a folder), for the million-file case. Everything follows
from `--seed`: the same seed and settings give the same corpus byte for byte.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import time
from pathlib import Path

import click
import numpy as np

from bigtopics.atomic import temporary_sibling
from bigtopics.cli import user_errors
from bigtopics.synth import pseudo_words

DOCS_PER_BLOCK = 4096  # the output does not depend on it: every block has its own seed
JUNK_LENGTHS = (5, 12)
ZIPF_SHIFT = 2.7  # Mandelbrot's q: p(rank r) ~ (r + q)^-s
FILES_PER_FOLDER = 1000
SPACES = re.compile(rb" +")


def zipf_cdf(n_words: int, exponent: float) -> np.ndarray:
    p = (np.arange(1, n_words + 1) + ZIPF_SHIFT) ** -exponent
    return np.cumsum(p / p.sum())


def padded(words) -> np.ndarray:
    """uint8[len(words), longest + 1]: each word's bytes, space-padded (so a row is a token and its separator)."""
    width = max(map(len, words)) + 1
    out = np.full((len(words), width), ord(" "), np.uint8)
    for i, w in enumerate(words):
        out[i, : len(w)] = np.frombuffer(w.encode("ascii"), np.uint8)
    return out


def document_texts(first: int, n: int, *, vocab: np.ndarray, cdf: np.ndarray, n_words: int, n_junk: int,
                   seed: int) -> list[bytes]:
    """The texts of documents first..first+n-1 (a block of DOCS_PER_BLOCK starting at a multiple of it)."""
    rng = np.random.default_rng([seed, first // DOCS_PER_BLOCK])
    ids = np.minimum(np.searchsorted(cdf, rng.random((n, n_words))), len(cdf) - 1)
    words = vocab[ids].reshape(n, -1)
    lo, hi = JUNK_LENGTHS
    junk = (rng.integers(0, 26, (n, n_junk, hi + 1)) + ord("a")).astype(np.uint8)
    lengths = rng.integers(lo, hi + 1, (n, n_junk, 1))
    junk[np.arange(hi + 1) >= lengths] = ord(" ")
    rows = np.concatenate([words, junk.reshape(n, -1)], axis=1)
    return [SPACES.sub(b" ", row.tobytes()).strip() for row in rows]


def write_corpus(out: Path, layout: str, n_docs: int, n_vocab: int, exponent: float, n_words: int, n_junk: int,
                 seed: int, overwrite: bool) -> int:
    """Write the corpus; returns bytes of text written."""
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} already exists (use --overwrite to replace it)")
    vocab = padded(list(pseudo_words(n_vocab)))
    cdf = zipf_cdf(n_vocab, exponent)
    tmp = temporary_sibling(out)
    written = 0
    try:
        if layout == "tree":
            tmp.mkdir(parents=True)
        opener = gzip.open if out.name.endswith(".gz") else open
        with (opener(tmp, "wb") if layout == "jsonl" else open(os.devnull, "wb")) as f:
            for first in range(0, n_docs, DOCS_PER_BLOCK):
                n = min(DOCS_PER_BLOCK, n_docs - first)
                texts = document_texts(first, n, vocab=vocab, cdf=cdf, n_words=n_words, n_junk=n_junk, seed=seed)
                for i, text in enumerate(texts, first):
                    written += len(text)
                    if layout == "jsonl":
                        f.write(b'{"id": "doc-%d", "text": %s}\n' % (i, json.dumps(text.decode()).encode()))
                    else:
                        folder = tmp / f"{i // FILES_PER_FOLDER // 1000:03d}" / f"{i // FILES_PER_FOLDER % 1000:03d}"
                        folder.mkdir(parents=True, exist_ok=True)
                        (folder / f"doc-{i}.txt").write_bytes(text + b"\n")
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
        raise
    return written


@click.command()
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--docs", "n_docs", type=click.IntRange(min=1), required=True, help="number of documents")
@click.option("--layout", type=click.Choice(["jsonl", "tree"]), default="jsonl", show_default=True,
              help="jsonl: {\"id\", \"text\"} lines, gzipped if OUT ends in .gz; "
                   "tree: a .txt per document in nested folders")
@click.option("--vocab", "n_vocab", type=click.IntRange(min=1), default=200_000, show_default=True,
              help="pseudo-words of the Zipfian vocabulary")
@click.option("--zipf-exponent", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True)
@click.option("--words", "n_words", type=click.IntRange(min=0), default=60, show_default=True,
              help="vocabulary tokens per document")
@click.option("--junk", "n_junk", type=click.IntRange(min=0), default=40, show_default=True,
              help="random-letter strings per document")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--overwrite", is_flag=True, help="replace OUT if it exists")
@user_errors
def main(out, n_docs, layout, n_vocab, zipf_exponent, n_words, n_junk, seed, overwrite):
    """Write an OCR-like corpus of N documents to OUT."""
    started = time.monotonic()
    written = write_corpus(out, layout, n_docs, n_vocab, zipf_exponent, n_words, n_junk, seed, overwrite)
    click.echo(f"wrote {out} ({layout}): {n_docs:,} documents, {written / 1e6:,.1f} MB of text "
               f"in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
