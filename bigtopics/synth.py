"""Synthetic corpora drawn from the LDA generative process, with their true topics.

`write_corpus` streams documents block by block to a bigtopics store or to JSON Lines text, so a
corpus of billions of tokens never sits in memory; the kernels are in kernels/synth.py. Every
document draws from its own random stream keyed by (seed, document index), so the output depends
on the seed and the corpus settings only, never on the block size or the number of threads.

Memory: the K x V topic-word matrix is held dense, as float64 while it is drawn and saved, then
as alias tables (uint64): 8 K V bytes each, 1.6 GB at K = 2000 topics and V = 100,000 words, the
largest the generator is meant for (both exist while the tables are built). Besides that, two
blocks of about `tokens_per_block` tokens in flight (one written while the next is drawn), each
with its CSR rows and sort keys: under 100 bytes a token, about 0.7 GB at the default.

Word ids are ordered by *expected* frequency, sum_k E[theta_k] beta[k, w], not by the frequency
observed in the sample (which is only known at the end); the store records this as
attrs["vocab_order"] = "expected_frequency". Its term_counts and doc_freqs are the exact observed
counts. Words are pseudo-words of consonant-vowel syllables ("bakotu"): letters only, at least six
of them, without the vowel e or y, so that the default tokenizer keeps each one as one token and
none is an English stop word.

Next to the output, `<out>.truth/` holds beta.npy (K x V float64, columns = word ids), alpha.npy
(the K alpha_k, float64), vocab.txt (word id -> pseudo-word), params.json, and for corpora of at
most THETA_MAX_DOCS documents theta.npy (n_docs x K float32, the true document-topic proportions).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from .atomic import fsync_dir, publish_dir, temporary_sibling
from .kernels.synth import add_word_statistics, document_lengths, draw_documents, fill_alias_tables
from .progress import Progress
from .store import DEFAULT_ENTRIES_PER_CHUNK, StoreWriter, count_dtype_for, index_dtype_for

THETA_MAX_DOCS = 100_000
TOKENS_PER_BLOCK = 1 << 22
CONSONANTS = "bdfghjklmnprstvz"
VOWELS = "aiou"
MIN_SYLLABLES = 3
FORMATS = ("store", "jsonl")
# The Dirichlet's base measure over the words: "uniform" is LDA's symmetric prior; "zipf" centres
# every topic on one Zipfian distribution, so that all topics give the frequent words high
# probability, as function words and spelling are shared by every topic of a real library.
BASE_MEASURES = ("uniform", "zipf")


@dataclass(frozen=True)
class CorpusSpec:
    """The generative model: K topics over V words, document lengths, Dirichlet priors, seed."""

    n_docs: int
    n_topics: int
    n_words: int
    mean_length: float
    alpha: float = 0.1
    eta: float = 0.01
    seed: int = 0
    base: str = "uniform"  # a name in BASE_MEASURES
    zipf_exponent: float = 1.0  # base "zipf": m_w proportional to (w + 1)^-zipf_exponent
    alpha_skew: float = 0.0  # alpha_k proportional to (k + 1)^-alpha_skew, summing to K alpha; 0: symmetric

    def validate(self) -> None:
        checks = [
            (self.n_docs >= 1, "the number of documents must be at least 1"),
            (self.n_topics >= 1, "the number of topics must be at least 1"),
            (2 <= self.n_words < 2**31, "the vocabulary size must be between 2 and 2**31 - 1"),
            (self.mean_length >= 1, "the mean document length must be at least 1"),
            (self.alpha > 0 and self.eta > 0, "alpha and eta must be positive"),
            (0 <= self.seed < 2**63, "the seed must be a non-negative 63-bit integer"),
            (self.base in BASE_MEASURES,
             f"unknown base measure {self.base!r}; choose one of {', '.join(BASE_MEASURES)}"),
            (0 < self.zipf_exponent <= 10, "the Zipf exponent must be in (0, 10]"),
            (0 <= self.alpha_skew <= 10, "the alpha skew must be in [0, 10]"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


@dataclass
class DocumentBlock:
    """Documents first_doc + i: words tokens[offsets[i]:offsets[i + 1]] in drawn order, drawn
    from topics[offsets[i]:offsets[i + 1]]; theta (n_docs x K) only when asked for."""

    first_doc: int
    offsets: np.ndarray
    topics: np.ndarray
    tokens: np.ndarray
    theta: np.ndarray | None

    @property
    def n_docs(self) -> int:
        return len(self.offsets) - 1


def document_topic_prior(spec: CorpusSpec) -> float | np.ndarray:
    """The documents' Dirichlet prior over topics: the number alpha (symmetric), or with a skew S
    alpha_k = K alpha (k + 1)^-S / sum_j (j + 1)^-S, so topic 0 is the most used."""
    if spec.alpha_skew == 0:
        return float(spec.alpha)
    weights = np.arange(1, spec.n_topics + 1, dtype=np.float64) ** -spec.alpha_skew
    return spec.n_topics * spec.alpha * weights / weights.sum()


def base_measure(spec: CorpusSpec) -> np.ndarray:
    """m (V, sums to 1): the mean of every topic's Dirichlet; uniform, or Zipfian m_w ~ (w + 1)^-s."""
    if spec.base == "uniform":
        return np.full(spec.n_words, 1.0 / spec.n_words)
    m = np.arange(1, spec.n_words + 1, dtype=np.float64) ** -spec.zipf_exponent
    return m / m.sum()


