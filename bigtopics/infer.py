"""Topic proportions of every document of a store, with a trained model held fixed.

Each document is Gibbs-sampled (kernels/gibbs.py) against the model's point estimates
p(w | k) = (eta + N[k, w]) / (V eta + N[k]); its proportions are the posterior-mean estimate

    theta[d, k] = (alpha_k + n_dk) / (N_d + sum_k alpha_k)    (alpha_k = alpha unless learned),

with n_dk the topic counts averaged over `samples` saved sweeps after `burnin` discarded ones.
Every document has its own random stream, fixed by (seed, document number), so the result does
not depend on the number of threads, on block sizes or on interruptions.

Output (`doc_topics.zarr`, doc_topics_format_version 2), a Zarr v3 group in anndata's csr_matrix
encoding, shape [n_docs, K], canonical CSR (scipy, anndata and dask take it as it is):
    indptr      int64 (n_docs + 1)
    indices     int32  topic ids, ascending within a row
    data        float32  theta[d, k] for the topics with n_dk > 0 and theta >= threshold
    doc_lengths int64 (n_docs)  tokens per document
Each array names its dimension (dimension_names: doc_bound, entry, entry, doc) for xarray.open_zarr.
Rows are NOT renormalised after thresholding: a row sums to 1 minus the mass of the topics left
out (each at least alpha_k / (N_d + sum_k alpha_k), the prior's share), so weights are comparable
across documents; an empty document has an empty row.

Resuming: every run of store blocks of about PART_TOKENS tokens becomes a part file
`part-<first doc>.npz`, written atomically, in
`.<output>.parts/` next to the output; a rerun with the same settings skips the parts present,
and the output is assembled from the parts at the end (then they are deleted). While it runs,
an inference holds a lock, `.<output>.lock` next to the output (outputs.OutputLock): a second
one into the same output refuses at once with one line. Memory is one
part of documents (two while the next is read ahead) plus the model's rows, whatever the number
of documents.

The store and the output may be URLs (s3://bucket/prefix/doc_topics.zarr, any fsspec
filesystem; bigtopics/locations.py). The parts always stay on the local disk, where their atomic
renames work: for an output at a URL they go next to the model, in
`<run>/.infer-<name>-<hash of the URL>.parts/`, so the run directory must be writable. The output
at a URL is written in place at the end, its attributes last; `doc_topics.DocTopics` refuses
it until then, and a rerun after an interruption replaces it.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from .atomic import atomic_write_bytes
from .cluster import connected, map_parts
from .cores import use_threads
from .doc_topics import DOC_TOPICS_FORMAT_VERSION, INDEX_DTYPE, LAYOUT, NORMALISATION, create_arrays
from .frozen import frozen_point_estimates
from .local_steps.gibbs import gibbs_sample
from .locations import Location, locate
from .minibatch import Minibatch
from .model import Model, ModelRows, alpha_attribute, load_model
from .options import MAX_COUNT, MAX_SWEEPS, MAX_WORKERS, check_integer, check_real, check_seed
from .outputs import NewGroup, OutputLock, check_output
from .progress import Progress
from .reader import block_minibatch, read_ahead
from .stopping import InterruptsThatStick
from .store import (
    CSR_ENCODING,
    CSRBlock,
    Store,
    StoreError,
    open_store,
)

# The "epoch" of inference streams: disjoint from training's epochs 0, 1, 2, ...
INFER_STREAM = 0x1F0000
PART_TOKENS = 1 << 23


@dataclass
class InferSettings:
    threshold: float = 0.0  # 0: every topic a document was assigned, so that its row sums to 1 (MALLET's rows)
    burnin: int = 4
    samples: int = 4
    seed: int = 0
    workers: int = 0  # 0: all cores

    def validate(self) -> None:
        """Every option finite and in range (options.py's bounds), each failure one line naming
        the option as the CLI spells it."""
        check_real(self.threshold, "--threshold", 0.0, 1.0, high_open=True, text="in [0, 1)")
        check_integer(self.burnin, "--burnin", 0, MAX_SWEEPS)
        check_integer(self.samples, "--samples", 1, MAX_SWEEPS)
        check_seed(self.seed)
        check_integer(self.workers, "--workers", 0, MAX_WORKERS)


def document_topic_counts(tallies, n_docs: int, n_topics: int):
    """Per document the topics it was assigned and their counts averaged over the saved sweeps,
    as CSR (indptr, topics int64 ascending, counts float64)."""
    sizes = np.asarray(tallies.sizes, np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    positions = np.repeat(tallies.starts - offsets[:-1], sizes) + np.arange(offsets[-1])
    keys = np.repeat(np.arange(n_docs, dtype=np.int64), sizes) * n_topics + tallies.topics[positions]
    weights = tallies.counts[positions].astype(np.float64)
    order = np.argsort(keys, kind="stable")
    keys, weights = keys[order], weights[order]
    firsts = np.flatnonzero(np.diff(keys, prepend=-1)) if len(keys) else np.zeros(0, np.int64)
    counts = np.add.reduceat(weights, firsts) / tallies.samples if len(keys) else np.zeros(0)
    distinct = keys[firsts]
    indptr = np.zeros(n_docs + 1, np.int64)
    np.cumsum(np.bincount(distinct // n_topics, minlength=n_docs), out=indptr[1:])
    return indptr, distinct % n_topics, counts


def fit_topic_counts(source, batch: Minibatch, *, alpha: float, eta: float, seeds: np.ndarray, burnin: int,
                     samples: int, n_workers: int = 1):
    """Gibbs-sample the batch's documents with the topics fixed; document_topic_counts CSR."""
    frozen = frozen_point_estimates(source, batch.distinct_words(), eta)
    tallies = gibbs_sample(batch, frozen, seeds, alpha=alpha, burnin=burnin, samples=samples, n_workers=n_workers)
    return document_topic_counts(tallies, batch.n_docs, len(frozen.smoothing))


def infer_block(model: Model, block: CSRBlock, settings: InferSettings, n_workers: int = 1) -> dict:
    """Thresholded proportions of one block's documents: CSR arrays plus doc_lengths."""
    batch = block_minibatch(block)
    seeds = batch.doc_seeds(settings.seed, INFER_STREAM)
    indptr, topics, counts = fit_topic_counts(model, batch, alpha=model.alpha, eta=model.eta, seeds=seeds,
                                              burnin=settings.burnin, samples=settings.samples,
                                              n_workers=n_workers)
    lengths = block.doc_lengths
    doc_of = np.repeat(np.arange(block.n_docs), np.diff(indptr))
    theta = posterior_mean(model.alpha, model.n_topics, topics, counts, lengths[doc_of])
    keep = theta >= settings.threshold
    doc_of, topics, theta = doc_of[keep], topics[keep], theta[keep]  # by document, topics ascending
    out_indptr = np.zeros(block.n_docs + 1, np.int64)
    np.cumsum(np.bincount(doc_of, minlength=block.n_docs), out=out_indptr[1:])
    return {"indptr": out_indptr, "indices": topics.astype(INDEX_DTYPE), "data": theta.astype(np.float32),
            "doc_lengths": lengths.astype(np.int64)}


def posterior_mean(alpha, n_topics: int, topics, counts, lengths) -> np.ndarray:
    """theta = (alpha_k + n_dk) / (N_d + sum_k alpha_k) of (topic, count) pairs of documents of
    the given lengths; alpha a number (symmetric) or K numbers."""
    if np.ndim(alpha) == 0:
        return (alpha + counts) / (lengths + n_topics * alpha)
    return (alpha[topics] + counts) / (lengths + alpha.sum())


def check_vocabulary(model: Model, store: Store) -> None:
    """The store must use the model's word ids: same size and the same word at every id."""
    if store.n_words != model.n_words:
        raise StoreError(f"{store.location} has {store.n_words:,} words but the model at {model.path} has "
                         f"{model.n_words:,}: documents must be ingested with the model's vocabulary")
    differ = np.flatnonzero(store.vocab != model.vocab)
    if len(differ):
        w = int(differ[0])
        raise StoreError(f"{store.location} and the model at {model.path} disagree on {len(differ):,} word ids "
                         f"(first: id {w} is {store.vocab[w]!r} in the store, {model.vocab[w]!r} in the model): "
                         "documents must be ingested with the model's vocabulary")


def _parts_dir(output: Location, model: Model) -> Path:
    """Where the parts of an inference into `output` go: next to a local output, else next to the
    model (in the run directory)."""
    if output.path is not None:
        return output.path.with_name(f".{output.path.name}.parts")
    name = output.text.rstrip("/").rsplit("/", 1)[-1]
    return model.path.parent / f".infer-{name}-{hashlib.sha256(output.text.encode()).hexdigest()[:12]}.parts"


def infer_lock(output: Location, model: Model) -> OutputLock:
    """The lock an inference into `output` holds while it runs: `.<output>.lock` next to a local
    output, else next to its parts in the run directory."""
    parts = _parts_dir(output, model)
    return OutputLock(parts.with_name(parts.name[: -len(".parts")] + ".lock"), str(output))


def _part_name(start: int) -> str:
    return f"part-{start:012d}.npz"


def infer_parts(client, model: Model, store: Store, ranges: list[tuple[int, int]],
                settings: InferSettings) -> Iterator[tuple[int, dict]]:
    """infer_block on a Dask cluster: (first document, infer_block's result) for each range of
    documents, in the order they finish; the result is infer_block's, whatever the cluster."""
    parts = [(store, start, stop) for start, stop in ranges]
    for index, result in map_parts(client, parts, _read_range, functools.partial(ModelRows.of, model), _infer_part,
                                   settings):
        yield ranges[index][0], result


def _read_range(store: Store, start: int, stop: int) -> tuple[CSRBlock, np.ndarray]:
    """Documents [start, stop) as a store block, and their distinct words (on a worker)."""
    block = store.read_docs(start, stop)
    return block, block_minibatch(block).distinct_words()


def _infer_part(block: CSRBlock, rows: ModelRows, n_workers: int, settings: InferSettings) -> dict:
    return infer_block(rows, block, settings, n_workers)


def infer(run, store_path, output, settings: InferSettings | None = None, *, overwrite: bool = False,
          quiet: bool = False, part_tokens: int = PART_TOKENS, storage_options: dict | None = None,
          cluster: str | None = None, scheduler: str | None = None) -> dict:
    """Infer topic proportions of every document of the store into `output` (doc_topics.zarr).

    The store and `output` may be local paths or URLs (`storage_options` apply to both; see the
    module's docstring for where the parts go). A part (the unit of resumption) is a run of
    whole store blocks of about `part_tokens` tokens. With `cluster` ("local:N") or `scheduler`
    (an address) the parts are inferred on a Dask cluster (infer_parts),
    with the same result. Returns a summary (documents, parts computed now and reused from an
    interrupted run, nnz, output).
    """
    settings = settings or InferSettings()
    settings.validate()
    check_integer(part_tokens, "--part-tokens", 1, MAX_COUNT)
    model, store = load_model(run), open_store(store_path, storage_options)
    output = locate(output, storage_options)
    check_vocabulary(model, store)
    check_output(output, overwrite, [model.path, store.location], kind="doc_topics")
    parts = _parts_dir(output, model)
    parts.parent.mkdir(parents=True, exist_ok=True)
    with infer_lock(output, model), InterruptsThatStick() as interrupts:  # a second inference into it refuses
        return _infer_locked(model, store, output, parts, settings, overwrite, quiet, part_tokens, cluster, scheduler,
                             interrupts)


def _infer_locked(model: Model, store: Store, output: Location, parts: Path, settings: InferSettings,
                  overwrite: bool, quiet: bool, part_tokens: int, cluster, scheduler,
                  interrupts: InterruptsThatStick) -> dict:
    n_blocks = max(1, len(store.block_starts()))
    docs_per_part = store.docs_per_block * max(1, round(part_tokens * n_blocks / max(store.n_tokens, 1)))
    manifest = {"doc_topics_format_version": DOC_TOPICS_FORMAT_VERSION,
                "model": str(model.path.resolve()), "model_progress": model.attrs.get("progress"),
                "store": store.location, "store_fingerprint": store.fingerprint(),
                "docs_per_part": docs_per_part,
                "settings": {k: v for k, v in asdict(settings).items() if k != "workers"}}
    _open_parts(parts, manifest, overwrite)
    starts = list(store.block_starts(docs_per_part))
    present = [s for s in starts if (parts / _part_name(s)).exists()]
    damaged = [s for s in present
               if not _usable_part(parts / _part_name(s), min(docs_per_part, store.n_docs - s), model.n_topics)]
    for s in damaged:
        (parts / _part_name(s)).unlink(missing_ok=True)
    reused = set(present) - set(damaged)
    todo = [s for s in starts if s not in reused]
    done_docs = store.n_docs - sum(min(docs_per_part, store.n_docs - s) for s in todo)
    with connected(cluster, scheduler) as client:
        if client is None:
            n_workers = use_threads(settings.workers)
            blocks = read_ahead(store.read_docs(s, s + docs_per_part) for s in todo)
            results = ((block.start, infer_block(model, block, settings, n_workers)) for block in blocks)
        else:
            results = infer_parts(client, model, store, [(s, min(s + docs_per_part, store.n_docs)) for s in todo],
                                  settings)
        with Progress("infer", total=store.n_docs, unit="docs", quiet=quiet) as progress:
            progress.count = done_docs
            for start, result in results:
                buffer = io.BytesIO()
                np.savez(buffer, **result)
                atomic_write_bytes(parts / _part_name(start), buffer.getvalue())
                progress.update(len(result["doc_lengths"]))
                interrupts.check()  # a part computed while a Ctrl-C was swallowed is sound: keep it, then stop
    interrupts.check()
    nnz = _assemble(parts, starts, output, model, store, settings, manifest, overwrite)
    shutil.rmtree(parts, ignore_errors=True)
    return {"n_docs": store.n_docs, "parts_computed": len(todo), "parts_reused": len(starts) - len(todo),
            "parts_damaged": len(damaged),
            "nnz": nnz, "output": str(output.path) if output.path is not None else output.text}


def _usable_part(path: Path, n_docs: int, n_topics: int) -> bool:
    """Whether a part left by an interrupted run holds what infer_block writes for its n_docs
    documents. Parts are checked, not trusted: one damaged after it was written is computed again."""
    try:
        with np.load(path, allow_pickle=False) as part:
            indptr, indices, data, lengths = (part[name] for name in ("indptr", "indices", "data", "doc_lengths"))
    except Exception:  # a truncated zip, a missing array, an unreadable file: all mean "compute it again"
        return False
    return bool(len(lengths) == n_docs and len(indptr) == n_docs + 1 and indptr[0] == 0
                and indptr[-1] == len(indices) == len(data) and np.all(np.diff(indptr) >= 0)
                and (len(indices) == 0 or int(indices.max()) < n_topics)
                and np.all(np.isfinite(data)) and np.all(data >= 0))


def _open_parts(parts: Path, manifest: dict, overwrite: bool) -> None:
    """Create the parts directory, or reuse one an interrupted run left with the same settings."""
    record = parts / "manifest.json"
    if record.exists():
        if json.loads(record.read_text()) == json.loads(json.dumps(manifest)):
            return
        if not overwrite:
            raise ValueError(f"{parts} holds an interrupted inference with another model, store or settings; "
                             "rerun with those settings, or with --overwrite to start afresh")
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(record, json.dumps(manifest, indent=2).encode())


def _assemble(parts: Path, starts: list[int], output: Location, model: Model, store: Store, settings: InferSettings,
              manifest: dict, overwrite: bool) -> int:
    """Concatenate the part files into the output group (published with its attributes last,
    outputs.NewGroup); returns its number of entries."""
    sizes = []
    for s in starts:
        with np.load(parts / _part_name(s)) as part:
            sizes.append(int(part["indptr"][-1]))
    nnz = int(sum(sizes))
    target = NewGroup(output, overwrite, kind="doc_topics")
    try:
        with target.errors():
            _write_parts(target.group, parts, starts, sizes, nnz, model, store)
        target.publish({**CSR_ENCODING, "shape": [store.n_docs, model.n_topics],
                        "nnz": nnz, "layout": LAYOUT, "normalisation": NORMALISATION,
                        "alpha": alpha_attribute(model.alpha), "eta": model.eta,
                        **manifest})
    except BaseException:
        target.abort()
        raise
    return nnz


def _write_parts(group, parts: Path, starts: list[int], sizes: list[int], nnz: int, model: Model, store: Store) -> None:
    indptr, indices, data, lengths = create_arrays(group, store.n_docs, nnz, model.n_topics)
    indptr[0:1] = np.zeros(1, np.int64)
    offset = 0
    for s, size in zip(starts, sizes):
        with np.load(parts / _part_name(s)) as part:
            n = len(part["doc_lengths"])
            indptr[s + 1 : s + n + 1] = part["indptr"][1:] + offset
            lengths[s : s + n] = part["doc_lengths"]
            if size:
                indices[offset : offset + size] = part["indices"]
                data[offset : offset + size] = part["data"]
        offset += size
