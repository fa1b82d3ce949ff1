"""A trained model on disk (`<run>/model.zarr`) and its reader, `load_model`.

Layout (model_format_version 1), a Zarr v3 group:

    model.zarr/          attrs: model_format_version, n_topics, n_words, alpha (a number, or K
                         numbers alpha_k when learned: train --optimize-alpha), eta, settings,
                         progress (epoch, minibatches, documents and tokens seen), store
                         fingerprint; alpha_scale when the learned alpha was scaled for new
                         documents (alpha_scale.py: factor, documents, training_alpha_sum and
                         the documents' loglik_per_token at each factor tried)
      vocab          str (V,)       word id -> word, the store's vocabulary
      topic_totals   float64 (K,)   N[k] = sum_w N[k, w]
      topic_word/    CSR group (anndata csr_matrix encoding, shape [K, V]): the non-smoothing
                     statistics N[k, w] > 0, topic-major; indptr int64 (K+1), indices uint32
                     word ids ascending within a topic, data float32 N values
      word_topic/    the same entries word-major (shape [V, K]; topic ids ascending within a
                     word), for inference, which needs the rows of a minibatch's words

p(w | k) = (eta + N[k, w]) / (V eta + N[k]) for every word, stored or not. Readers slice one
topic at a time, so a large model is never loaded whole.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

from . import checked
from .atomic import is_disk_full, no_space, publish_dir, temporary_sibling
from .frozen import local_ids
from .kernels.csr import transpose_csr
from .minibatch import gather_rows
from .options import MAX_TOPICS
from .places import KINDS, output_kind
from .store import CSR_ENCODING, StoreError, check_format, default_compressors

MODEL_FORMAT_VERSION = 1
MODEL_NAME = "model.zarr"
ENTRIES_PER_CHUNK = 1 << 20


def write_model(path: str | os.PathLike, word_major, topic_totals, vocab, *, alpha: float | np.ndarray, eta: float,
                attrs: dict | None = None) -> Path:
    """Write a model from word-major CSR statistics (indptr over V, topic ids, N values)."""
    path = Path(path)
    indptr, topics, values = word_major
    n_topics, n_words = len(topic_totals), len(indptr) - 1
    t_indptr, t_words, t_values = transpose_csr(
        np.asarray(indptr, np.int64), np.asarray(topics, np.int64), np.asarray(values, np.float32), n_topics
    )
    tmp = temporary_sibling(path)
    try:
        _write_group(tmp, vocab, topic_totals, (np.asarray(indptr, np.int64), topics, values),
                     (t_indptr, t_words, t_values), n_topics, n_words, alpha, eta, attrs)
        publish_dir(tmp, path, overwrite=True)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing half-written is left beside the model
        if is_disk_full(e):
            needed = model_bytes(n_topics, n_words, len(t_values)) + sum(len(str(w).encode()) for w in vocab)
            raise no_space(path.parent, f"the model {path.name}", needed, up_to=True) from e
        raise
    return path


def alpha_attribute(alpha) -> float | list[float]:
    """alpha as JSON holds it: a number, or a list of K numbers (learned)."""
    return float(alpha) if np.ndim(alpha) == 0 else [float(a) for a in alpha]


def model_bytes(n_topics: int, n_words: int, entries: int) -> int:
    """The model's arrays before compression, its vocabulary aside: at most what it takes on disk."""
    return 8 * (n_topics + 1) + 8 * (n_words + 1) + 8 * n_topics + 16 * entries


