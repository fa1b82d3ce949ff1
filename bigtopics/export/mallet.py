"""MALLET's text files, as `mallet train-topics` (cc.mallet.topics.tui.TopicTrainer and
ParallelTopicModel in MALLET 2.0.8+) writes them, so MALLET's readers take them unchanged:

  topic_keys.tsv          --output-topic-keys: "topic <TAB> alpha_k <TAB> top words"
  word_topic_counts.txt   --word-topic-counts-file: "type word topic:count ..." with the counts
                          N[k, w] rounded, largest first, zeros left out
  topic_word_weights.txt  --topic-word-weights-file (opt-in: K x V lines): "topic <TAB> word
                          <TAB> eta + N[k, w]" for every topic and every word, topic by topic
  doc_topics.txt          --output-doc-topics. By default (threshold 0) MALLET's dense form,
                          printDenseDocumentTopics: no header, "doc <TAB> name <TAB> theta_0 <TAB>
                          ... theta_{K-1}" in topic order. With --doc-topics-threshold T > 0 the
                          sparse form, printDocumentTopics: a header "#doc name topic proportion
                          ...", then "doc <TAB> name <TAB> topic <TAB> proportion <TAB> ..." by
                          decreasing proportion, those >= T, at most --doc-topics-max of them,
                          each pair followed by a tab as MALLET writes it.

A document's proportions are theta[d, k] = (alpha_k + n_dk) / (N_d + sum_k alpha_k), MALLET's formula,
with n_dk from `bigtopics infer` (averaged over its saved sweeps). doc_topics.zarr leaves out the
topics a document was not assigned (theta = alpha_k / (N_d + sum alpha), written back exactly here),
so with infer's default --threshold 0 every number is the inferred one and a row sums to 1, as
MALLET's do. Document topics inferred with a threshold t > 0 have lost the topics below it, which
no file can give back: the dense form and a sparse one below t are then left out with a notice
(left_out_below); the sparse form at t or above holds only kept topics and is written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import ExportContext, Writer
from .text import text_ids

WORDS_PER_WRITE = 1 << 14
DENSE_CELLS_PER_PASS = 1 << 22  # documents x topics held at once by the doc_topics.txt writers


def write_topic_keys(ctx: ExportContext, out: Path) -> None:
    vocab, alpha = ctx.vocab_text, ctx.model.alpha_k
    with open(out / "topic_keys.tsv", "w", encoding="utf-8") as f:
        for k, words in enumerate(ctx.top):
            f.write(f"{k}\t{alpha[k]:g}\t{' '.join(vocab[words])}\n")


def write_word_topic_counts(ctx: ExportContext, out: Path) -> None:
    model, vocab = ctx.model, ctx.vocab_text
    with open(out / "word_topic_counts.txt", "w", encoding="utf-8") as f:
        for lo in range(0, model.n_words, WORDS_PER_WRITE):
            words = np.arange(lo, min(lo + WORDS_PER_WRITE, model.n_words))
            indptr, topics, values = model.rows(words)
            counts = np.rint(values).astype(np.int64)
            lines = []
            for i, w in enumerate(words):
                t, c = topics[indptr[i] : indptr[i + 1]], counts[indptr[i] : indptr[i + 1]]
                order = np.lexsort((t, -c))
                pairs = " ".join(f"{t[j]}:{c[j]}" for j in order if c[j] > 0)
                lines.append(f"{w} {vocab[w]}" + (f" {pairs}" if pairs else "") + "\n")
            f.write("".join(lines))


def write_topic_word_weights(ctx: ExportContext, out: Path) -> None:
    """MALLET's printTopicWordWeights: the unnormalised weight beta + count of every word in every
    topic (here eta + N[k, w]); one topic's lines at a time."""
    model, vocab = ctx.model, ctx.vocab_text
    smoothing = f"{model.eta:.8g}"
    with open(out / "topic_word_weights.txt", "w", encoding="utf-8") as f:
        for k in range(model.n_topics):
            words, values = model.topic_entries(k)
            weight = dict(zip(words.tolist(), (f"{v:.8g}" for v in (model.eta + values).tolist())))
            for lo in range(0, model.n_words, WORDS_PER_WRITE):  # a block of lines at a time, whatever V is
                hi = min(lo + WORDS_PER_WRITE, model.n_words)
                f.write("".join(f"{k}\t{name}\t{weight.get(w, smoothing)}\n"
                                for w, name in zip(range(lo, hi), vocab[lo:hi].tolist())))


