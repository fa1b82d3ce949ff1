"""What a training run needs of the disk and the memory, checked before any work."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

from .assignments import assignment_bytes, topic_dtype
from .memory import available_bytes, format_bytes
from .model import model_bytes
from .settings import TrainSettings
from .store import Store

# Rough bytes per stored table entry (topic, value, hash slack) for the up-front disk check.
TABLE_BYTES_PER_ENTRY = 24
# Bytes per table entry while a checkpoint or a model snapshot gathers the table in memory
# (topics and values word-major, the compressed copy or the topic-major transpose).
GATHER_BYTES_PER_ENTRY = 40
# Peak bytes per token of a minibatch while it is sampled with the next one read ahead (the
# tokens' words, topics and documents, their (document, topic) and (word, topic) tallies, the rows
# of its words): measured on book sections, growing with the topics a word and a document take.
BATCH_BYTES_PER_TOKEN = 64
BATCH_BYTES_PER_TOKEN_AND_TOPIC = 0.1
# Beyond this many topics a token's share stops growing: documents and words use few of them.
BATCH_TOPICS_CAP = 2000


def resource_estimate(store: Store, settings: TrainSettings) -> tuple[dict[str, int], int]:
    """(disk per part of the run directory, memory) a run may need at most, before it starts.

    The table cannot hold more entries than K x V, nor (much) more than the corpus's distinct
    (document, word) pairs times the topics a word takes in a document. On disk: the table's
    memory-mapped files, the saved assignments, the checkpoints kept plus the one being written
    (uncompressed: at most their size), and the model twice (a snapshot is written beside the
    one it replaces). In memory: the table gathered for a checkpoint or a snapshot (the table
    itself is memory-mapped, so RAM is not needed to hold it).
    """
    k, v = settings.n_topics, store.n_words
    entries = min(k * v, store.nnz * min(k, 4))
    saved = assignment_bytes(store, k) if settings.exclude_own else 0
    saved_in_checkpoint = store.n_tokens * topic_dtype(k).itemsize if settings.exclude_own else 0
    checkpoint = 8 * (v + 1) + 12 * entries + 8 * k + saved_in_checkpoint
    kept = settings.keep_checkpoints + 1
    disk = {
        "the table": 16 * v + entries * TABLE_BYTES_PER_ENTRY,
        "the saved assignments": saved,
        f"{kept} checkpoints": kept * checkpoint,
        "the model twice": 2 * (model_bytes(k, v, entries) + 16 * v),
    }
    return {what: n for what, n in disk.items() if n}, entries * GATHER_BYTES_PER_ENTRY + saved_in_checkpoint


def minibatch_memory(store: Store, settings: TrainSettings) -> tuple[int, int]:
    """(tokens of a minibatch of the mean document length, bytes it needs at most while sampled
    with the next one read ahead and the held-out documents kept)."""
    mean_tokens = store.n_tokens / max(store.n_docs, 1)
    tokens = int(min(settings.batch_size, store.n_docs) * mean_tokens)
    heldout = int(min(settings.heldout, store.n_docs) * mean_tokens)
    per_token = BATCH_BYTES_PER_TOKEN + BATCH_BYTES_PER_TOKEN_AND_TOPIC * min(settings.n_topics, BATCH_TOPICS_CAP)
    return tokens, int((tokens + heldout) * per_token)


def check_resources(store: Store, settings: TrainSettings, run_dir: Path) -> None:
    """Refuse, before any work, a run that cannot fit on the disk that holds it (disk counted as
    disk: RAM does not hold the table, which is memory-mapped), and warn if a checkpoint of the
    largest possible table would not fit in the memory available."""
    disk, memory = resource_estimate(store, settings)
    needed = sum(disk.values())
    free = shutil.disk_usage(run_dir).free
    if needed > free:
        parts = ", ".join(f"{what} {format_bytes(n)}" for what, n in disk.items())
        hints = ["use fewer topics or a smaller vocabulary"]
        if settings.exclude_own:
            hints.append("train with --include-own")
        if settings.keep_checkpoints > 1:
            hints.append("keep fewer checkpoints")
        raise ValueError(
            f"the run may need up to {format_bytes(needed)} of disk ({parts}) but {run_dir} has only "
            f"{format_bytes(free)} free; free some disk, {', '.join(hints[:-1])}{' or ' if len(hints) > 1 else ''}"
            f"{hints[-1]}")
    available = available_bytes()
    tokens, batch = minibatch_memory(store, settings)
    if batch > available:
        raise ValueError(
            f"a minibatch of {settings.batch_size:,} documents (about {tokens:,} tokens) needs about "
            f"{format_bytes(batch)} of memory while it is sampled with the next one read ahead, and "
            f"{format_bytes(available)} is available; use a smaller --batch-size")
    if memory > available:
        warnings.warn(f"a checkpoint or model snapshot of the largest table this run can grow to gathers up to "
                      f"{format_bytes(memory)} in memory, and {format_bytes(available)} is available; if the "
                      "table grows that large, use fewer topics or a smaller vocabulary", stacklevel=3)
