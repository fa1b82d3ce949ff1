"""diagnostics.xml: MALLET's --diagnostics-file (cc.mallet.topics.TopicModelDiagnostics.toXML), the
same fields computed the same way, so tools that read MALLET's diagnostics (dfrtopics'
read_diagnostics, MALLET's own viewers) take it:

    <model><topic id='k' tokens=... document_entropy=... word-length=... coherence=...
      uniform_dist=... corpus_dist=... eff_num_words=... token-doc-diff=... rank_1_docs=...
      allocation_ratio=... allocation_count=... exclusivity=...>
      <word rank=... count=... prob=... cumulative=... docs=... word-length=... coherence=...
        uniform_dist=... corpus_dist=... token-doc-diff=... exclusivity=...>word</word> ...

MALLET computes them from one Gibbs state. Here the words' side (each topic's words and counts
N[k, w], tokens per topic N[k], exclusivity) is the model's, as in topic_keys.tsv, and the
documents' side (document_entropy, coherence's co-document counts, token-doc-diff, rank_1_docs,
allocation_*, the corpus counts of corpus_dist) comes from the run's saved per-token topics, the
same as state.gz: so it needs a run trained with --exclude-own. Coherence is over the documents
where both words were assigned to the topic, with MALLET's smoothing beta (eta). The number of
words per topic is --top-words, at most MAX_WORDS (a topic's present top words are a bitmask).
One pass over the store and the saved topics, a block at a time; memory is K x MAX_WORDS^2.
Numbers print as Java's %.4f does (NaN, Infinity); words are XML-escaped.
"""

from __future__ import annotations

import math
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from ..infer import posterior_mean
from ..rundir import ASSIGNMENTS_DIR
from .base import ExportContext, Writer, stored_counts, topic_norms
from .state import training_store

MAX_WORDS = 64
DOC_PROPORTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)  # MALLET's DEFAULT_DOC_PROPORTIONS
TWO_PERCENT, THIRTY_PERCENT, FIFTY_PERCENT = 1, 5, 6


class DocumentStatistics:
    """TopicModelDiagnostics.collectDocumentStatistics over the saved topics: per topic the
    documents where it has tokens, where it is first, at each DOC_PROPORTIONS share, sum c log c,
    and the co-document counts of its top words (assigned to it) in `codocs` (K x n x n)."""

    def __init__(self, n_topics: int, n_words: int, top: np.ndarray):
        n = top.shape[1]
        self.n_topics, self.n_top = n_topics, n
        self.nonzero = np.zeros(n_topics, np.int64)
        self.rank1 = np.zeros(n_topics, np.int64)
        self.at_proportion = np.zeros((n_topics, len(DOC_PROPORTIONS)), np.int64)
        self.c_log_c = np.zeros(n_topics)
        self.codocs = np.zeros((n_topics, n, n), np.int64)
        self.word_counts = np.zeros(n_words, np.int64)
        self.n_tokens = 0
        keys = np.arange(n_topics, dtype=np.int64)[:, None] * n_words + top
        self._order = np.argsort(keys, axis=None)
        self._keys = keys.ravel()[self._order]
        self._n_words = n_words

    def _top_position(self, topics: np.ndarray, words: np.ndarray) -> np.ndarray:
        """Each token's word's rank among its topic's top words, or -1."""
        keys = topics * self._n_words + words
        at = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
        return np.where(self._keys[at] == keys, self._order[at] % self.n_top, -1)

    def add(self, docs: np.ndarray, words: np.ndarray, topics: np.ndarray, doc_lengths: np.ndarray,
            alpha: np.ndarray) -> None:
        """Tokens of visited documents (doc numbers local to the block, word ids, topics)."""
        k = self.n_topics
        self.n_tokens += len(words)
        self.word_counts += np.bincount(words, minlength=len(self.word_counts))
        pairs, counts = np.unique(docs * k + topics, return_counts=True)
        doc, topic = pairs // k, pairs % k
        self.nonzero += np.bincount(topic, minlength=k)
        self.c_log_c += np.bincount(topic, counts * np.log(counts), minlength=k)
        first = np.lexsort((topic, -counts, doc))  # per document the largest count, the lowest topic on ties
        starts = first[np.flatnonzero(np.diff(doc[first], prepend=-1))]
        self.rank1 += np.bincount(topic[starts], minlength=k)
        share = posterior_mean(alpha, k, topic, counts, doc_lengths[doc])
        for i, threshold in enumerate(DOC_PROPORTIONS):
            self.at_proportion[:, i] += np.bincount(topic[share >= threshold], minlength=k)
        position = self._top_position(topics, words)
        hit = position >= 0
        groups, inverse = np.unique(docs[hit] * k + topics[hit], return_inverse=True)
        masks = np.zeros(len(groups), np.uint64)
        np.bitwise_or.at(masks, inverse, np.left_shift(np.uint64(1), position[hit].astype(np.uint64)))
        group_topic = groups % k
        bits = [(masks >> np.uint64(i)) & np.uint64(1) for i in range(self.n_top)]
        for i in range(self.n_top):
            for j in range(i, self.n_top):
                both = (bits[i] & bits[j]).astype(bool)
                if both.any():
                    added = np.bincount(group_topic[both], minlength=k)
                    self.codocs[:, i, j] += added
                    if i != j:
                        self.codocs[:, j, i] += added