def draw_topics(spec: CorpusSpec) -> np.ndarray:
    """beta: K x V, rows ~ Dirichlet(V eta m) for the base measure m (base_measure: with the
    uniform base, Dirichlet(eta)), columns ordered by descending expected frequency."""
    rng = np.random.default_rng(spec.seed)
    beta = np.empty((spec.n_topics, spec.n_words))
    # The concentration V eta is the same for every base: eta stays the mean parameter per word.
    concentration = spec.eta if spec.base == "uniform" else spec.n_words * spec.eta * base_measure(spec)
    for k in range(spec.n_topics):  # row by row: no K x V temporaries
        beta[k] = dirichlet(rng, concentration, spec.n_words)
    # E[theta_k] = alpha_k / alpha_0: under a symmetric alpha every topic is equally used.
    prior = document_topic_prior(spec)
    order = np.argsort(-(beta.sum(axis=0) if np.ndim(prior) == 0 else prior @ beta), kind="stable")
    for k in range(spec.n_topics):
        beta[k] = beta[k, order]
    return beta


def dirichlet(rng: np.random.Generator, concentration, size: int) -> np.ndarray:
    """A draw from Dirichlet(concentration, ..., concentration) over `size` outcomes (or from
    Dirichlet(concentration) if it is an array of `size` parameters).

    Normalised Gamma variates, taken in log space as log Gamma(a + 1) + log(U) / a: for the small
    concentrations of sparse priors the variates themselves underflow, possibly all of them.
    (Faster than Generator.dirichlet, which switches to stick-breaking for small a.)
    """
    log_g = np.log(rng.standard_gamma(concentration + 1.0, size))
    log_g += np.log(rng.random(size)) / concentration
    weights = np.exp(log_g - log_g.max())
    return weights / weights.sum()


def pseudo_words(n_words: int) -> np.ndarray:
    """n_words distinct lowercase pseudo-words of MIN_SYLLABLES or more consonant-vowel syllables.

    Word i spells, in base 64 over the syllables, a bijective scramble of i (an affine map with
    an odd multiplier modulo 64^n), so that neighbouring ids do not share their endings.
    """
    syllables = [c + v for c in CONSONANTS for v in VOWELS]
    base = len(syllables)
    n_syllables = MIN_SYLLABLES
    while base**n_syllables < n_words:
        n_syllables += 1
    modulus = base**n_syllables
    multiplier, shift = 0x9E3779B97F4A7C15 % modulus | 1, 0x5DEECE66D % modulus
    words = []
    for i in range(n_words):
        code = (i * multiplier + shift) % modulus
        parts = []
        for _ in range(n_syllables):
            code, digit = divmod(code, base)
            parts.append(syllables[digit])
        words.append("".join(parts))
    return np.array(words, dtype=object)


def block_rows(block: DocumentBlock) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The block's documents as CSR (indptr, word ids ascending within a row, counts)."""
    # One sort of (document, word) keys: NumPy's vectorised sort beats sorting row by row.
    keys = np.repeat(np.arange(block.n_docs, dtype=np.int64) << 32, np.diff(block.offsets))
    keys |= block.tokens
    keys.sort()
    starts = np.flatnonzero(np.diff(keys, prepend=-1))
    counts = np.diff(starts, append=len(keys))
    distinct = keys[starts]
    indptr = np.zeros(block.n_docs + 1, np.int64)
    np.cumsum(np.bincount(distinct >> 32, minlength=block.n_docs), out=indptr[1:])
    return indptr, (distinct & 0xFFFFFFFF).astype(np.int32), counts


def alias_tables(beta: np.ndarray) -> np.ndarray:
    """The topics' packed alias tables (K x V uint64) for kernels.synth.draw_documents."""
    # Allocated by NumPy, which asks Linux for huge pages: random reads into a table of
    # gigabytes otherwise miss the TLB on almost every token.
    table = np.empty(beta.shape, np.uint64)
    fill_alias_tables(beta, table)
    return table


