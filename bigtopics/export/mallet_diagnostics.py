"""diagnostics.xml: MALLET's --diagnostics-file (cc.mallet.topics.TopicModelDiagnostics.toXML), the
same fields computed the same way from the same counts, so that it is what MALLET writes for the
exported state (`train-topics --input-state state.gz --no-inference --diagnostics-file`,
docs/formats.md) and tools that read MALLET's diagnostics (dfrtopics' read_diagnostics, MALLET's
own viewers) take it:

    <model><topic id='k' tokens=... document_entropy=... word-length=... coherence=...
      uniform_dist=... corpus_dist=... eff_num_words=... token-doc-diff=... rank_1_docs=...
      allocation_ratio=... allocation_count=... exclusivity=...>
      <word rank=... count=... prob=... cumulative=... docs=... word-length=... coherence=...
        uniform_dist=... corpus_dist=... token-doc-diff=... exclusivity=...>word</word> ...

MALLET computes every field from one Gibbs state: its tokens per topic, its word-topic counts
(sorted by count, ties by the higher type index: IDSorter), its alphabet's size and its documents.
Here that state is state.gz's (export/state.py): the run's saved per-token topics of the documents
training visited, with MALLET's type indices, so it needs a run trained with --exclude-own. The
model's N[k, w] are the online estimate and differ from any one state's counts (topic_keys.tsv
and the other files have them). Two passes over the store and the saved topics, a block at a
time: the state's word-topic counts (at most K x V of them, like the model), then the documents'
side for the top words; the rest is K x MAX_WORDS^2. The number of words per topic is
--top-words, at most MAX_WORDS (a topic's present top words are a bitmask). Numbers print as
Java's %.4f does (half up, NaN, Infinity); words are XML-escaped.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from ..infer import posterior_mean
from .base import ExportContext, Writer
from .state import StateDocuments

MAX_WORDS = 64
DOC_PROPORTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)  # MALLET's DEFAULT_DOC_PROPORTIONS
TWO_PERCENT, THIRTY_PERCENT, FIFTY_PERCENT = 1, 5, 6
MERGE_ENTRIES = 1 << 22  # pending (word, topic) counts merged into the running ones past this


class StateCounts:
    """The state's word-topic counts (MALLET's typeTopicCounts), its tokens per word type and its
    alphabet, gathered block by block (first pass)."""

    def __init__(self, n_topics: int, n_words: int):
        self.n_topics = n_topics
        self.keys = np.zeros(0, np.int64)  # word * K + topic, ascending
        self.counts = np.zeros(0, np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_size = 0
        self.word_counts = np.zeros(n_words, np.int64)

    def add(self, words: np.ndarray, topics: np.ndarray) -> None:
        self.word_counts += np.bincount(words, minlength=len(self.word_counts))
        keys, counts = np.unique(words * self.n_topics + topics, return_counts=True)
        self._pending.append((keys, counts))
        self._pending_size += len(keys)
        if self._pending_size > max(MERGE_ENTRIES, len(self.keys)):
            self._merge()

    def _merge(self) -> None:
        keys = np.concatenate([self.keys] + [k for k, _ in self._pending])
        counts = np.concatenate([self.counts] + [c for _, c in self._pending])
        self._pending, self._pending_size = [], 0
        if not len(keys):
            return
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        firsts = np.flatnonzero(np.diff(keys, prepend=-1))
        self.keys, self.counts = keys[firsts], np.add.reduceat(counts, firsts)

    def finish(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(words, topics, counts) of every nonzero count, word-major."""
        self._merge()
        return self.keys // self.n_topics, self.keys % self.n_topics, self.counts


