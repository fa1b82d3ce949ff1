"""What a checkpoint of one training run may hold: the size limits read_checkpoint enforces
before it allocates anything, and the check of its content against the run's settings and store
(load_latest_checkpoint sets a checkpoint that fails either aside as damaged).

The SHA-256 of a checkpoint detects damage, not tampering, so its content is checked as well: a
table whose rows hold a topic twice, whose topic sums are not the sums of its entries, or whose
counts exceed what training on the store can produce would resume into a model that every
reader then refuses."""

from __future__ import annotations

import numpy as np

from .assignments import topic_dtype
from .priors import LearnedPriors
from .rundir import RunState
from .settings import TrainSettings
from .store import Store
from .topic_word import TopicWordTable

# Entries checked for repeated topics at a time (a few of their bytes each besides the checkpoint's).
ENTRIES_PER_CHECK = 1 << 22
# Relative difference allowed between a topic's sum and the sum of its entries: both are sums of
# the same non-negative increments in another order, so they differ by rounding alone.
SUM_TOLERANCE = 1e-6


def checkpoint_limits(settings: TrainSettings, store: Store) -> dict:
    """The most elements each array of the run's checkpoints can have (read_checkpoint)."""
    k, v = settings.n_topics, store.n_words

    def entries(arrays):  # as the row pointers read before them say, and never beyond K x V
        indptr = arrays.get("indptr")
        return min(k * v, int(indptr[-1])) if indptr is not None and len(indptr) else k * v

    limits = {"indptr": v + 1, "topics": entries, "stored_values": entries, "topic_sums": k}
    if settings.exclude_own:
        limits["saved_assignments"] = store.n_tokens
    if settings.optimize_alpha:
        limits["prior_alpha"] = k
    return limits


def check_checkpoint(settings: TrainSettings, store: Store, meta: dict, arrays: dict) -> None:
    """ValueError unless a checkpoint's content can be the run's."""
    k, v = settings.n_topics, store.n_words
    state, scalars = meta.get("state"), meta.get("table_scalars")
    fields = set(RunState.__dataclass_fields__)
    if not (isinstance(state, dict) and set(state) == fields and isinstance(scalars, dict)):
        raise ValueError("a manifest without the run's state and the table's scalars")
    if not all(type(state[f]) is int and state[f] >= 0 for f in fields - {"seconds"}) or not (
            isinstance(state["seconds"], (int, float)) and state["seconds"] >= 0):
        raise ValueError(f"a run state of impossible values ({state})")
    if (scalars.get("n_topics"), scalars.get("n_words")) != (k, v):
        raise ValueError(f"a table of {scalars.get('n_topics')} topics x {scalars.get('n_words')} words, "
                         f"this run's has {k} x {v}")
    if meta.get("store_fingerprint") != store.fingerprint():
        raise ValueError("written for another store")
    LearnedPriors.check(settings, meta.get("priors"), arrays)
    TopicWordTable.check_state({**{n: a for n, a in arrays.items() if not n.startswith("prior_")}, **scalars})
    saved = arrays.get("saved_assignments")
    if settings.exclude_own:
        dtype = topic_dtype(k)
        if saved is None or saved.dtype != dtype or saved.shape != (store.n_tokens,):
            raise ValueError(f"the saved assignments are not {store.n_tokens} {dtype}")
        if len(saved) and ((saved >= k) & (saved != np.iinfo(dtype).max)).any():
            raise ValueError("saved assignments with topic ids out of range")
    check_table_content(store, arrays, float(scalars["pi"]))


def check_table_content(store: Store, arrays: dict, pi: float) -> None:
    """ValueError unless the table of a checkpoint (shaped as TopicWordTable.check_state checks)
    holds each topic at most once a row, topic sums that are its entries' sums, and counts N =
    pi M no larger than training on `store` can produce: a minibatch's counts are scaled to the
    store's documents (scale = training documents / minibatch documents), so the topics' counts
    together stay below documents x tokens."""
    indptr, topics, stored, sums = (arrays[name] for name in ("indptr", "topics", "stored_values", "topic_sums"))
    k = len(sums)
    repeated = _repeated_topic(indptr, topics, k)
    if repeated is not None:
        raise ValueError(f"word {repeated[0]}'s row holds topic {repeated[1]} twice")
    with np.errstate(over="ignore", invalid="ignore"):
        entry_sums = np.bincount(topics, weights=stored, minlength=k)
        total = pi * float(sums.sum())
        wrong = np.flatnonzero(~(np.abs(entry_sums - sums) <= SUM_TOLERANCE * np.maximum(sums, entry_sums)))
    if len(wrong):
        t = int(wrong[0])
        raise ValueError(f"topic {t}'s sum {sums[t]:.6g} is not the sum of its entries ({entry_sums[t]:.6g})")
    most = max(store.n_docs, 1) * float(max(store.n_tokens, 1))
    if not total <= most:
        raise ValueError(f"counts totalling {total:.6g}, more than training on {store.n_docs:,} documents of "
                         f"{store.n_tokens:,} tokens can produce ({most:.6g})")


def _repeated_topic(indptr: np.ndarray, topics: np.ndarray, k: int) -> tuple[int, int] | None:
    """(word, topic) of a topic stored twice in a word's row, or None; rows are taken a block of
    about ENTRIES_PER_CHECK entries at a time (a row holds at most K)."""
    n_words, w = len(indptr) - 1, 0
    while w < n_words:
        stop = int(np.searchsorted(indptr, indptr[w] + ENTRIES_PER_CHECK, side="right")) - 1
        stop = min(max(stop, w + 1), n_words)
        rows = np.repeat(np.arange(w, stop, dtype=np.int64), np.diff(indptr[w : stop + 1]))
        keys = rows * k + topics[indptr[w] : indptr[stop]]
        keys.sort()
        same = np.flatnonzero(keys[1:] == keys[:-1])
        if len(same):
            return int(keys[same[0]] // k), int(keys[same[0]] % k)
        w = stop
    return None