def _write_group(tmp: Path, vocab, topic_totals, word_major, topic_major, n_topics: int, n_words: int,
                 alpha: float | np.ndarray, eta: float, attrs: dict | None) -> None:
    indptr, topics, values = word_major
    t_indptr, t_words, t_values = topic_major
    group = zarr.open_group(tmp, mode="w")

    def put(g, name, values, dtype, chunk):
        arr = g.create_array(name, shape=values.shape, chunks=(max(1, min(chunk, len(values))),), dtype=dtype,
                             compressors=default_compressors(dtype))
        if len(values):
            arr[:] = values
        return arr

    put(group, "vocab", np.asarray(vocab, dtype=str), str, 1 << 16)
    put(group, "topic_totals", np.asarray(topic_totals, np.float64), np.float64, 1 << 16)
    tw = group.create_group("topic_word")
    tw.attrs.update({**CSR_ENCODING, "shape": [n_topics, n_words]})
    put(tw, "indptr", t_indptr, np.int64, 1 << 16)
    put(tw, "indices", t_words.astype(np.uint32), np.uint32, ENTRIES_PER_CHUNK)
    put(tw, "data", t_values, np.float32, ENTRIES_PER_CHUNK)
    wt = group.create_group("word_topic")
    wt.attrs.update({**CSR_ENCODING, "shape": [n_words, n_topics]})
    put(wt, "indptr", np.asarray(indptr, np.int64), np.int64, 1 << 16)
    put(wt, "indices", np.asarray(topics, np.uint32), np.uint32, ENTRIES_PER_CHUNK)
    put(wt, "data", np.asarray(values, np.float32), np.float32, ENTRIES_PER_CHUNK)
    group.attrs.update({
        "model_format_version": MODEL_FORMAT_VERSION,
        "n_topics": n_topics,
        "n_words": n_words,
        "alpha": alpha_attribute(alpha),
        "eta": float(eta),
        **(attrs or {}),
    })


class Model:
    """A trained topic model, read lazily from disk."""

    def __init__(self, path: str | os.PathLike):
        path = Path(path)
        if (path / MODEL_NAME).exists():
            path = path / MODEL_NAME
        if not (path / "zarr.json").exists():
            kind = output_kind(path)  # an export or a site given for a run: say so
            raise StoreError(f"{path} is {KINDS[kind]}, not a training run or a model" if kind else
                             f"no model at {path} (a run writes {MODEL_NAME} after its first snapshot)")
        self.path = path
        self.group = zarr.open_group(path, mode="r")
        self.attrs = dict(self.group.attrs)
        check_format(path, self.attrs, "model_format_version", MODEL_FORMAT_VERSION, "a training run or a model")
        self.n_topics, self.n_words = check_model_header(path, self.group, self.attrs)
        check_model_attributes(path, self.attrs)
        alpha = self.attrs["alpha"]
        # a number (symmetric) or K numbers (learned), as the kernels take it (kernels/prior.py)
        self.alpha = float(alpha) if np.ndim(alpha) == 0 else np.asarray(alpha, np.float64)
        self.eta = float(self.attrs["eta"])
        self._topic_totals = np.asarray(self.group["topic_totals"][:])
        self._indptr = np.asarray(self.group["topic_word/indptr"][:])
        check_counts(path, "topic_totals", self._topic_totals)
        check_indptr(path, "topic_word/indptr", self._indptr, self.group["topic_word/indices"].shape[0])
        self._vocab = None
        self._word_rows = None
        self._topic_word = (self.group["topic_word/indices"], self.group["topic_word/data"])
        self._block = (0, np.zeros(0, np.int64), np.zeros(0))  # (first entry, words, values) read last

    def topic_totals(self) -> np.ndarray:
        """N[k] = sum_w N[k, w] (float64, K)."""
        return self._topic_totals

    @property
    def alpha_k(self) -> np.ndarray:
        """The document-topic prior of each topic (float64, K), learned or not."""
        return np.full(self.n_topics, self.alpha) if np.ndim(self.alpha) == 0 else self.alpha

    @property
    def alpha_sum(self) -> float:
        """sum_k alpha_k (K alpha when symmetric, computed so)."""
        return self.n_topics * self.alpha if np.ndim(self.alpha) == 0 else float(self.alpha.sum())

    def rows(self, words) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For ascending word ids: (indptr, topics int32, N values float64), word-major.

        The same contract as TopicWordTable.rows, so FrozenTopics.from_rows works on a model.
        """
        if self._word_rows is None:
            # inference touches most rows over a corpus: hold them (memory ∝ model entries)
            self._word_rows = tuple(np.asarray(self.group[f"word_topic/{name}"][:])
                                    for name in ("indptr", "indices", "data"))
            check_indptr(self.path, "word_topic/indptr", self._word_rows[0], len(self._word_rows[1]))
            check_ids(self.path, "word_topic/indices", self._word_rows[1], self.n_topics)
            check_counts(self.path, "word_topic/data", self._word_rows[2])
        word_indptr, word_topics, word_values = self._word_rows
        words = np.asarray(words, np.int64)
        starts, stops = word_indptr[words], word_indptr[words + 1]
        indptr = np.concatenate([[0], np.cumsum(stops - starts)])
        take = np.repeat(starts - indptr[:-1], stops - starts) + np.arange(indptr[-1])
        return indptr, word_topics[take].astype(np.int32), word_values[take].astype(np.float64)

    @property
    def vocab(self) -> np.ndarray:
        if self._vocab is None:
            self._vocab = np.asarray(self.group["vocab"][:], dtype=object)
        return self._vocab

    @property
    def n_entries(self) -> int:
        return int(self._indptr[-1])

    def topic_entries(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(word ids, N[k, w]) of the stored entries of topic k."""
        lo, hi = int(self._indptr[k]), int(self._indptr[k + 1])
        start, words, values = self._block
        if not (start <= lo and hi <= start + len(words)):
            # Readers go through the topics in order: read ENTRIES_PER_CHUNK entries at once (one
            # chunk's worth, or the topic if larger), not a Zarr read a topic, which at tens of
            # thousands of small topics costs more than the data.
            stop = max(hi, min(lo + ENTRIES_PER_CHUNK, self.n_entries))
            words = np.asarray(self._topic_word[0][lo:stop], np.int64)
            values = np.asarray(self._topic_word[1][lo:stop], np.float64)
            check_ids(self.path, "topic_word/indices", words, self.n_words)
            check_counts(self.path, "topic_word/data", values)
            words.flags.writeable = values.flags.writeable = False  # callers get views of the block
            start, self._block = lo, (lo, words, values)
        return words[lo - start : hi - start], values[lo - start : hi - start]

    def word_probabilities(self, k: int) -> np.ndarray:
        """p(w | k) for every word (dense, V)."""
        words, values = self.topic_entries(k)
        p = np.full(self.n_words, self.eta)
        p[words] += values
        return p / (self.n_words * self.eta + self._topic_totals[k])

    def top_words(self, k: int, n: int = 10) -> list[tuple[str, float]]:
        """The n most probable words of topic k with p(w | k), most probable first."""
        words, values = self.topic_entries(k)
        order = np.lexsort((words, -values))[:n]
        norm = self.n_words * self.eta + self._topic_totals[k]
        out = [(self.vocab[w], (self.eta + v) / norm) for w, v in zip(words[order], values[order])]
        if len(out) < n:  # a nearly empty topic: pad with the smoothing mass of unstored words
            stored = set(words[order].tolist())
            extra = [w for w in range(self.n_words) if w not in stored][: n - len(out)]
            out += [(self.vocab[w], self.eta / norm) for w in extra]
        return out


