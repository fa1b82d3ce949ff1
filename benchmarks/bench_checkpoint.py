"""Checkpoint size, compression ratio, and time to write and to load, for a table of realistic
size (K = 2000 topics, V = 65,536 words, tens of millions of entries).

    python benchmarks/bench_checkpoint.py                  # 20M entries
    python benchmarks/bench_checkpoint.py --entries 40000000 --dir /big/disk

The table is filled the way training fills it: Zipf-distributed words (frequent words have long
rows), topics per word drawn at random, values from many lazy updates with resets. The cost of
checkpointing is reported as a share of training time at the default interval (30 minutes).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bigtopics.checkpoints import read_checkpoint, save_checkpoint
from bigtopics.memory import format_bytes, peak_rss_bytes
from bigtopics.topic_word import TopicWordTable

DEFAULT_INTERVAL_SECONDS = 30 * 60


def fill(table: TopicWordTable, entries: int, rng: np.random.Generator, per_update: int = 2_000_000) -> None:
    n_words, n_topics = table.n_words, table.n_topics
    # word w takes a share of entries ~ 1/(w+1), capped at K topics
    share = 1.0 / np.arange(1, n_words + 1)
    row_target = np.minimum(np.maximum(1, (share / share.sum() * entries * 1.15).astype(np.int64)), n_topics)
    step = 0
    while table.n_entries < entries:
        words = rng.choice(n_words, size=per_update, p=row_target / row_target.sum())
        topics = rng.integers(0, n_topics, size=per_update)
        keys = np.unique(words.astype(np.int64) * n_topics + topics)
        values = rng.gamma(0.5, 4.0, size=len(keys))
        step += 1
        table.update(keys // n_topics, keys % n_topics, values, (64 + step) ** -0.6, 20_000.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--words", type=int, default=65536)
    parser.add_argument("--entries", type=int, default=20_000_000)
    parser.add_argument("--dir", default=None, help="where to write the checkpoints (default: a temporary dir)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    table = TopicWordTable(args.topics, args.words)
    started = time.perf_counter()
    fill(table, args.entries, rng)
    print(f"table: K={args.topics}, V={args.words}, {table.n_entries:,} entries, "
          f"{format_bytes(table.nbytes())} in memory (filled in {time.perf_counter() - started:.1f} s)")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        run = Path(tmp)
        t0 = time.perf_counter()
        state = table.state()
        arrays = {k: v for k, v in state.items() if isinstance(v, np.ndarray)}
        scalars = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in state.items() if k not in arrays}
        t1 = time.perf_counter()
        path = save_checkpoint(run, 1, {"table_scalars": scalars}, arrays)
        t2 = time.perf_counter()
        raw = sum(a.nbytes for a in arrays.values())
        size = path.stat().st_size
        os.sync()
        t3 = time.perf_counter()
        meta, loaded = read_checkpoint(path)
        t4 = time.perf_counter()
        restored = TopicWordTable.from_state({**loaded, **meta["table_scalars"]})
        t5 = time.perf_counter()
        assert restored.n_entries == table.n_entries
    write = t2 - t0
    print(f"checkpoint: {format_bytes(size)} on disk for {format_bytes(raw)} of raw state arrays "
          f"(compression ratio {raw / size:.2f}); {size / table.n_entries:.1f} bytes per entry")
    print(f"write: {write:.2f} s (state() {t1 - t0:.2f} s, compress + fsync + rename {t2 - t1:.2f} s)")
    print(f"load:  {t5 - t3:.2f} s (read + verify + decompress {t4 - t3:.2f} s, from_state {t5 - t4:.2f} s)")
    print(f"cost at the default interval (every {DEFAULT_INTERVAL_SECONDS // 60} minutes): "
          f"{100 * write / DEFAULT_INTERVAL_SECONDS:.2f}% of training time")
    print(f"peak RSS: {format_bytes(peak_rss_bytes())}")


if __name__ == "__main__":
    main()
