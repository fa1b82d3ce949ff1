"""Throughput and size of the topic-word table (bigtopics/topic_word.py).

    .venv/bin/python benchmarks/bench_table.py [--directory DIR] [--entries 10_000_000]

Fills a K=2000 x V=65536 table with calls of 1M random distinct (word, topic) pairs until it
holds --entries entries, then times: one more such update (mostly new entries), an update of 1M
existing entries, rows() for 20k random words, a reset, and reports bytes per stored entry.
With --directory the table is memory-mapped there instead of held in memory.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from bigtopics.topic_word import TopicWordTable

K, V, BATCH = 2000, 65536, 1_000_000


def random_pairs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pairs = rng.permutation(np.unique(rng.integers(0, K * V, size=BATCH)))
    return pairs // K, pairs % K, rng.integers(1, 5, size=len(pairs)) / 2


def timed(label: str, n: int, call) -> None:
    start = time.perf_counter()
    call()
    seconds = time.perf_counter() - start
    print(f"{label:<40} {seconds:8.3f} s   {n / seconds / 1e6:7.2f} M entries/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directory", help="memory-map the table in this directory (default: in memory)")
    parser.add_argument("--entries", type=int, default=10_000_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(dir=args.directory) as tmp:
        table = TopicWordTable(K, V, directory=tmp if args.directory else None)
        table.update(*random_pairs(rng), rho=1.0, scale=10.0)  # also compiles the kernels
        step, fill_seconds = 1, 0.0
        while table.n_entries < args.entries:
            step += 1
            words, topics, values = random_pairs(rng)
            start = time.perf_counter()
            table.update(words, topics, values, rho=(1.0 + step) ** -0.6, scale=10.0)
            fill_seconds += time.perf_counter() - start
        print(f"K={K} V={V}: {table.n_entries:,} entries after {step} updates of ~1M pairs "
              f"({fill_seconds:.1f} s, {(step - 1) * BATCH / fill_seconds / 1e6:.2f} M entries/s), "
              f"{'memory-mapped' if args.directory else 'in memory'}")
        print(f"bytes per entry (between resets)        {table.nbytes() / table.n_entries:8.1f}")

        words, topics, values = random_pairs(rng)
        new = table.n_entries
        timed("update, 1M random pairs (mostly new)", len(words),
              lambda: table.update(words, topics, values, 0.01, 10.0))
        print(f"  ({table.n_entries - new:,} of them were new entries)")
        timed("update, the same 1M pairs again (existing)", len(words),
              lambda: table.update(words, topics, values, 0.01, 10.0))

        batch_words = np.sort(rng.choice(V, size=20_000, replace=False))
        in_rows = int(table.rows(batch_words)[0][-1])
        timed(f"rows() for 20k words ({in_rows:,} entries)", in_rows, lambda: table.rows(batch_words))
        timed("reset (drop_below=0)", table.n_entries, lambda: table.reset(0.0))
        print(f"bytes per entry (after a reset)         {table.nbytes() / table.n_entries:8.1f}")
        timed("to_csr (whole table)", table.n_entries, table.to_csr)
        table.close()


if __name__ == "__main__":
    main()