def collect(ctx: ExportContext, top: np.ndarray) -> DocumentStatistics:
    model = ctx.model
    folder = ctx.run / ASSIGNMENTS_DIR
    saved = np.load(folder / "topics.npy", mmap_mode="r")
    offsets = np.load(folder / "token_offsets.npy", mmap_mode="r")
    store = training_store(ctx)
    unvisited = np.iinfo(saved.dtype).max
    stats = DocumentStatistics(model.n_topics, model.n_words, top)
    alpha = model.alpha_k
    for block in store.iter_blocks():
        lo, hi = int(offsets[block.start]), int(offsets[block.start + block.n_docs])
        topics = np.asarray(saved[lo:hi]).astype(np.int64)
        lengths = block.doc_lengths.astype(np.int64)
        docs = np.repeat(np.arange(block.n_docs), lengths)
        words = np.repeat(block.indices.astype(np.int64), block.data.astype(np.int64))
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        visited = np.zeros(block.n_docs, bool)
        visited[lengths > 0] = topics[starts[lengths > 0]] != unvisited
        keep = visited[docs]
        stats.add(docs[keep], words[keep], topics[keep], lengths, alpha)
    return stats


def _java(x: float) -> str:
    """Java's String.format("%.4f") of a double."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return f"{x:.4f}"


def _divide(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b)


def write_diagnostics(ctx: ExportContext, out: Path) -> None:
    model = ctx.model
    n = min(ctx.options.top_words, MAX_WORDS)
    top = np.stack([t[:n] for t in ctx.top])
    stats = collect(ctx, top)
    tokens, beta, n_words = model.topic_totals(), model.eta, model.n_words
    vocab = [str(w) for w in model.vocab]
    norms = topic_norms(model)
    # exclusivity's denominator per top word: sum_j p(w | j), smoothing included
    top_words = np.unique(top)
    indptr, row_topics, row_values = model.rows(top_words)
    sum_probs = np.full(len(top_words), (beta / norms).sum())
    np.add.at(sum_probs, np.repeat(np.arange(len(top_words)), np.diff(indptr)), row_values / norms[row_topics])
    lines = ['<?xml version="1.0" encoding="UTF-8"?>\n<model>\n']
    for k in range(model.n_topics):
        words, values = model.topic_entries(k)
        counts = stored_counts(model, k, top[k], (words, values))
        t = tokens[k]
        p_all = _divide(values, t)
        uniform_words = _divide(counts, t) * np.log(_divide(counts * n_words, t))
        corpus_words = _divide(counts, t) * np.log(_divide(stats.n_tokens * counts, t * stats.word_counts[top[k]]))
        codocs = stats.codocs[k]
        docs = np.diag(codocs)
        coherence_words = np.array([min([0.0] + [math.log((codocs[r, c] + beta) / (codocs[c, c] + beta))
                                                 for c in range(r)]) for r in range(n)])
        coherence = sum(math.log((codocs[r, c] + beta) / (codocs[c, c] + beta)) for r in range(n) for c in range(r))
        p, q = _divide(counts, counts.sum()), _divide(docs, docs.sum())
        mean = 0.5 * (p + q)
        with np.errstate(divide="ignore", invalid="ignore"):
            diff_words = (np.where(p > 0, 0.5 * p * np.log(p / mean), 0.0)
                          + np.where(q > 0, 0.5 * q * np.log(q / mean), 0.0))
        exclusive_words = ((beta + counts) / norms[k]) / sum_probs[np.searchsorted(top_words, top[k])]
        lengths = np.array([len(vocab[w]) for w in top[k]], np.float64)
        topic_scores = {
            "tokens": t,
            "document_entropy": float(_divide(-stats.c_log_c[k], t) + np.log(t)) if t > 0 else math.nan,
            "word-length": lengths.sum() / n,
            "coherence": coherence,
            "uniform_dist": float(np.sum(p_all * np.log(_divide(values * n_words, t)))),
            "corpus_dist": float(np.sum(p_all * np.log(_divide(stats.n_tokens * values,
                                                               t * stats.word_counts[words])))),
            "eff_num_words": float(_divide(1.0, np.sum(p_all ** 2))),
            "token-doc-diff": float(diff_words.sum()),
            "rank_1_docs": float(_divide(stats.rank1[k], stats.nonzero[k])),
            "allocation_ratio": float(_divide(stats.at_proportion[k, FIFTY_PERCENT],
                                              stats.at_proportion[k, TWO_PERCENT])),
            "allocation_count": float(_divide(stats.at_proportion[k, THIRTY_PERCENT], stats.nonzero[k])),
            "exclusivity": float(exclusive_words.sum() / n),
        }
        word_scores = {"word-length": lengths, "coherence": coherence_words, "uniform_dist": uniform_words,
                       "corpus_dist": corpus_words, "token-doc-diff": diff_words, "exclusivity": exclusive_words}
        lines.append(f"<topic id='{k}'" + "".join(f" {name}='{_java(float(v))}'" for name, v in topic_scores.items())
                     + ">\n")
        cumulative = 0.0
        for r in range(n):
            probability = float(_divide(counts[r], t))
            cumulative += probability
            scores = "".join(f" {name}='{_java(float(v[r]))}'" for name, v in word_scores.items())
            lines.append(f"<word rank='{r + 1}' count='{counts[r]:.0f}' prob='{probability:.5f}' "
                         f"cumulative='{cumulative:.5f}' docs='{docs[r]}'{scores}>{escape(vocab[top[k, r]])}</word>\n")
        lines.append("</topic>\n")
    lines.append("</model>\n")
    (out / "diagnostics.xml").write_text("".join(lines), encoding="utf-8")


WRITERS = (Writer(("diagnostics.xml",), write_diagnostics, needs="assignments", option="diagnostics"),)
