"""Throughput and size of the topic-word table (bigtopics/topic_word.py).

    .venv/bin/python benchmarks/bench_table.py [--directory DIR] [--entries 10_000_000]
    .venv/bin/python benchmarks/bench_table.py --parallel-update [--topics 1000 2000] [--docs 2048]

Fills a K=2000 x V=65536 table with calls of 1M random distinct (word, topic) pairs until it
holds --entries entries, then times: one more such update (mostly new entries), an update of 1M
existing entries, rows() for 20k random words, a reset, and reports bytes per stored entry.
With --directory the table is memory-mapped there instead of held in memory.

With --parallel-update it times instead the global step (update()) on one thread (add_scaled)
and on all threads (kernels/table_parallel.py, kernels/pieces.py) with minibatch statistics like a
trainer's: --docs sections of 500 tokens, words Zipf-distributed over V, each section drawing
its tokens' topics from 5 of its own; after 8 such updates fill the table, the same 9 more updates
run on two copies of it, one per thread count (checked identical after), and it reports CPU
and wall seconds per update (medians; wall also the fastest, as another process on the cores
slows a parallel loop down to its slowest thread).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from bigtopics import topic_word
from bigtopics.kernels import pieces
from bigtopics.kernels.sparse_stats import merge_pairs
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


def minibatch_pairs(rng: np.random.Generator, n_topics: int, n_docs: int = 2048, doc_tokens: int = 500,
                    topics_per_doc: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merged (word, topic, count) statistics of a synthetic minibatch, grouped by word as the
    trainer's (kernels/sparse_stats.merge_pairs)."""
    words = np.minimum(rng.zipf(1.1, size=n_docs * doc_tokens) - 1, V - 1)
    doc_topics = rng.integers(0, n_topics, size=(n_docs, topics_per_doc))
    topics = doc_topics[np.repeat(np.arange(n_docs), doc_tokens),
                        rng.integers(0, topics_per_doc, size=n_docs * doc_tokens)]
    starts = np.arange(n_docs, dtype=np.int64) * doc_tokens
    return merge_pairs(words, topics, np.ones(len(words)), starts, np.full(n_docs, doc_tokens, np.int64),
                       V, n_topics)


def parallel_update(topic_counts: list[int], doc_counts: list[int]) -> None:
    threads = pieces.threads()
    topic_word.PARALLEL_MIN_ENTRIES = 0  # every size on all threads, to find the crossover
    for n_topics, n_docs in ((k, d) for k in topic_counts for d in doc_counts):
        rng = np.random.default_rng(n_topics)
        table = TopicWordTable(n_topics, V)
        for t in range(8):
            table.update(*minibatch_pairs(rng, n_topics), rho=(1.0 + t) ** -0.6, scale=100.0)
        batches = [minibatch_pairs(rng, n_topics, n_docs) for _ in range(9)]
        print(f"K={n_topics} V={V}: {table.n_entries:,} entries; minibatches of {len(batches[0][0]):,} pairs "
              f"over {len(np.unique(batches[0][0])):,} words")
        copies, figures = {}, {}
        for n_threads, label in ((1, "1 thread (add_scaled)"), (threads, f"{threads} threads (add_parallel)")):
            pieces.set_threads(n_threads)
            copy = copies[n_threads] = TopicWordTable.from_state(table.state())
            copy.update(*batches[0], rho=0.1, scale=100.0)  # compiles, outside the timing
            cpu, wall = [], []
            for t, batch in enumerate(batches[1:]):
                start_cpu, start_wall = time.process_time(), time.perf_counter()
                copy.update(*batch, rho=(9.0 + t) ** -0.6, scale=100.0)
                cpu.append(time.process_time() - start_cpu)
                wall.append(time.perf_counter() - start_wall)
            figures[n_threads] = np.median(cpu), np.median(wall), min(wall)
            print(f"  {label:<30} CPU {1e3 * np.median(cpu):6.1f} ms   wall {1e3 * np.median(wall):6.1f} ms"
                  f" (fastest {1e3 * min(wall):6.1f})   medians of {len(cpu)} updates")
        pieces.set_threads(threads)
        one, many = (copies[n].state() for n in (1, threads))
        same = all(np.array_equal(np.asarray(one[k]), np.asarray(many[k])) for k in one)
        (cpu_1, wall_1, fastest_1), (cpu_n, wall_n, fastest_n) = figures[1], figures[threads]
        print(f"  speedup (wall) {wall_1 / wall_n:.2f}x (fastest {fastest_1 / fastest_n:.2f}x); CPU of {threads} "
              f"threads over one {cpu_n / cpu_1:.2f}x; identical tables: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directory", help="memory-map the table in this directory (default: in memory)")
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--parallel-update", action="store_true",
                        help="time update() on one thread against all threads instead")
    parser.add_argument("--topics", type=int, nargs="+", default=[1000, 2000], help="K for --parallel-update")
    parser.add_argument("--docs", type=int, nargs="+", default=[2048], help="sections per minibatch there")
    args = parser.parse_args()
    if args.parallel_update:
        parallel_update(args.topics, args.docs)
        return
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
