"""Compile a local step's kernels in this process on a few made-up documents (a worker that joins
a cluster calls it once, so that no minibatch waits on numba)."""

from __future__ import annotations

import numpy as np

from ..assignments import previous_stats, topic_dtype
from ..frozen import TableRows
from ..local_steps import LocalStep
from ..minibatch import Minibatch
from ..topic_word import TopicWordTable


def compile_step(step: LocalStep) -> None:
    """Run `step` (and, if it keeps assignments, the previous-visit tallies) on two tiny documents."""
    n_topics, n_words = 4, 6
    table = TopicWordTable(n_topics, n_words)
    table.update(np.arange(n_words), np.arange(n_words) % n_topics, np.ones(n_words), 1.0, 1.0)
    batch = Minibatch(np.arange(2), np.array([0, 3, 6]), np.arange(n_words), np.ones(n_words, np.int64))
    rows = TableRows.from_table(table, batch.distinct_words())
    saved = np.full(batch.n_tokens, np.iinfo(topic_dtype(n_topics)).max, topic_dtype(n_topics))
    if step.keeps_assignments:
        rows = rows.without(previous_stats(batch, saved, int(saved[0]), n_topics).stats())
    step.run(batch, rows.freeze(0.1, step.beta_estimate), batch.doc_seeds(0, 0), alpha=0.5, n_workers=1)
