"""The variational local steps' kernels' drivers: Online VB, L-sparse VB and SCVB0 (docs/algorithms.md,
sections 2-4); their LocalStep classes are vb.py, lsparse.py and scvb0.py.

Each is a pure function of (the minibatch, a frozen view of
the topics for its words, per-document seeds, alpha: a number or K numbers) returning the
minibatch's expected counts Nhat[k, w] summed over its documents as SparseStats (the trainer
scales by D / |B|); given a documents x K array `log_theta`, Online VB and L-sparse also fill it
with E[log theta_dk] for a learned alpha (priors.py). The math is in kernels/variational.py.

Documents are cut into contiguous pieces of about equal numbers of entries (the work of these
methods is per distinct word of a document, not per token), a few per thread (n_workers), which
the threads take as they come free (kernels/pieces.py). Every document has its own random
stream (for its initial gamma or N_theta) and its own output slots, and sums over documents run
in document order, so the result is the same for any number of workers.

Online VB and SCVB0 are the dense O(K) references: their statistic has an entry for every
(word of the batch, topic), held as one dense [batch words x K] float64 array (checked against
the memory available before it is allocated). L-sparse keeps at most L topics per document-word,
so its cost and memory stay proportional to the batch's entries times L, not K x V.
"""

from __future__ import annotations

import numpy as np

from ..frozen import FrozenTopics
from ..kernels.pieces import document_piece_count
from ..kernels.ranges import even_ranges
from ..kernels.sparse_stats import merge_pairs
from ..kernels.variational import _lsparse_minibatch, _scvb0_minibatch, _vb_minibatch, expected_counts_by_word
from ..memory import available_bytes, format_bytes
from ..minibatch import Minibatch
from ..stats import ExpectedLogTheta, SparseStats, StepResult

# Bytes per (batch word, topic) cell of a dense statistic at its peak: the float64 array, then
# the kept positions (int64) and the output words, topics and values (SparseStats).
DENSE_BYTES_PER_CELL = 8 * 5


def kernel_prior(frozen: FrozenTopics, alpha):
    """alpha as the kernels take it: a float, or K float64 numbers."""
    return float(alpha) if np.ndim(alpha) == 0 else frozen.asymmetric_prior(alpha)


def _log_theta_out(batch: Minibatch, frozen: FrozenTopics, log_theta: np.ndarray | None) -> np.ndarray:
    """The flat documents x K array the kernels fill with E[log theta_dk] (empty: not wanted)."""
    if log_theta is None:
        return np.zeros(0)
    if log_theta.shape != (batch.n_docs, frozen.n_topics) or log_theta.dtype != np.float64 or \
            not log_theta.flags.c_contiguous:
        raise ValueError(f"log_theta must be a C-contiguous float64 array of {batch.n_docs} x {frozen.n_topics}")
    return log_theta.reshape(-1)


def log_theta_for(batch: Minibatch, frozen: FrozenTopics, prior_counts: tuple[str, ...]) -> np.ndarray | None:
    """The documents x K array a step fills with E[log theta_dk] when an update of the learned
    alpha asks for it (`prior_counts` not empty), else None. Documents x K float64 for one
    minibatch, as the dense steps' own document weights."""
    return np.zeros((batch.n_docs, frozen.n_topics)) if prior_counts else None


def step_result(stats: SparseStats, log_theta: np.ndarray | None) -> StepResult:
    """A variational step's result: its statistics and, if filled, the sums of E[log theta]."""
    return StepResult(stats.words, stats.topics, stats.values,
                      prior_counts=None if log_theta is None else ExpectedLogTheta.of_documents(log_theta))


def _kernel_args(batch: Minibatch, frozen: FrozenTopics, doc_seeds, n_workers: int) -> tuple:
    indptr = np.asarray(batch.indptr, np.int64)
    return (indptr, frozen.local_ids(batch.words), np.asarray(batch.counts, np.int64),
            np.asarray(doc_seeds, np.uint64), even_ranges(indptr, document_piece_count(n_workers)))


def _frozen_rows(frozen: FrozenTopics) -> tuple:
    return frozen.row_indptr, frozen.row_topics, frozen.row_coef, frozen.smoothing


def _check_dense_fits(batch: Minibatch, frozen: FrozenTopics, method: str) -> None:
    needed = (len(frozen.words) * DENSE_BYTES_PER_CELL + batch.n_docs * 8) * frozen.n_topics
    available = available_bytes()
    if needed > available:
        raise ValueError(
            f"{method} keeps a dense statistic of {len(frozen.words):,} words x {frozen.n_topics:,} topics per "
            f"minibatch, about {format_bytes(needed)}, but only {format_bytes(available)} of memory is available; "
            "use a smaller batch size, fewer topics, or --local-step lsparse or gibbs (sparse in K)")


