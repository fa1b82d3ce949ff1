"""What a checkpoint of one training run may hold: the size limits read_checkpoint enforces
before it allocates anything, and the check of its content against the run's settings and store
(load_latest_checkpoint sets a checkpoint that fails either aside as damaged)."""

from __future__ import annotations

import numpy as np

from .assignments import topic_dtype
from .priors import LearnedPriors
from .rundir import RunState
from .settings import TrainSettings
from .store import Store
from .topic_word import TopicWordTable


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
