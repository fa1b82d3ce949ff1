"""What an export will write and hold, estimated before anything is written (check_export_size).

The files whose size grows with the model or the documents are estimated from the numbers they
will hold: topic_word_weights.txt (K x V lines), the dense doc_topics.txt (documents x K
numbers), pyldavis.json, word_topic_counts.txt and topic_word.zarr (a few numbers an entry). An
export whose files would not fit on the disk of its output, or whose top words (K x --top-words
ids) would not fit in memory, is refused in one line with the numbers and the option that makes
it smaller, before any file is written. The other files are small beside these (a line a topic,
or bounded by what each writer's docstring says) and are not counted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..memory import available_bytes, format_bytes
from ..options import OptionError
from .base import ExportContext, ExportOptions
from .mallet import left_out_below
from .pyldavis import MAX_FILE_CELLS, least_cells

# Characters of one number as the text files write it: %.8g and %.6g take up to 12 or 14
# ("1.2345678e-05"), these are what most of them take; a file is never estimated above its size.
WEIGHT_CHARS = 10
PROPORTION_CHARS = 9
PYLDAVIS_CHARS = 20  # json.dumps of a float64 with its separator
COUNT_ENTRY_CHARS = 6  # " topic:count" at the least
ZARR_ENTRY_BYTES = 12  # a word id and a float32 value, before compression
TOP_WORD_BYTES = 8  # an int64 id a topic's top word, held for the whole export

# For the file that is largest: the option that shrinks or leaves it out.
SHRINK = {
    "topic_word_weights.txt": "leave out --topic-word-weights",
    "doc_topics.txt": "give --doc-topics-threshold (the sparse doc_topics.txt)",
}


def _digits_total(n: int) -> int:
    """Characters of the numbers 0..n-1 written out, together."""
    total, low, width = 0, 0, 1
    while low < n:
        high = min(n, 10 ** width)
        total += (high - low) * width
        low, width = high, width + 1
    return total


def export_sizes(ctx: ExportContext, wanted: set[str]) -> dict[str, int]:
    """Bytes each file in `wanted` that grows with the model or the documents will take, at least."""
    model, options = ctx.model, ctx.options
    k, v, entries = model.n_topics, model.n_words, model.n_entries
    sizes = {}
    if "topic_word_weights.txt" in wanted:
        word_bytes = sum(len(w.encode("utf-8")) for w in ctx.vocab_text)
        smoothing = len(f"{model.eta:.8g}")
        sizes["topic_word_weights.txt"] = (k * (word_bytes + 3 * v + v * smoothing) + v * _digits_total(k)
                                           + entries * max(WEIGHT_CHARS - smoothing, 0))
    if "word_topic_counts.txt" in wanted:
        sizes["word_topic_counts.txt"] = _digits_total(v) + 2 * v + entries * COUNT_ENTRY_CHARS
    if "topic_word.zarr" in wanted:
        sizes["topic_word.zarr"] = entries * ZARR_ENTRY_BYTES
    if "pyldavis.json" in wanted:
        cells = least_cells(model)
        sizes["pyldavis.json"] = cells * PYLDAVIS_CHARS if cells <= MAX_FILE_CELLS else 0  # else left out
    if "doc_topics.txt" in wanted and ctx.dt is not None and options.doc_topics_threshold == 0 \
            and left_out_below(ctx) == 0:
        sizes["doc_topics.txt"] = ctx.dt.n_docs * k * PROPORTION_CHARS
    return sizes


def check_top_words_memory(n_topics: int, n_words: int, options: ExportOptions) -> None:
    """OptionError unless every topic's --top-words ids fit in the memory available."""
    needed = n_topics * min(options.top_words, n_words) * TOP_WORD_BYTES
    if needed > available_bytes() // 2:
        raise OptionError(f"--top-words {options.top_words:,} of {n_topics:,} topics holds {format_bytes(needed)} "
                          f"of word ids, more than half the memory available ({format_bytes(available_bytes())}); "
                          "use a smaller --top-words")


def check_export_size(ctx: ExportContext, wanted: set[str], folder: Path) -> None:
    """ValueError, before anything is written, if the files of the export would not fit in the
    free space of the disk holding `folder` (estimated by export_sizes)."""
    sizes = export_sizes(ctx, wanted)
    needed = sum(sizes.values())
    while not folder.exists() and folder != folder.parent:  # the output's parents are made with it
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    if needed <= free:
        return
    largest = max(sizes, key=sizes.get)
    parts = ", ".join(f"{name} {format_bytes(n)}" for name, n in sorted(sizes.items(), key=lambda x: -x[1]) if n)
    how = SHRINK.get(largest, "write it to a disk with more room")
    raise ValueError(f"the export needs at least {format_bytes(needed)} ({parts}) but {folder} has "
                      f"{format_bytes(free)} free; free some disk, or {how}")