def dense_proportions(indptr, topics, weights, lengths, alpha: np.ndarray) -> np.ndarray:
    """Documents x topics theta of a block of doc_topics.zarr, each topic a document was not
    assigned at its prior share alpha_k / (N_d + sum_k alpha_k) (module docstring)."""
    n_docs = len(indptr) - 1
    dense = alpha[None, :] / (lengths[:, None] + alpha.sum())
    dense[np.repeat(np.arange(n_docs), np.diff(indptr)), topics] = weights
    return dense


def _dense_blocks(ctx: ExportContext):
    """(first doc, escaped ids, documents x topics proportions), a bounded number of cells at a time."""
    dt, store, model = ctx.dt, ctx.store, ctx.model
    docs = max(1, DENSE_CELLS_PER_PASS // model.n_topics)
    for first, indptr, topics, weights, lengths in dt.iter_blocks(docs):
        ids = text_ids(store.doc_ids(first, first + len(lengths)))
        yield first, ids, dense_proportions(indptr, topics, weights, lengths, model.alpha_k)


def left_out_below(ctx: ExportContext) -> float:
    """The threshold below which `infer` left topics out of the document topics (0: none)."""
    settings = ctx.dt.attrs.get("settings")
    return float(settings.get("threshold", 0.0)) if isinstance(settings, dict) else 0.0


def write_doc_topics(ctx: ExportContext, out: Path) -> None:
    threshold, most = ctx.options.doc_topics_threshold, ctx.options.doc_topics_max
    inferred_above = left_out_below(ctx)
    if threshold < inferred_above:
        ctx.log(f"export: doc_topics.txt left out: {ctx.dt.location} was inferred with --threshold "
                f"{inferred_above:g}, so its rows lack the topics below it and would not sum to 1 as MALLET's "
                f"do; infer again with --threshold 0, or export with --doc-topics-threshold {inferred_above:g} "
                "(or above) for the sparse form")
        return
    with open(out / "doc_topics.txt", "w", encoding="utf-8") as f:
        if threshold == 0:
            if most >= 0:
                ctx.log("export: --doc-topics-max applies to the sparse doc_topics.txt only "
                        "(with --doc-topics-threshold above 0), as in MALLET")
            line = "%d\t%s" + "\t%.6g" * ctx.model.n_topics + "\n"  # one %-format a row: the fastest way found
            for first, ids, dense in _dense_blocks(ctx):
                f.write("".join(line % (first + i, ids[i], *row) for i, row in enumerate(dense.tolist())))
            return
        f.write("#doc name topic proportion ...\n")
        most = ctx.model.n_topics if most < 0 else min(most, ctx.model.n_topics)
        for first, ids, dense in _dense_blocks(ctx):
            order = np.argsort(-dense, axis=1, kind="stable")[:, :most]  # ties: lower topic first
            lines = []
            for i, row in enumerate(order):
                kept = row[dense[i, row] >= threshold]
                lines.append(f"{first + i}\t{ids[i]}\t" + "".join(f"{k}\t{dense[i, k]:.6g}\t" for k in kept) + "\n")
            f.write("".join(lines))


WRITERS = (
    Writer(("topic_keys.tsv",), write_topic_keys),
    Writer(("word_topic_counts.txt",), write_word_topic_counts),
    Writer(("topic_word_weights.txt",), write_topic_word_weights, option="topic_word_weights"),
    Writer(("doc_topics.txt",), write_doc_topics, needs="doc_topics"),
)