@dataclass
class ModelRows:
    """The rows of a model for some ascending word ids, with what inference reads besides: a
    picklable stand-in for the Model in inference and held-out scoring that a worker of a cluster
    receives (cluster.map_parts)."""

    words: np.ndarray
    indptr: np.ndarray
    topics: np.ndarray
    values: np.ndarray
    totals: np.ndarray
    alpha: float | np.ndarray
    eta: float
    n_words: int

    @classmethod
    def of(cls, model: Model, words: np.ndarray) -> "ModelRows":
        return cls(np.asarray(words, np.int64), *model.rows(words), model.topic_totals(), model.alpha, model.eta,
                   model.n_words)

    @property
    def n_topics(self) -> int:
        return len(self.totals)

    def topic_totals(self) -> np.ndarray:
        return self.totals

    def rows(self, words) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The same contract as Model.rows, for ascending words among these rows'."""
        return gather_rows(self.indptr, self.topics, self.values, local_ids(self.words, np.asarray(words, np.int64)))

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.words, self.indptr, self.topics, self.values, self.totals)))


# -- checks of a model read from disk: a damaged or crafted file is one line, never a traceback
# or an allocation its real data does not need ---------------------------------------------------
def _damaged(path, what: str) -> StoreError:
    return StoreError(f"the model {path} is damaged: {what} (train again, or restore it from a checkpoint)")