def _dense_stats(batch: Minibatch, frozen: FrozenTopics, local_words: np.ndarray, doc_weight: np.ndarray,
                 entry_scale: np.ndarray) -> SparseStats:
    """Nhat[k, w] = beta[k, w] * sum over w's entries of doc_weight[doc, k] * entry_scale, every
    nonzero (word, topic) of it."""
    n_words, n_topics = len(frozen.words), frozen.n_topics
    word_entries = np.argsort(local_words, kind="stable")  # entries by word, documents ascending within
    word_indptr = np.zeros(n_words + 1, np.int64)
    np.cumsum(np.bincount(local_words, minlength=n_words), out=word_indptr[1:])
    entry_doc = np.repeat(np.arange(batch.n_docs), np.diff(batch.indptr))
    dense = np.zeros((n_words, n_topics))
    expected_counts_by_word(word_indptr, word_entries, entry_doc, entry_scale, doc_weight, *_frozen_rows(frozen),
                            dense)
    values = dense.ravel()
    kept = np.flatnonzero(values)
    return SparseStats(frozen.words[kept // n_topics], kept % n_topics, values[kept])


def _dense_step(batch: Minibatch, frozen: FrozenTopics, doc_seeds, n_workers: int, method: str, kernel,
                settings: tuple, outputs: tuple = ()) -> SparseStats:
    """A dense step's kernel (Online VB's or SCVB0's, taking `settings` after the documents and
    `outputs` after its own) into per-document weights and per-entry scales, then its statistics
    (_dense_stats)."""
    _check_dense_fits(batch, frozen, method)
    doc_indptr, local_words, counts, seeds, bounds = _kernel_args(batch, frozen, doc_seeds, n_workers)
    doc_weight = np.zeros((batch.n_docs, frozen.n_topics))
    entry_scale = np.zeros(len(local_words))
    kernel(doc_indptr, local_words, counts, seeds, bounds, *settings, *_frozen_rows(frozen), doc_weight, entry_scale,
           *outputs)
    return _dense_stats(batch, frozen, local_words, doc_weight, entry_scale)


def vb_local_step(batch: Minibatch, frozen: FrozenTopics, doc_seeds: np.ndarray, *, alpha: float | np.ndarray,
                  max_iterations: int, n_workers: int = 1, log_theta: np.ndarray | None = None) -> SparseStats:
    """Online VB's local step (Hoffman et al. 2010; algorithms.md 2): Nhat[k, w] = sum_d c_dw phi_dw[k].

    `frozen` holds exp(Elog_beta) (TableRows.freeze with the geometric estimate). Each document's gamma starts at
    Gamma(100, 1/100) draws from its stream (as in Hoffman's code; a constant start would leave
    topics that start out equal, as in an empty table, equal forever) and iterates to a mean
    change below 1e-5 or max_iterations. Dense in K: the O(K) reference.
    """
    if max_iterations < 1:
        raise ValueError("max_iterations must be at least 1")
    return _dense_step(batch, frozen, doc_seeds, n_workers, "Online VB", _vb_minibatch,
                       (kernel_prior(frozen, alpha), int(max_iterations)), (_log_theta_out(batch, frozen, log_theta),))


def scvb0_local_step(batch: Minibatch, frozen: FrozenTopics, doc_seeds: np.ndarray, *, alpha: float,
                     burnin: int, n_workers: int = 1) -> SparseStats:
    """SCVB0's local step (Foulds et al. 2013; algorithms.md 3) with the topics frozen.

    `frozen` holds the point estimates (infer.frozen_point_estimates): smoothing[k] + coef[k, w]
    = (N_phi[w, k] + eta) / (N_z[k] + V eta). N_theta starts random from the document's stream;
    `burnin` clumped passes update it (kernels/variational.py scvb0_document), then a read-out
    pass gives Nhat[k, w] = sum_d c_dw gamma_dw[k]. Foulds scale Nhat by C / |M| (corpus tokens
    over minibatch tokens); the trainer's D / |B| equals that in expectation. Dense in K.
    """
    if burnin < 0:
        raise ValueError("burnin must be non-negative")
    return _dense_step(batch, frozen, doc_seeds, n_workers, "SCVB0", _scvb0_minibatch, (float(alpha), int(burnin)))


def lsparse_local_step(batch: Minibatch, frozen: FrozenTopics, doc_seeds: np.ndarray, *, alpha: float | np.ndarray,
                       top_l: int, max_iterations: int, n_workers: int = 1,
                       log_theta: np.ndarray | None = None) -> SparseStats:
    """L-sparse variational local step (Hughes & Sudderth; algorithms.md 4).

    Online VB (same initial gamma and stopping rule) with each document-word's responsibilities
    cut to their top L topics and renormalised; with L = K it is Online VB. The first iteration
    selects among all K topics, later ones only among the topics still active in the document
    (expected count > 0 after the previous iteration): the paper's speed-up, assuming a topic
    that left a document does not come back. At most L pairs per document-word, merged in
    document order (kernels/sparse_stats.py merge_pairs).
    """
    if not 1 <= top_l <= frozen.n_topics:
        raise ValueError(f"top_l must be between 1 and the number of topics {frozen.n_topics} (got {top_l})")
    if max_iterations < 1:
        raise ValueError("max_iterations must be at least 1")
    doc_indptr, local_words, counts, seeds, bounds = _kernel_args(batch, frozen, doc_seeds, n_workers)
    n_slots = len(local_words) * top_l
    out_words = np.empty(n_slots, np.int32)
    out_topics = np.empty(n_slots, np.int32)
    out_values = np.empty(n_slots, np.float64)
    out_n_pairs = np.zeros(batch.n_docs, np.int64)
    _lsparse_minibatch(doc_indptr, local_words, counts, seeds, bounds, kernel_prior(frozen, alpha), int(top_l),
                       int(max_iterations), *_frozen_rows(frozen), out_words, out_topics, out_values, out_n_pairs,
                       _log_theta_out(batch, frozen, log_theta))
    words, topics, values = merge_pairs(out_words, out_topics, out_values, doc_indptr[:-1] * top_l, out_n_pairs,
                                        len(frozen.words), frozen.n_topics)
    return SparseStats(frozen.words[words], topics, values)