class DocumentStatistics:
    """TopicModelDiagnostics.collectDocumentStatistics over the state's documents (second pass):
    per topic the documents where it has tokens, where it is first, at each DOC_PROPORTIONS share,
    sum c log c, and the co-document counts of its top words (assigned to it) in `codocs` (K x n x
    n). `top` is K x n word ids; `alias[k, i]` the position among topic k's own top words of the
    word MALLET looks up in slot i: i itself, or for a slot past a topic's last word (a topic with
    fewer than n words) the position of type 0, which MALLET's int array holds there, or -1."""

    def __init__(self, n_topics: int, n_words: int, top: np.ndarray, alias: np.ndarray):
        n = top.shape[1]
        self.n_topics, self.n_top = n_topics, n
        self.alias = alias
        self.nonzero = np.zeros(n_topics, np.int64)
        self.rank1 = np.zeros(n_topics, np.int64)
        self.at_proportion = np.zeros((n_topics, len(DOC_PROPORTIONS)), np.int64)
        self.c_log_c = np.zeros(n_topics)
        self.codocs = np.zeros((n_topics, n, n), np.int64)
        real = alias == np.arange(n)[None, :]
        keys = (np.arange(n_topics, dtype=np.int64)[:, None] * n_words + top)[real]
        positions = np.broadcast_to(np.arange(n), top.shape)[real]
        order = np.argsort(keys)
        self._keys, self._positions = keys[order], positions[order]
        self._n_words = n_words

    def _top_position(self, topics: np.ndarray, words: np.ndarray) -> np.ndarray:
        """Each token's word's rank among its topic's top words, or -1."""
        if not len(self._keys):
            return np.full(len(words), -1)
        keys = topics * self._n_words + words
        at = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
        return np.where(self._keys[at] == keys, self._positions[at], -1)

    def add(self, docs: np.ndarray, words: np.ndarray, topics: np.ndarray, doc_lengths: np.ndarray,
            alpha: np.ndarray) -> None:
        """Tokens of the state's documents (doc numbers local to the block, word ids, topics)."""
        k = self.n_topics
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
        slots = self.alias[group_topic]
        bits = [np.where(slots[:, i] >= 0, (masks >> np.maximum(slots[:, i], 0).astype(np.uint64)) & np.uint64(1),
                         np.uint64(0)) for i in range(self.n_top)]
        for i in range(self.n_top):
            for j in range(i, self.n_top):
                both = (bits[i] & bits[j]).astype(bool)
                if both.any():
                    added = np.bincount(group_topic[both], minlength=k)
                    self.codocs[:, i, j] += added
                    if i != j:
                        self.codocs[:, j, i] += added


def _java(x: float, places: int = 4) -> str:
    """Java's String.format("%.4f") of a double: its exact value rounded half up."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return str(Decimal(x).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def _divide(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b)


def _java_length(word: str) -> int:
    """Java's String.length(): UTF-16 code units."""
    return len(word.encode("utf-16-le")) // 2


def sorted_topic_words(words, topics, counts, types, n_topics: int):
    """Topic-major (indptr, words, counts): each topic's words by decreasing count, ties by the
    higher MALLET type index, as MALLET's TreeSet of IDSorter orders them."""
    order = np.lexsort((-types[words], -counts, topics))
    indptr = np.zeros(n_topics + 1, np.int64)
    np.cumsum(np.bincount(topics, minlength=n_topics), out=indptr[1:])
    return indptr, words[order], counts[order].astype(np.float64)