def check_model_header(path, group, attrs: dict) -> tuple[int, int]:
    """(K, V) from the attributes, after checking every array's declared shape against them."""
    try:
        n_topics, n_words = int(attrs["n_topics"]), int(attrs["n_words"])
        alpha, eta = np.asarray(attrs["alpha"], np.float64), float(attrs["eta"])
        shapes = {name: group[name].shape for name in
                  ("vocab", "topic_totals", "topic_word/indptr", "topic_word/indices", "topic_word/data",
                   "word_topic/indptr", "word_topic/indices", "word_topic/data")}
    except (KeyError, TypeError, ValueError) as e:
        raise _damaged(path, f"{e} is missing or not a number") from None
    if not 1 <= n_topics <= MAX_TOPICS or n_words < 1:
        raise _damaged(path, f"n_topics {n_topics}, n_words {n_words}")
    if alpha.shape not in ((), (n_topics,)):
        raise _damaged(path, f"alpha has {alpha.size} values for {n_topics} topics (one, or one per topic)")
    if not (np.isfinite(alpha).all() and (alpha > 0).all() and np.isfinite(eta) and eta > 0):
        raise _damaged(path, f"alpha {alpha if alpha.ndim == 0 else 'values'}, eta {eta} (all must be finite and "
                             "positive)")
    entries = shapes["topic_word/indices"]
    expected = {"vocab": (n_words,), "topic_totals": (n_topics,), "topic_word/indptr": (n_topics + 1,),
                "topic_word/data": entries, "word_topic/indptr": (n_words + 1,),
                "word_topic/indices": entries, "word_topic/data": entries}
    for name, shape in expected.items():
        if shapes[name] != shape:
            raise _damaged(path, f"{name} declares shape {shapes[name]}, expected {shape}")
    return n_topics, n_words


# The attributes about training that readers (report, site, evaluate, infer) take numbers from,
# each optional (a model written without them is read without them): attribute -> {field: kind}.
WHOLE, WHOLE_OR_NONE, SECONDS, POSITIVE = "a whole number >= 0", "a whole number >= 0 or null", \
    "a number of seconds >= 0", "a finite number > 0"
MODEL_ATTRIBUTES = {
    "progress": {"epoch": WHOLE, "step": WHOLE, "docs_seen": WHOLE, "tokens_seen": WHOLE, "seconds": SECONDS},
    "settings": {"heldout": WHOLE, "scale_docs": WHOLE_OR_NONE},
    "store_fingerprint": {"n_docs": WHOLE_OR_NONE, "n_words": WHOLE_OR_NONE, "n_tokens": WHOLE_OR_NONE},
    "alpha_scale": {"factor": POSITIVE, "documents": WHOLE},
}


def _is_kind(value, kind: str) -> bool:
    if kind == WHOLE_OR_NONE and value is None:
        return True
    if kind in (WHOLE, WHOLE_OR_NONE):
        return type(value) is int and value >= 0
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)):
        return False
    return value >= 0 if kind == SECONDS else value > 0


def check_model_attributes(path, attrs: dict) -> None:
    """A StoreError naming the attribute unless each of MODEL_ATTRIBUTES present is an object
    whose listed fields (each optional) are of their kind: checked once where the model is opened,
    so that no reader meets a crafted value."""
    for name, fields in MODEL_ATTRIBUTES.items():
        if name not in attrs:
            continue
        value = attrs[name]
        if not isinstance(value, dict):
            raise _damaged(path, f"attribute {name} is {_shown(value)}, expected an object")
        for field, kind in fields.items():
            if field in value and not _is_kind(value[field], kind):
                raise _damaged(path, f"attribute {name}.{field} is {_shown(value[field])}, expected {kind}")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_counts(path, name: str, values: np.ndarray) -> None:
    if not np.all(np.isfinite(values)) or (len(values) and values.min() < 0):
        raise _damaged(path, f"{name} holds values that are not finite and non-negative")


def check_ids(path, name: str, ids: np.ndarray, limit: int) -> None:
    checked.check_ids(ids, limit, name, lambda what: _damaged(path, what))


def check_indptr(path, name: str, indptr: np.ndarray, entries: int) -> None:
    checked.check_offsets(indptr, name, lambda what: _damaged(path, what), low=0, high=entries, first=0, last=entries)


def load_model(path: str | os.PathLike) -> Model:
    """Open the model of a run directory (or a model.zarr directly)."""
    return Model(path)
