"""Held-out likelihood of documents under fixed topics (docs/algorithms.md, "Evaluation").

Held-out log-likelihood per token, with the topics' point estimates p(w | k) fixed:
  - left-to-right (Wallach et al. 2009): log p(w_d) = sum_n log p(w_n | w_<n), each factor
    averaged over `particles` sequentially sampled topic assignments; a bag of words is read in
    an order shuffled by the document's own random stream. With `resample` (Wallach's algorithm
    3) the earlier assignments are swept again at every position: cost quadratic in the
    document's length, so pass resample=False for long documents.
  - document completion (Wang et al. 2011): the document's tokens are split at random, the
    first `fraction` observed; theta is fitted on them by Gibbs sampling with the topics fixed
    and the rest scored by log sum_k theta_k p(w | k).
Perplexity = exp(-log-likelihood per token). `heldout_documents` picks the documents a training
run keeps out (`train --heldout N`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .cluster import map_parts
from .frozen import frozen_point_estimates
from .infer import check_vocabulary, fit_topic_counts
from .kernels.evaluate import completion_loglik, left_to_right_batch
from .kernels.pieces import document_piece_count
from .kernels.ranges import even_ranges
from .kernels.rng import stream_seeds
from .minibatch import Minibatch
from .model import Model, ModelRows
from .progress import Progress
from .reader import read_documents
from .store import Store

METHODS = ("left-to-right", "completion")
# "epochs" of the random streams used here: disjoint from training's and inference's
LEFT_TO_RIGHT_STREAM = 0x2E0000
SPLIT_STREAM = 0x2E0001
COMPLETION_STREAM = 0x2E0002
HELDOUT_BATCH = 1000  # documents scored together (their scores do not depend on it)



# -- held-out likelihood ------------------------------------------------------------------------
def heldout_loglik(source, batch: Minibatch, *, alpha: float | np.ndarray, eta: float, seed: int,
                   method: str = "left-to-right", particles: int = 10, resample: bool = True,
                   fraction: float = 0.5, burnin: int = 10, samples: int = 10,
                   n_workers: int = 1) -> tuple[float, int]:
    """(total log-likelihood, tokens scored) of a batch of held-out documents.

    `source` has rows(words), topic_totals() and n_words (a Model or the live TopicWordTable).
    left-to-right scores every token (particles, resample); completion scores the tokens not in
    the observed `fraction` of each document, fitting theta with burnin + samples sweeps. alpha:
    a number (symmetric) or one per topic.
    """
    if method == "left-to-right":
        if particles < 1:
            raise ValueError("at least one particle is needed")
        return _left_to_right(source, batch, alpha, eta, seed, particles, resample, n_workers), batch.n_tokens
    if method == "completion":
        if not 0 < fraction < 1:
            raise ValueError(f"the observed fraction must be in (0, 1) (got {fraction})")
        return _completion(source, batch, alpha, eta, seed, fraction, burnin, samples, n_workers)
    raise ValueError(f"unknown held-out method {method!r}; choose one of {', '.join(METHODS)}")


def _left_to_right(source, batch, alpha, eta, seed, particles, resample, n_workers) -> float:
    if batch.n_tokens == 0:
        return 0.0
    frozen = frozen_point_estimates(source, batch.distinct_words(), eta)
    local_words = frozen.local_ids(batch.words)
    counts = np.asarray(batch.counts, np.int32)
    token_starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])[batch.indptr]
    bounds = even_ranges(token_starts, document_piece_count(n_workers))
    out = np.zeros(batch.n_docs)
    view, alpha = frozen.prior_view(alpha)
    left_to_right_batch(np.asarray(batch.indptr, np.int64), local_words, counts,
                        batch.doc_seeds(seed, LEFT_TO_RIGHT_STREAM), bounds, alpha, int(particles),
                        bool(resample), int(np.diff(token_starts).max(initial=1)),
                        int(np.diff(frozen.row_indptr).max(initial=1)), view, out)
    return float(out.sum())


def split_tokens(batch: Minibatch, fraction: float, seed: int) -> tuple[Minibatch, Minibatch]:
    """Split every document's tokens at random: floor(fraction * N_d) observed, the rest held out.

    Which tokens are observed depends only on (seed, document number), not on the batch.
    """
    counts = np.asarray(batch.counts, np.int64)
    entry_doc = np.repeat(np.arange(batch.n_docs), np.diff(batch.indptr))
    token_entry = np.repeat(np.arange(len(counts)), counts)
    token_doc = entry_doc[token_entry]
    doc_tokens = np.bincount(token_doc, minlength=batch.n_docs)
    first = np.concatenate([[0], np.cumsum(doc_tokens)])
    position = np.arange(len(token_entry)) - first[token_doc]
    items = (batch.doc_numbers[token_doc].astype(np.uint64) << np.uint64(32)) | position.astype(np.uint64)
    keys = stream_seeds(np.uint64(seed), np.uint64(SPLIT_STREAM), items)
    order = np.lexsort((keys, token_doc))  # tokens grouped by document, in random order
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order)) - first[token_doc[order]]
    observed = rank < np.floor(fraction * doc_tokens[token_doc])
    return _entries_of(batch, token_entry[observed]), _entries_of(batch, token_entry[~observed])


def _entries_of(batch: Minibatch, token_entry: np.ndarray) -> Minibatch:
    """The batch restricted to the tokens listed by their entries (ascending entry order kept)."""
    entry_counts = np.bincount(token_entry, minlength=len(batch.counts))
    keep = entry_counts > 0
    entry_doc = np.repeat(np.arange(batch.n_docs), np.diff(batch.indptr))
    indptr = np.zeros(batch.n_docs + 1, np.int64)
    np.cumsum(np.bincount(entry_doc[keep], minlength=batch.n_docs), out=indptr[1:])
    return Minibatch(batch.doc_numbers, indptr, np.asarray(batch.words)[keep], entry_counts[keep])


def _completion(source, batch, alpha, eta, seed, fraction, burnin, samples, n_workers) -> tuple[float, int]:
    observed, held = split_tokens(batch, fraction, seed)
    if held.n_tokens == 0:
        return 0.0, 0
    fit = fit_topic_counts(source, observed, alpha=alpha, eta=eta,
                           seeds=observed.doc_seeds(seed, COMPLETION_STREAM), burnin=burnin, samples=samples,
                           n_workers=n_workers)
    frozen = frozen_point_estimates(source, held.distinct_words(), eta)
    local_words = frozen.local_ids(held.words)
    view, alpha = frozen.prior_view(alpha)
    per_doc = completion_loglik(held.indptr, local_words, np.asarray(held.counts, np.int64), fit[0],
                                fit[1].astype(np.int32), fit[2], alpha, view)
    return float(per_doc.sum()), held.n_tokens


def batch_scores(source, batch: Minibatch, *, seed: int, methods, particles: int, resample: bool,
                 fraction: float, n_workers: int = 1) -> dict[str, tuple[float, int]]:
    """{method: (total log-likelihood, tokens scored)} of one batch under a Model (or the
    ModelRows of the batch's words that a worker of a cluster receives)."""
    return {method: heldout_loglik(source, batch, alpha=source.alpha, eta=source.eta, seed=seed, method=method,
                                   particles=particles, resample=resample, fraction=fraction, n_workers=n_workers)
            for method in methods}


def heldout_scores(model: Model, store: Store, *, max_docs: int = 1000, seed: int = 0,
                   methods=METHODS, particles: int = 10, resample: bool = True, fraction: float = 0.5,
                   n_workers: int = 1, quiet: bool = True, doc_numbers: np.ndarray | None = None,
                   client=None) -> dict:
    """Held-out log-likelihood per token and perplexity, for each method, of the first `max_docs`
    documents of a store (streamed block by block) or of the given document numbers (the
    documents a run held out of training). With a Dask `client` the batches are read and scored
    on its workers (heldout_parts), with the same result."""
    check_vocabulary(model, store)
    if doc_numbers is None:
        n_docs = min(max_docs, store.n_docs)
        step = store.docs_per_block
        numbers = [np.arange(lo, min(lo + step, n_docs)) for lo in range(0, n_docs, step)]
    else:
        doc_numbers = np.asarray(doc_numbers, np.int64)[:max_docs]
        n_docs = len(doc_numbers)
        numbers = [doc_numbers[lo:lo + HELDOUT_BATCH] for lo in range(0, n_docs, HELDOUT_BATCH)]
    scoring = {"seed": seed, "methods": tuple(methods), "particles": particles, "resample": resample,
               "fraction": fraction}
    if client is None:
        with Progress("held-out", total=n_docs, unit="docs", quiet=quiet) as progress:
            scores = []
            for batch in (read_documents(store, part) for part in numbers):
                scores.append(batch_scores(model, batch, n_workers=n_workers, **scoring))
                progress.update(batch.n_docs)
    else:
        scores = heldout_parts(client, model, store, numbers, scoring)
    out = {"store": store.location, "n_docs": n_docs, "seed": seed,
           "settings": {"particles": particles, "resample": resample, "fraction": fraction}}
    for method in methods:
        loglik, tokens = 0.0, 0
        for score in scores:  # in batch order: the same sum on a cluster as here
            loglik += score[method][0]
            tokens += score[method][1]
        per_token = loglik / tokens if tokens else float("nan")
        out[method] = {"loglik": loglik, "tokens": tokens, "loglik_per_token": per_token,
                       "perplexity": math.exp(-per_token) if tokens else float("nan")}
    return out


def heldout_parts(client, model: Model, store: Store, batches: list[np.ndarray], scoring: dict) -> list[dict]:
    """batch_scores of each batch of document numbers, scored on a Dask cluster, in the order of
    the batches (so that their sums are the in-process engine's)."""
    parts = [(store, doc_numbers) for doc_numbers in batches]
    results = dict(map_parts(client, parts, _read_numbers, functools.partial(ModelRows.of, model), _score_part,
                             scoring))
    return [results[i] for i in range(len(batches))]


def _read_numbers(store: Store, doc_numbers: np.ndarray) -> tuple[Minibatch, np.ndarray]:
    """The documents of these numbers as a minibatch, and their distinct words (on a worker)."""
    batch = read_documents(store, doc_numbers)
    return batch, batch.distinct_words()


def _score_part(batch: Minibatch, rows: ModelRows, n_workers: int, scoring: dict) -> dict:
    return batch_scores(rows, batch, n_workers=n_workers, **scoring)


def heldout_documents(n_docs: int, n_heldout: int, seed: int) -> np.ndarray:
    """The document numbers held out of training: a sample fixed by the seed, ascending."""
    if n_heldout <= 0:
        return np.zeros(0, np.int64)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0xE7A1])))
    return np.sort(rng.choice(n_docs, size=n_heldout, replace=False)).astype(np.int64)
