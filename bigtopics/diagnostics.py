"""Per-topic diagnostics of a model (algorithms.md, "Evaluation"), streamed over a store block by
block: coherence of the top words (UMass, Mimno et al. 2011; NPMI and C_V, Roeder et al. 2015,
from document co-occurrence), size in tokens, entropy of
p(w | k) (nats), stored words, and the share of documents of which a topic is the top topic or
has proportion >= `prominence` (from a doc_topics.zarr, or inferred on a bounded sample of
documents). `bigtopics evaluate` (evaluate.py) writes them to evaluation.json; report.py and
export.py show each topic's top words.
"""

from __future__ import annotations

import math

import numpy as np

from .doc_topics import DocTopics, by_weight
from .infer import InferSettings, check_vocabulary, infer_block, infer_parts
from .kernels.evaluate import count_cooccurrences
from .model import Model
from .progress import Progress
from .store import Store


def top_word_ids(model: Model, k: int, n: int) -> np.ndarray:
    """Topic k's n most probable word ids, most probable first (ties: lower id first)."""
    words, values = model.topic_entries(k)
    top = words[np.lexsort((words, -values))[:n]]
    if len(top) < n:  # a nearly empty topic: every unstored word has the smoothing probability
        unstored = np.setdiff1d(np.arange(min(model.n_words, n + len(words))), words)
        top = np.concatenate([top, unstored[: n - len(top)]])
    return top