def docs_per_block(spec: CorpusSpec, tokens_per_block: int) -> int:
    return max(1, int(tokens_per_block // spec.mean_length))


def length_summary(spec: CorpusSpec, tokens_per_block: int = TOKENS_PER_BLOCK) -> tuple[int, int]:
    """(total tokens, longest document) of the corpus, from the length streams alone."""
    step = 8 * docs_per_block(spec, tokens_per_block)  # a length is 8 bytes, not 8 * mean tokens
    n_tokens = longest = 0
    for first in range(0, spec.n_docs, step):
        lengths = document_lengths(spec.seed, first, min(step, spec.n_docs - first), float(spec.mean_length))
        n_tokens += int(lengths.sum())
        longest = max(longest, int(lengths.max()))
    return n_tokens, longest


def iter_document_blocks(
    spec: CorpusSpec,
    word_alias: np.ndarray,
    tokens_per_block: int = TOKENS_PER_BLOCK,
    with_theta: bool = False,
) -> Iterator[DocumentBlock]:
    """Draw the corpus block by block; word_alias = kernels.synth.alias_tables(beta)."""
    step = docs_per_block(spec, tokens_per_block)
    for first in range(0, spec.n_docs, step):
        n = min(step, spec.n_docs - first)
        lengths = document_lengths(spec.seed, first, n, float(spec.mean_length))
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        topics = np.empty(offsets[-1], np.int32)
        tokens = np.empty(offsets[-1], np.int32)
        theta = np.empty((n if with_theta else 0, spec.n_topics), np.float32)
        draw_documents(word_alias, document_topic_prior(spec), spec.seed, first, offsets, topics, tokens, theta)
        yield DocumentBlock(first, offsets, topics, tokens, theta if with_theta else None)


def truth_path(out: str | os.PathLike) -> Path:
    return Path(str(out) + ".truth")


def topic_recovery(model, truth_dir: str | os.PathLike, topics_per_block: int = 64) -> np.ndarray:
    """For every true topic of a synthetic corpus, the highest cosine similarity between its
    p(w|k) (truth_dir/beta.npy) and any learned topic's p(w|k) (a `bigtopics.model.Model`).

    What benchmarks/bench_scale.py reports (tests/naive.py holds the dense reference): 1 is a
    perfect copy; a topic that only matches the corpus unigram scores about 0.05 on the tools'
    default corpora. Learned topics are made dense a block at a time; the truth is held as float32
    (4 K V bytes).
    """
    truth = np.load(Path(truth_dir) / "beta.npy", mmap_mode="r")
    if truth.shape[1] != model.n_words:
        raise ValueError(f"the true topics have {truth.shape[1]} words, the model {model.n_words}")
    truth = np.asarray(truth, np.float32)
    truth /= np.linalg.norm(truth, axis=1, keepdims=True)
    best = np.full(len(truth), -np.inf, np.float32)
    for first in range(0, model.n_topics, topics_per_block):
        learned = np.stack([model.word_probabilities(k)
                            for k in range(first, min(first + topics_per_block, model.n_topics))]).astype(np.float32)
        learned /= np.linalg.norm(learned, axis=1, keepdims=True)
        np.maximum(best, (truth @ learned.T).max(axis=1), out=best)
    return best.astype(np.float64)


def write_corpus(
    spec: CorpusSpec,
    out: str | os.PathLike,
    fmt: str = "store",
    *,
    overwrite: bool = False,
    quiet: bool = True,
    tokens_per_block: int = TOKENS_PER_BLOCK,
    entries_per_chunk: int = DEFAULT_ENTRIES_PER_CHUNK,
) -> dict:
    """Draw a corpus into `out` (a store, or JSON Lines, gzipped if the name ends in .gz) and
    its true parameters into `<out>.truth/`; both appear only once complete.

    Returns a summary: documents, tokens, seconds and tokens per second.
    """
    spec.validate()
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    out, truth = Path(out), truth_path(out)
    for path in (out, truth):
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} already exists (use --overwrite to replace it)")
    started = time.monotonic()
    truth_tmp = temporary_sibling(truth)
    truth_tmp.mkdir(parents=True)
    try:
        beta = draw_topics(spec)
        vocab = pseudo_words(spec.n_words)
        np.save(truth_tmp / "beta.npy", beta)
        np.save(truth_tmp / "alpha.npy", np.broadcast_to(document_topic_prior(spec), (spec.n_topics,)))
        (truth_tmp / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        word_alias = alias_tables(beta)
        del beta  # saved; at most one K x V matrix is kept while drawing
        n_tokens, longest = length_summary(spec, tokens_per_block)
        theta = None
        if spec.n_docs <= THETA_MAX_DOCS:
            theta = np.lib.format.open_memmap(
                truth_tmp / "theta.npy", mode="w+", dtype=np.float32, shape=(spec.n_docs, spec.n_topics)
            )
        blocks = iter_document_blocks(spec, word_alias, tokens_per_block, theta is not None)
        prepared = _read_ahead(_prepared(blocks, theta, with_rows=fmt == "store"))
        with Progress("synth", total=n_tokens, unit="tokens", quiet=quiet) as progress:
            if fmt == "store":
                extra = _write_store(spec, out, prepared, vocab, longest, overwrite, entries_per_chunk, progress)
            else:
                extra = _write_jsonl(out, prepared, vocab, progress)
        if theta is not None:
            theta.flush()
            del theta
        seconds = time.monotonic() - started
        summary = {
            "n_docs": spec.n_docs,
            "n_tokens": n_tokens,
            **extra,
            "seconds": round(seconds, 3),
            "tokens_per_second": round(n_tokens / seconds) if seconds > 0 else None,
        }
        params = {
            **asdict(spec),
            "format": fmt,
            "output": out.name,
            "vocab_order": "expected_frequency",
            "theta_saved": spec.n_docs <= THETA_MAX_DOCS,
            **summary,
        }
        (truth_tmp / "params.json").write_text(json.dumps(params, indent=2) + "\n", encoding="utf-8")
        publish_dir(truth_tmp, truth, overwrite)
    except BaseException:
        shutil.rmtree(truth_tmp, ignore_errors=True)
        raise
    return summary


def _prepared(blocks: Iterator[DocumentBlock], theta: np.ndarray | None, with_rows: bool):
    """(block, its CSR rows if with_rows), after copying the block's theta to the truth file."""
    for block in blocks:
        if theta is not None:
            theta[block.first_doc : block.first_doc + block.n_docs] = block.theta
        yield block, block_rows(block) if with_rows else None


def _read_ahead(items: Iterator):
    """Yield from items while a worker thread computes the next one.

    Drawing (numba, nogil) and sorting (NumPy) release the GIL, so the next block is drawn while
    this one is compressed and written.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(next, items, None)
        while (item := pending.result()) is not None:
            pending = pool.submit(next, items, None)
            yield item


def _write_store(spec, out, prepared, vocab, longest, overwrite, entries_per_chunk, progress) -> dict:
    term_counts = np.zeros(spec.n_words, np.int64)
    doc_freqs = np.zeros(spec.n_words, np.int64)
    writer = None
    try:
        for block, (indptr, indices, counts) in prepared:
            if writer is None:
                # One indptr chunk should cover about one chunk of entries: measure the first block.
                entries_per_doc = max(1.0, indptr[-1] / block.n_docs)
                writer = StoreWriter(
                    out,
                    index_dtype=index_dtype_for(spec.n_words),
                    count_dtype=count_dtype_for(longest),  # a count never exceeds its document's length
                    entries_per_chunk=entries_per_chunk,
                    docs_per_chunk=max(1, int(entries_per_chunk / entries_per_doc)),
                    overwrite=overwrite,
                )
            add_word_statistics(indices, counts, term_counts, doc_freqs)
            doc_ids = np.arange(block.first_doc, block.first_doc + block.n_docs).astype(str)
            writer.append(indptr, indices, counts, doc_ids)
            progress.update(len(block.tokens))
        writer.commit(
            vocab,
            term_counts,
            doc_freqs,
            attrs={"vocab_order": "expected_frequency", "settings": {"synthetic": asdict(spec)}},
        )
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return {"nnz": writer.nnz}


def _write_jsonl(out: Path, prepared, vocab: np.ndarray, progress: Progress) -> dict:
    tmp = temporary_sibling(out)
    try:
        # Level 1: these files are scratch input for tests and benchmarks; speed over size.
        stream = gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) if out.name.endswith(".gz") \
            else open(tmp, "w", encoding="utf-8")
        with stream:
            for block, _ in prepared:
                words = vocab[block.tokens]
                bounds = block.offsets
                # Ids are digits and pseudo-words letters: nothing needs JSON escaping.
                stream.write("".join(
                    f'{{"id": "{block.first_doc + i}", "text": "{" ".join(words[bounds[i]:bounds[i + 1]])}"}}\n'
                    for i in range(block.n_docs)
                ))
                progress.update(len(block.tokens))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(out.parent)
    return {}
