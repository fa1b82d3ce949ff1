"""One epoch as `bigtopics train --epochs 1` runs it, and where its time goes (issue 26).

    python benchmarks/bench_epoch.py          # Gutenberg books in 1000- and 750-token sections, K = 100 1000 2000
    python benchmarks/bench_epoch.py --section-tokens 1000 -k 2000 --workers 2 --json epoch.json
    python benchmarks/bench_epoch.py --option sampler=alias

Each configuration (store, K, threads) trains one whole epoch from an empty table with the
one-epoch defaults (TrainSettings(epochs=1): 1024 documents a minibatch, 3 + 3 sweeps, no
exclude-own, learned alpha), holding `--heldout` sections out as `train --heldout` does, in a
fresh process whose numba kernels are compiled first on 24 documents (systems.compile_kernels;
that time is printed apart). Reported per run, from the trainer's own clock and metrics log:

  - tokens/s and seconds per 10,000 sections (the trainer's training time, which leaves out
    the held-out score at the end and the model written after it), peak RSS of the training
    (Linux's high-water mark, reset after the kernels are compiled), and
    the cores the process kept busy (its CPU time over its wall time: below the thread count
    when other processes share the cores);
  - the held-out log-likelihood per token at the end (left-to-right, the trainer's);
  - where the time went: the trainer's phases (metrics.jsonl `phase_seconds`: freeze = copying
    the minibatch's rows, local step, global step, priors, read_wait = waiting on the read-ahead
    thread, heldout, snapshot, checkpoint), with the local step split by timing the functions
    it calls (CLOCKED below): the estimate of beta, the sampling kernel and the sampler's
    set-up, merging the tallies, the last sweep's counts for the learned priors; and the time
    the read-ahead thread spent reading and preparing minibatches (overlapped, on the same cores);
  - ns per draw: the sampling kernel's time / draws, draws = tokens x sweeps per visit
    (the sequential initialisation + burn-in + saved sweeps), as wall time and per thread;
  - at the end, the final topics sampled once more on the last minibatch's sections (untimed):
    mean topics per section (distinct topics of the last sweep) and entries per word row
    weighted by tokens, the two lengths a draw's cost grows with (kernels/gibbs.py).

The runs follow each other in rounds (every configuration once per `--repeat`), each printed
as it ends; then the table, the ratios the issue sets goals for (parallel efficiency, K against
the smallest K) within each round, beside them the machine's own efficiency for arithmetic,
cache-resident and memory-bound work on the same threads, measured after each round
(machine_scaling.py: the ceiling a phase bound by the memory's random accesses cannot pass, and
on a shared host it moves from round to round), and the projection of one epoch over the core
paper's collection (44M sections, 33B tokens) at the largest K from the measured tokens/s.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "gutenberg_books" / "docs.jsonl.gz"
PAPER_SECTIONS, PAPER_TOKENS = 44_000_000, 33_000_000_000

# Functions timed inside the trainer's phases: (name, module, attribute). Calls of one name add up;
# "gibbs_sample" holds "sampling" (the kernel), the rest of it is the sampler's set-up.
CLOCKED = (
    ("beta estimate", "bigtopics.frozen", "TableRows.freeze"),
    ("gibbs_sample", "bigtopics.local_steps.gibbs", "gibbs_sample"),
    ("sampling", "bigtopics.local_steps.gibbs", "_sample_minibatch"),
    ("sampling", "bigtopics.local_steps.gibbs", "word_major_sample_minibatch"),
    ("sampling", "bigtopics.local_steps.gibbs", "alias_sample_minibatch"),
    ("merge", "bigtopics.local_steps.gibbs", "merge_pairs"),
    ("prior counts", "bigtopics.local_steps.gibbs", "store_last_sweep"),
    ("prior counts", "bigtopics.stats", "PriorCounts.of_sweep"),
    ("reading (read-ahead thread)", "bigtopics.reader", "DocumentReader.read"),
    ("reading (read-ahead thread)", "bigtopics.executors.threads", "prepared"),
)


def install_clocks(seconds: defaultdict) -> None:
    """Wrap each CLOCKED function so that its calls add their wall time to seconds[name]."""
    for name, module, attribute in CLOCKED:
        owner = importlib.import_module(module)
        *path, last = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, last)

        def timed(*args, _original=original, _name=name, **kwargs):
            start = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                seconds[_name] += time.perf_counter() - start

        setattr(owner, last, timed)


def end_shapes(trainer) -> dict:
    """Sample the last minibatch's sections once more with the final topics: mean distinct topics
    of a section's last sweep, and the mean length of the frozen rows its tokens read."""
    from bigtopics.frozen import TableRows
    from bigtopics.local_steps.gibbs import gibbs_sample
    from bigtopics.reader import prepared, read_documents

    s, step = trainer.settings, trainer.settings.step
    plan = list(trainer.plan.epoch(0))[-1]
    batch = prepared(read_documents(trainer.store, plan.doc_numbers))
    frozen = trainer.task.freeze(TableRows.from_table(trainer.table, batch.distinct_words()))
    tallies = gibbs_sample(batch, frozen, plan.doc_seeds(s.seed), alpha=trainer.priors.current_alpha(s),
                           burnin=step.burnin, samples=step.samples, n_workers=trainer.executor.n_threads)
    token_starts = batch.token_starts()
    lengths = np.diff(token_starts)
    docs = np.repeat(np.arange(batch.n_docs), lengths)
    within = np.arange(token_starts[-1]) - np.repeat(token_starts[:-1], lengths)
    last_sweep = tallies.assignments[(tallies.starts + (step.samples - 1) * lengths)[docs] + within]
    pairs = np.unique(docs * s.n_topics + last_sweep)
    topics = np.bincount(pairs // s.n_topics, minlength=batch.n_docs)
    rows = np.diff(frozen.row_indptr)[frozen.local_ids(batch.words)]
    return {"sections": int(batch.n_docs), "topics_per_section": float(topics.mean()),
            "topics_per_section_token_weighted": float(np.average(topics, weights=np.maximum(lengths, 1))),
            "entries_per_row_token_weighted": float(np.average(rows, weights=batch.counts)),
            "entries_per_row": float(np.diff(frozen.row_indptr).mean())}


def epoch_child(store: str, k: int, workers: int, heldout: int, options: dict) -> dict:
    """One epoch from an empty table in a scratch run directory, kernels compiled first."""
    from systems import compile_kernels

    from bigtopics.rundir import METRICS_NAME, read_metrics
    from bigtopics.settings import TrainSettings
    from bigtopics.trainer import Trainer

    settings = TrainSettings(n_topics=k, epochs=1, workers=workers, heldout=heldout, **options)
    compile_seconds = compile_kernels(store, settings)
    reset_peak_rss()  # numba's compiler held more than some runs ever do
    seconds = defaultdict(float)
    install_clocks(seconds)
    with tempfile.TemporaryDirectory(prefix="bench-epoch-") as tmp:
        trainer = Trainer(store, Path(tmp) / "run", settings, quiet=True)
        start, cpu = time.perf_counter(), time.process_time()
        trainer.run()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        peak = peak_rss_since_reset()
        clocked = dict(seconds)
        final = read_metrics(Path(tmp) / "run" / METRICS_NAME)[-1]
        shapes = end_shapes(trainer)
    s, st = trainer.settings, trainer.state
    sweeps = 1 + s.step.burnin + s.step.samples
    draws = st.tokens_seen * sweeps
    sampling = clocked.get("sampling", 0.0)
    clocked["sampler set-up"] = clocked.pop("gibbs_sample", 0.0) - sampling
    return {"k": k, "workers": trainer.executor.n_threads, "docs": st.docs_seen, "tokens": st.tokens_seen,
            "seconds": st.seconds, "wall_seconds": wall, "cpu_seconds": cpu, "compile_seconds": compile_seconds,
            "tokens_per_s": st.tokens_seen / st.seconds, "s_per_10k_docs": st.seconds / st.docs_seen * 10_000,
            "peak_rss_mib": peak / 2**20, "heldout_loglik": final["heldout_loglik"],
            "table_entries": final["table_entries"], "batch_size": s.batch_size, "sweeps_per_visit": sweeps,
            "step_options": s.step_options, "optimize_alpha": s.optimize_alpha,
            "draws": draws, "ns_per_draw": sampling / draws * 1e9,
            "thread_ns_per_draw": sampling * trainer.executor.n_threads / draws * 1e9,
            "phase_seconds": final["phase_seconds"], "clocked_seconds": clocked, **shapes}


def reset_peak_rss() -> None:
    """Start this process' peak RSS (Linux's VmHWM) again from its current RSS."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_rss_since_reset() -> int:
    """Peak RSS in bytes since reset_peak_rss (VmHWM), or getrusage's high-water mark off Linux."""
    from bigtopics.memory import peak_rss_bytes

    try:
        status = Path("/proc/self/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024
    except (OSError, StopIteration, ValueError):
        return peak_rss_bytes(include_children=False)


def cpu_ticks() -> tuple[int, int] | None:
    """(steal, total) clock ticks of the machine so far (Linux /proc/stat), or None."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    return ticks[7], sum(ticks)


def run_child(spec: dict) -> dict:
    load, ticks = os.getloadavg()[0], cpu_ticks()
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], check=True, capture_output=True,
                         text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    after = cpu_ticks()
    steal = None if ticks is None or after is None or after[1] == ticks[1] else \
        100 * (after[0] - ticks[0]) / (after[1] - ticks[1])
    return {**result, "load_before": load, "load_after": os.getloadavg()[0], "cpu_steal_percent": steal}


def breakdown(r: dict) -> list[tuple[str, float]]:
    """(phase, seconds) of a run's training time: the trainer's phases, its local step split into
    the clocked functions, and what no clock covers; then the overlapped reading."""
    phases, clocked = dict(r["phase_seconds"]), dict(r["clocked_seconds"])
    reading = clocked.pop("reading (read-ahead thread)", 0.0)
    local = phases.pop("local_step", 0.0)
    out = [("freeze: rows copied" if name == "freeze" else name, t) for name, t in phases.items()]
    parts = [(name, clocked.get(name, 0.0)) for name in ("beta estimate", "sampler set-up", "sampling", "merge",
                                                         "prior counts")]
    out += [(f"local step: {name}", t) for name, t in parts]
    out.append(("local step: other", local - sum(t for _, t in parts)))
    out.append(("untimed", r["seconds"] - sum(phases.values()) - local))
    out.sort(key=lambda p: -p[1])
    return out + [("(overlapped) reading in the read-ahead thread", reading)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", action="append", help="an existing store (repeatable; default: the Gutenberg "
                                                         "books in sections of each --section-tokens)")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--section-tokens", type=int, action="append", help="default 1000 and 750")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "bigtopics-bench"))
    parser.add_argument("-k", "--topics", type=int, action="append", help="K values (default 100 1000 2000)")
    parser.add_argument("--workers", type=int, action="append", help="thread counts (default: all cores and 1)")
    parser.add_argument("--heldout", type=int, default=1000, help="sections held out and scored (train --heldout)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every configuration")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a TrainSettings field, e.g. sampler=alias (repeatable)")
    parser.add_argument("--json", help="write every run's figures to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.child:
        print(json.dumps(epoch_child(**json.loads(args.child))))
        return
    from bench_peers import parse_options
    from machine_scaling import describe_efficiency, efficiency_by_work
    from peers import ensure_store

    from bigtopics.cores import thread_count
    from bigtopics.store import open_store

    options = parse_options(args.option)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    stores = args.store or [str(ensure_store(Path(args.corpus), cache, n)) for n in args.section_tokens or [1000, 750]]
    cores = os.cpu_count() or 1
    worker_counts = sorted(set(args.workers or [cores, 1]), reverse=True)
    ks = sorted(set(args.topics or [100, 1000, 2000]))
    described = {}
    for store in stores:
        s = open_store(store)
        described[store] = {"sections": s.n_docs, "tokens": s.n_tokens, "tokens_per_section": s.n_tokens / s.n_docs}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    runs = []
    machine_threads = min(worker_counts[0], thread_count(0))
    measures_efficiency = len(worker_counts) > 1 and 1 in worker_counts
    machine_efficiency_per_round = []  # the machine's own, after each round: it moves with the host's load
    for rep in range(args.repeat):
        for store in stores:
            for k in ks:
                for workers in worker_counts:
                    r = run_child({"store": store, "k": k, "workers": workers, "heldout": args.heldout,
                                   "options": options})
                    r.update(store=store, repeat=rep)
                    runs.append(r)
                    print(f"round {rep + 1}/{args.repeat} {Path(store).name} K={k} threads={workers}: "
                          f"{r['tokens_per_s']:,.0f} tokens/s, {r['s_per_10k_docs']:.2f} s/10k sections, held-out "
                          f"{r['heldout_loglik']:.4f}, load {r['load_before']:.1f}", flush=True)
        if measures_efficiency and machine_threads >= 2:
            machine_efficiency_per_round.append(efficiency_by_work(machine_threads))
            print(f"round {rep + 1}/{args.repeat} "
                  f"{describe_efficiency(machine_efficiency_per_round[-1], machine_threads)}", flush=True)
    commit = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
                            check=False, capture_output=True, text=True).stdout.strip()
    print(f"\n{started}; bigtopics {commit}; machine: {platform.processor() or platform.machine()}, {cores} cores; "
          f"one epoch, one-epoch defaults, {args.heldout} sections held out; options {options or 'none'}; "
          f"{args.repeat} round(s), the best run shown; load average 1 min {runs[0]['load_before']:.1f} at the "
          f"start, {max(r['load_after'] for r in runs):.1f} at most after a run\n")
    print("| store | K | threads | tokens/s | s / 10k sections | cores busy | peak RSS | held-out | ns / draw "
          "(x threads) | topics / section | entries / row | table entries | compile |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def best(store, k, workers):
        return min((r for r in runs if (r["store"], r["k"], r["workers"]) == (store, k, workers)),
                   key=lambda r: r["seconds"])

    for store in stores:
        d = described[store]
        for k in ks:
            for workers in worker_counts:
                r = best(store, k, workers)
                print(f"| {Path(store).name} ({d['sections']:,} sections, {d['tokens_per_section']:.0f} tokens "
                      f"each) | {k} | {workers} | {r['tokens_per_s']:,.0f} | {r['s_per_10k_docs']:.2f} | "
                      f"{r['cpu_seconds'] / r['wall_seconds']:.2f} | {r['peak_rss_mib']:.0f} MiB | "
                      f"{r['heldout_loglik']:.4f} | {r['ns_per_draw']:.0f} "
                      f"({r['thread_ns_per_draw']:.0f}) | {r['topics_per_section']:.1f} | "
                      f"{r['entries_per_row_token_weighted']:.0f} | {r['table_entries']:,} | "
                      f"{r['compile_seconds']:.1f} s |")

    def per_round(store, a, b):
        """Median over rounds of the time ratio of configurations a and b ((k, workers)) in one round."""
        def seconds(config, rep):
            return next(r["seconds"] for r in runs if (r["store"], r["k"], r["workers"], r["repeat"])
                        == (store, *config, rep))
        return statistics.median(seconds(a, rep) / seconds(b, rep) for rep in range(args.repeat))

    most = worker_counts[0]
    print()
    for store in stores:
        name = Path(store).name
        if measures_efficiency:
            print(f"{name}: parallel efficiency on {most} threads against 1: " + ", ".join(
                f"K={k} {per_round(store, (k, 1), (k, most)) / most:.0%}" for k in ks))
        print(f"{name}: time per 10k sections against K={ks[0]} ({most} threads): " + ", ".join(
            f"K={k} {per_round(store, (k, most), (ks[0], most)):.2f}x" for k in ks[1:]))
    if machine_efficiency_per_round:
        by_work = {work: [m[work] for m in machine_efficiency_per_round] for work in machine_efficiency_per_round[0]}
        print(describe_efficiency(by_work, machine_threads) + " (machine_scaling.py, after each round)")
    print("\nwhere the time went (best run; seconds and share of the training time):")
    for store in stores:
        for k in ks:
            for workers in worker_counts:
                r = best(store, k, workers)
                print(f"  {Path(store).name} K={k} threads={workers}, {r['seconds']:.1f} s: " + ", ".join(
                    f"{name} {t:.1f} s ({t / r['seconds']:.0%})" for name, t in breakdown(r)))
    projection = {}
    print()
    for store in stores:
        r = best(store, ks[-1], most)
        projection[store] = {"k": ks[-1], "workers": most, "tokens_per_s": r["tokens_per_s"],
                             "hours_33b_tokens": PAPER_TOKENS / r["tokens_per_s"] / 3600,
                             "hours_44m_sections": PAPER_SECTIONS * r["seconds"] / r["docs"] / 3600}
        p = projection[store]
        print(f"{Path(store).name}: one epoch over 33B tokens at K={ks[-1]} on {most} threads at "
              f"{p['tokens_per_s']:,.0f} tokens/s: {p['hours_33b_tokens']:.1f} h (44M of these "
              f"{described[store]['tokens_per_section']:.0f}-token sections: {p['hours_44m_sections']:.1f} h); "
              f"the goal, 12 h, needs {PAPER_TOKENS / 12 / 3600:,.0f} tokens/s")
    if args.json:
        Path(args.json).write_text(json.dumps({"started": started, "commit": commit, "machine": platform.machine(),
                                               "cores": cores, "options": options, "heldout": args.heldout,
                                               "stores": described, "runs": runs, "projection": projection,
                                               "machine_threads": machine_threads,
                                               "machine_efficiency_per_round": machine_efficiency_per_round},
                                              indent=2))


if __name__ == "__main__":
    main()