def umass_coherence(store: Store, top_words: np.ndarray, *, quiet: bool = True) -> tuple[np.ndarray, dict]:
    """UMass coherence of every topic's top words (rows of top_words, most probable first):
    C_k = sum_{m > l} log((D(v_m, v_l) + 1) / D(v_l)), with D document frequencies in the store,
    counted in one streaming pass. A top word absent from the store counts as D = 1 (the term
    is otherwise undefined). Returns (C, counts): counts["doc_freq"] D of each top word (K x W),
    counts["pair_freq"] D of each pair (K x W x W, D(v_m) on the diagonal), counts["n_docs"]."""
    n_topics, n_top = top_words.shape
    unique = np.unique(top_words)
    local_of = np.full(store.n_words, -1, np.int32)
    local_of[unique] = np.arange(len(unique), dtype=np.int32)
    top_local = local_of[top_words]
    flat = top_local.ravel()
    order = np.argsort(flat, kind="stable")
    occ_indptr = np.zeros(len(unique) + 1, np.int64)
    np.cumsum(np.bincount(flat, minlength=len(unique)), out=occ_indptr[1:])
    occ_topic = (order // n_top).astype(np.int64)
    occ_rank = (order % n_top).astype(np.int64)
    present = np.zeros(len(unique), np.bool_)
    doc_freq = np.zeros(len(unique), np.int64)
    pair_freq = np.zeros((n_topics, n_top, n_top), np.int64)
    with Progress("coherence", total=store.n_docs, unit="docs", quiet=quiet) as progress:
        for block in store.iter_blocks():
            count_cooccurrences(block.indptr, block.indices, local_of, top_local, occ_indptr, occ_topic, occ_rank,
                                present, doc_freq, pair_freq)
            progress.update(block.n_docs)
    denominators = np.maximum(doc_freq[top_local], 1).astype(np.float64)  # D(v_l), K x W
    below = np.tril(np.ones((n_top, n_top), bool), -1)  # (m, l) with l < m
    terms = np.log((pair_freq + 1.0) / denominators[:, None, :])
    both = pair_freq + pair_freq.transpose(0, 2, 1)  # D(v_m, v_l) for every pair, D(v_m) on the diagonal
    both[:, np.arange(n_top), np.arange(n_top)] = doc_freq[top_local]
    return np.where(below[None], terms, 0.0).sum(axis=(1, 2)), {"doc_freq": doc_freq[top_local], "pair_freq": both,
                                                                "n_docs": store.n_docs}


# Added to P(v_m, v_l) as gensim's CoherenceModel does (topic_coherence.direct_confirmation_measure),
# so that a pair never seen together has a finite NPMI (near -1) and the figures agree with gensim's.
EPSILON = 1e-12


def npmi_matrix(counts: dict) -> np.ndarray:
    """NPMI of every pair of each topic's top words, K x W x W (the diagonal: a word with itself),
    from the document frequencies of umass_coherence: with N documents, P(v) = D(v) / N and
    P(v_m, v_l) = D(v_m, v_l) / N,
        NPMI(v_m, v_l) = log((P(v_m, v_l) + e) / (P(v_m) P(v_l))) / -log(P(v_m, v_l) + e).
    A top word absent from the store counts as D = 1, as in UMass."""
    n_docs = max(counts["n_docs"], 1)
    single = np.maximum(counts["doc_freq"], 1) / n_docs
    joint = counts["pair_freq"] / n_docs + EPSILON
    return np.log(joint / (single[:, :, None] * single[:, None, :])) / -np.log(joint)


def npmi_coherence(counts: dict) -> np.ndarray:
    """Each topic's mean NPMI over the pairs of its top words (gensim's c_npmi, with documents as
    the co-occurrence windows)."""
    npmi = npmi_matrix(counts)
    n_top = npmi.shape[1]
    off = ~np.eye(n_top, dtype=bool)
    return npmi[:, off].mean(axis=1) if n_top > 1 else np.zeros(len(npmi))


def cv_coherence(counts: dict) -> np.ndarray:
    """C_V (Roeder et al. 2015; gensim's c_v, with documents as the co-occurrence windows): for each
    top word v_m its vector of NPMI with every top word, u_m = (NPMI(v_m, v_j))_j, against the
    topic's, w = sum_m u_m; C_V_k = mean_m cos(u_m, w)."""
    npmi = npmi_matrix(counts)
    whole = npmi.sum(axis=1)  # K x W
    norms = np.linalg.norm(npmi, axis=2) * np.linalg.norm(whole, axis=1)[:, None]
    return ((npmi * whole[:, None, :]).sum(axis=2) / np.maximum(norms, 1e-300)).mean(axis=1)


def topic_entropy(values: np.ndarray, total: float, n_words: int, eta: float) -> float:
    """-sum_w p(w|k) log p(w|k) over the whole vocabulary (nats), from a topic's stored N[k, w]
    values and N[k]."""
    norm = n_words * eta + total
    p = (eta + values) / norm
    smoothing = eta / norm
    return float(-(p * np.log(p)).sum() - (n_words - len(values)) * smoothing * math.log(smoothing))


def prominence(doc_topics_blocks, n_topics: int, threshold: float) -> tuple[np.ndarray, np.ndarray, int]:
    """(documents whose top topic is k, documents with theta_k >= threshold, documents) from
    blocks of (first doc, indptr, topics, weights, lengths); a document's top topic is its largest
    weight's, the lower topic on ties."""
    top = np.zeros(n_topics, np.int64)
    prominent = np.zeros(n_topics, np.int64)
    n_docs = 0
    for _, indptr, topics, weights, _ in doc_topics_blocks:
        nonempty = np.diff(indptr) > 0
        top += np.bincount(by_weight(indptr, topics, weights)[0][indptr[:-1][nonempty]], minlength=n_topics)
        prominent += np.bincount(topics[weights >= threshold], minlength=n_topics)
        n_docs += len(indptr) - 1
    return top, prominent, n_docs


def sampled_doc_topics(model: Model, store: Store, n_docs: int, seed: int, n_workers: int = 1, client=None):
    """Inferred proportions of about n_docs documents of whole blocks chosen at random (on the
    workers of a Dask `client`, if given: the same proportions, in the order they finish)."""
    rng = np.random.default_rng(seed)
    step = min(store.docs_per_block, max(1, n_docs))
    ranges, taken = [], 0
    for start in rng.permutation(np.arange(0, store.n_docs, step)):
        if taken >= n_docs:
            break
        stop = min(start + step, start + n_docs - taken, store.n_docs)
        ranges.append((int(start), int(stop)))
        taken += stop - start
    if client is None:
        results = ((start, infer_block(model, store.read_docs(start, stop), InferSettings(seed=seed), n_workers))
                   for start, stop in ranges)
    else:
        results = infer_parts(client, model, store, ranges, InferSettings(seed=seed))
    for start, result in results:
        yield start, result["indptr"], result["indices"].astype(np.int64), result["data"], result["doc_lengths"]


def topic_diagnostics(model: Model, store: Store | None = None, doc_topics: DocTopics | None = None, *,
                      top_n: int = 10, prominence_threshold: float = 0.1, sample_docs: int = 2000, seed: int = 0,
                      n_workers: int = 1, quiet: bool = True, client=None) -> list[dict]:
    """One record per topic: top words, tokens, share, entropy, stored words, and (with a store)
    UMass coherence and (with doc_topics or a store) the document shares (the sampled documents'
    topics inferred on the workers of a Dask `client`, if given)."""
    totals = model.topic_totals()
    top = np.stack([top_word_ids(model, k, top_n) for k in range(model.n_topics)])
    records = []
    for k in range(model.n_topics):
        _, values = model.topic_entries(k)
        records.append({"topic": k, "top_words": [str(model.vocab[w]) for w in top[k]],
                        "tokens": float(totals[k]), "share": float(totals[k] / max(totals.sum(), 1e-300)),
                        "entropy": topic_entropy(values, totals[k], model.n_words, model.eta),
                        "stored_words": len(values)})
    if store is not None:
        check_vocabulary(model, store)
        coherence, counts = umass_coherence(store, top, quiet=quiet)
        for record, c, npmi, cv in zip(records, coherence, npmi_coherence(counts), cv_coherence(counts)):
            record["coherence"] = float(c)
            record["npmi"] = float(npmi)
            record["c_v"] = float(cv)
    blocks = None
    if doc_topics is not None:
        blocks, source = doc_topics.iter_blocks(), doc_topics.location
    elif store is not None:
        blocks, source = sampled_doc_topics(model, store, sample_docs, seed, n_workers, client), "sample"
    if blocks is not None:
        top_docs, prominent_docs, n_docs = prominence(blocks, model.n_topics, prominence_threshold)
        for k, record in enumerate(records):
            record["top_topic_docs"] = float(top_docs[k] / max(n_docs, 1))
            record["prominent_docs"] = float(prominent_docs[k] / max(n_docs, 1))
            record["prominence_from"] = source
    return records