def write_diagnostics(ctx: ExportContext, out: Path) -> None:
    model = ctx.model
    K, n = model.n_topics, min(ctx.options.top_words, MAX_WORDS)
    beta, alpha = model.eta, model.alpha_k
    documents = StateDocuments(ctx)
    gathered = StateCounts(K, model.n_words)
    for block in documents.blocks():
        gathered.add(block.words, block.topics)
    types, n_types = documents.types.copy(), documents.n_types
    words, topics, counts = gathered.finish()
    n_tokens, word_counts = int(gathered.word_counts.sum()), gathered.word_counts
    tokens = np.bincount(topics, weights=counts, minlength=K)
    beta_sum = beta * n_types
    indptr, sorted_words, sorted_counts = sorted_topic_words(words, topics, counts, types, K)
    limits = np.minimum(np.diff(indptr), n)
    type0 = int(np.flatnonzero(types == 0)[0]) if n_types else 0
    top = np.full((K, n), type0, np.int64)
    top_counts = np.zeros((K, n))
    alias = np.tile(np.arange(n), (K, 1))
    for k in range(K):
        top[k, :limits[k]] = sorted_words[indptr[k]:indptr[k] + limits[k]]
        top_counts[k, :limits[k]] = sorted_counts[indptr[k]:indptr[k] + limits[k]]
        at_type0 = np.flatnonzero(top[k, :limits[k]] == type0)
        alias[k, limits[k]:] = at_type0[0] if len(at_type0) else -1
    stats = DocumentStatistics(K, model.n_words, top, alias)
    for block in documents.blocks():
        stats.add(block.token_docs(), block.words, block.topics, block.lengths, alpha)
    # exclusivity's denominator per word: sum_j (beta + c_jw) / (betaSum + T_j)
    sum_default = float((beta / (beta_sum + tokens)).sum())
    sum_probs = sum_default + np.bincount(words, weights=counts / (beta_sum + tokens[topics]),
                                          minlength=model.n_words)
    vocab = ctx.vocab_text
    lines = ['<?xml version="1.0" encoding="UTF-8"?>\n<model>\n']
    for k in range(K):
        limit, t = int(limits[k]), tokens[k]
        c_all = sorted_counts[indptr[k]:indptr[k + 1]]
        w_all = sorted_words[indptr[k]:indptr[k + 1]]
        c = top_counts[k]
        names = [str(vocab[w]) for w in top[k, :limit]]
        p_all = _divide(c_all, t)
        uniform_words = _divide(c, t) * np.log(_divide(c * n_types, t))
        corpus_words = _divide(c, t) * np.log(_divide(n_tokens / t * c, word_counts[top[k]]))
        codocs = stats.codocs[k]
        docs = np.where(np.arange(n) < limit, np.diag(codocs), 0)
        coherence_words = np.array([min([0.0] + [math.log((codocs[r, col] + beta) / (codocs[col, col] + beta))
                                                 for col in range(r)]) for r in range(n)])
        coherence = sum(math.log((codocs[r, col] + beta) / (codocs[col, col] + beta))
                        for r in range(n) for col in range(r))
        p, q = _divide(c, c.sum()), _divide(docs, docs.sum())
        mean = 0.5 * (p + q)
        with np.errstate(divide="ignore", invalid="ignore"):
            diff_words = (np.where(p > 0, 0.5 * p * np.log(p / mean), 0.0)
                          + np.where(q > 0, 0.5 * q * np.log(q / mean), 0.0))
        exclusive_words = ((beta + c) / (beta_sum + t)) / sum_probs[top[k]]
        lengths = np.array([_java_length(w) for w in names] + [0] * (n - limit), np.float64)
        topic_scores = {
            "tokens": t,
            "document_entropy": float(_divide(-stats.c_log_c[k], t) + np.log(t)) if t > 0 else math.nan,
            "word-length": lengths.sum() / n,
            "coherence": coherence,
            "uniform_dist": float(np.sum(p_all * np.log(_divide(c_all * n_types, t)))),
            "corpus_dist": float(np.sum(p_all * np.log(_divide(n_tokens / t * c_all, word_counts[w_all])))),
            "eff_num_words": float(_divide(1.0, np.sum(p_all ** 2))),
            "token-doc-diff": float(diff_words.sum()),
            "rank_1_docs": float(_divide(stats.rank1[k], stats.nonzero[k])),
            "allocation_ratio": float(_divide(stats.at_proportion[k, FIFTY_PERCENT],
                                              stats.at_proportion[k, TWO_PERCENT])),
            "allocation_count": float(_divide(stats.at_proportion[k, THIRTY_PERCENT], stats.nonzero[k])),
            "exclusivity": float(exclusive_words[:limit].sum() / n),
        }
        word_scores = {"word-length": lengths, "coherence": coherence_words, "uniform_dist": uniform_words,
                       "corpus_dist": corpus_words, "token-doc-diff": diff_words, "exclusivity": exclusive_words}
        lines.append(f"<topic id='{k}'" + "".join(f" {name}='{_java(float(v))}'" for name, v in topic_scores.items())
                     + ">\n")
        cumulative = 0.0
        for r in range(limit):
            probability = float(_divide(c[r], t))
            cumulative += probability
            scores = "".join(f" {name}='{_java(float(v[r]))}'" for name, v in word_scores.items())
            lines.append(f"<word rank='{r + 1}' count='{_java(c[r], 0)}' prob='{_java(probability, 5)}' "
                         f"cumulative='{_java(cumulative, 5)}' docs='{docs[r]}'{scores}>{escape(names[r])}</word>\n")
        lines.append("</topic>\n")
    lines.append("</model>\n\n")  # MALLET println()s the XML, which ends in a line break
    (out / "diagnostics.xml").write_text("".join(lines), encoding="utf-8")


WRITERS = (Writer(("diagnostics.xml",), write_diagnostics, needs="assignments", option="diagnostics"),)
