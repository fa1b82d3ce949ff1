"""Sharing the machine (issue 48): each system's training rate alone and beside busy processes, in
one run, and bigtopics' parallel efficiency.

    python benchmarks/bench_shared.py                           # Reuters, K = 100 and 2000, 60 s each
    python benchmarks/bench_shared.py -k 100 --seconds 30 --busy 0,1 --json /tmp/shared.json

Every (K, number of busy processes, system) trains in its own child process (benchmarks/systems.py,
as bench_peers.py runs them, on the same training store of Reuters' short news stories), pass by
pass, for about --seconds of training (no pass is started that would end past it; the first always
runs). Its rate is passes per minute of training time, numba's compilation and corpus conversion
not counted. The slowdown beside N busy processes is the rate alone / the rate beside them.

A busy process is a pure-Python spin loop started in ANOTHER session (setsid) before the child and
killed after it (also on Ctrl-C or SIGTERM: nothing is left spinning). Linux's autogroup schedules
sessions against each other: a spinner started from the benchmark's own session would share the
benchmark's group and cost it almost nothing, as `nice` does; in its own session it takes about a
core, as another user's job or a cloud neighbour does.

bigtopics runs with its default threads (`--workers 0`: the cores this process may use, fewer
while other processes keep some busy, bigtopics/free_cores.py), tomotopy on all cores (workers=0).
bigtopics' parallel efficiency: its rate alone on --threads fixed threads (default: the cores this
process may use, bigtopics.cores) / (--threads x its rate alone on one thread). MALLET is not a
system of systems.py and is not run here.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402  (benchmarks/peers.py, beside this file)
import systems  # noqa: E402
from bench_peers import (  # noqa: E402
    PEER_MODULES,
    add_corpus_arguments,
    alpha_for,
    cpu_times,
    machine_description,
    run_child,
    steal_percent,
    versions,
)

from bigtopics.cores import available_cores  # noqa: E402

SPIN = "while True:\n    pass\n"
MAX_PASSES = 1_000_000  # the time stops a run, not a number of passes


class BusyProcesses:
    """`count` spin loops, each in a session of its own, killed on exit from the `with`."""

    def __init__(self, count: int):
        self.count, self.procs = count, []

    def __enter__(self):
        try:
            for _ in range(self.count):
                self.procs.append(subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True,
                                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()
        self.procs = []


def train_rate(system: str, k: int, threads: int, busy: int, args, store: Path, corpus: Path, work: Path) -> dict:
    """One child trained beside `busy` spinners: its passes, training seconds and passes a minute."""
    name = f"{system}-k{k}-t{threads}-b{busy}"
    spec = {"system": system, "store": str(store), "corpus": str(corpus), "work": str(work / name), "k": k,
            "alpha": alpha_for(k, args), "seed": args.seed, "batch_size": None, "workers": threads,
            "options": {}, "max_passes": MAX_PASSES, "snapshot_passes": [], "snapshots": False,
            "max_seconds": args.seconds, "log": str(work / f"{name}.jsonl"), "phase": str(work / f"{name}.phase")}
    Path(spec["work"]).mkdir(parents=True)
    with BusyProcesses(busy):
        ticks = cpu_times()
        run = run_child(spec, hard_limit_s=max(4 * args.seconds, args.seconds + 600))
    passes = run["passes"]
    seconds = passes[-1]["seconds"] if passes else 0.0
    result = {"system": system, "k": k, "threads": threads, "busy": busy, "passes": len(passes), "seconds": seconds,
              "passes_per_minute": 60 * len(passes) / seconds if seconds else None,
              "cpu_steal_percent": steal_percent(ticks, cpu_times()), "stopped": run.get("stopped", "")}
    rate = result["passes_per_minute"]
    print(f"  {system:9s} K={k:<5d} threads={threads} beside {busy} busy: {len(passes)} passes in {seconds:.1f} s"
          + (f" ({rate:.2f} a minute)" if rate else f"; {result['stopped']}"), flush=True)
    return result


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def summarise(results: list[dict], ks: list[int], args) -> tuple[list[str], dict]:
    """The printed table and the figures: each system's rate alone and beside the busy processes,
    its slowdowns, and bigtopics' parallel efficiency."""
    def rate(system, k, threads, busy):
        return next((r["passes_per_minute"] for r in results if (r["system"], r["k"], r["threads"], r["busy"])
                     == (system, k, threads, busy)), None)

    beside = [b for b in args.busy if b]
    lines, figures = [], {}
    for k in ks:
        head = (f"{'K = ' + str(k):<24s} {'alone':>9s}" + "".join(f" {'beside ' + str(b):>9s}" for b in beside)
                + "".join(f" {'slowdown ' + str(b):>11s}" for b in beside))
        lines += ["", "passes a minute of training time; slowdown = alone / beside N busy processes", head,
                  "-" * len(head)]
        for system, threads in args.runs:
            label = "bigtopics (default)" if system == "bigtopics" else f"{system} (all cores)"
            alone = rate(system, k, threads, 0)
            rates = {b: rate(system, k, threads, b) for b in beside}
            slowdowns = {b: ratio(alone, rates[b]) for b in beside}
            figures.setdefault(str(k), {})[system] = {"threads": threads, "alone": alone,
                                                      "beside": {str(b): rates[b] for b in beside},
                                                      "slowdown": {str(b): slowdowns[b] for b in beside}}
            lines.append(f"{label:<24s} {fmt(alone, '9.2f')}" + "".join(f" {fmt(rates[b], '9.2f')}" for b in beside)
                         + "".join(f" {fmt(slowdowns[b], '10.2f')}x" for b in beside))
        if args.efficiency_runs:
            one, many = rate("bigtopics", k, 1, 0), rate("bigtopics", k, args.threads, 0)
            efficiency = ratio(many, one and args.threads * one)
            figures[str(k)]["bigtopics_parallel_efficiency"] = efficiency
            lines.append(f"bigtopics' parallel efficiency on {args.threads} threads at K = {k}: "
                         f"{fmt(many, '.2f')} / ({args.threads} x {fmt(one, '.2f')}) = "
                         + ("-" if efficiency is None else f"{100 * efficiency:.0f}%"))
    return lines, figures


def fmt(value: float | None, spec: str) -> str:
    width = int(spec.split(".")[0] or 0)
    return format(value, spec) if value is not None else "-".rjust(width)


def kill_descendants() -> None:
    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


def stop_on_sigterm(signum, frame):
    raise KeyboardInterrupt  # so that the `finally` and `with` blocks kill the spinners


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(parser)
    parser.add_argument("-k", "--k", type=int, action="append", help="topics (repeatable; default 100 and 2000)")
    parser.add_argument("--seconds", type=float, default=60.0, help="training seconds a run (default 60)")
    parser.add_argument("--busy", default="0,1,2", help="numbers of busy processes to train beside (default 0,1,2)")
    parser.add_argument("--threads", type=int, default=available_cores(),
                        help="bigtopics' fixed threads for its parallel efficiency (default: the cores this "
                             "process may use)")
    parser.add_argument("--systems", default="bigtopics,tomotopy", help="comma-separated (default bigtopics,tomotopy)")
    parser.add_argument("--heldout-docs", type=int, default=1000,
                        help="documents left out of training (bench_peers.py's split, shared with its cache)")
    parser.add_argument("--alpha", type=float, help="document-topic prior for every system (default 5/K)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write all figures to this file")
    args = parser.parse_args()
    try:
        args.busy = sorted({int(b) for b in args.busy.split(",")})
        if args.busy[0] < 0 or 0 not in args.busy:
            raise ValueError("--busy must include 0 (alone) and hold no negative number")
        if args.threads < 1 or args.seconds <= 0:
            raise ValueError("--threads must be at least 1 and --seconds positive")
        chosen = [s.strip() for s in args.systems.split(",") if s.strip()]
        unknown = [s for s in chosen if s not in systems.SYSTEMS]
        if unknown:
            raise ValueError(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(systems.SYSTEMS)}")
    except ValueError as e:
        parser.exit(2, f"error: {e}\n")
    missing = [s for s in chosen if s in PEER_MODULES and systems.library_version(s) == "missing"]
    for s in missing:
        print(f"skipping {s}: not installed (pip install -e .[bench])")
    # (system, threads) in the table, threads 0 each system's default; bigtopics alone on one thread
    # and on --threads fixed threads for its parallel efficiency
    args.runs = [(s, 0) for s in chosen if s not in missing]
    args.efficiency_runs = [("bigtopics", 1), ("bigtopics", args.threads)] if (
        "bigtopics" in chosen and args.threads > 1) else []
    ks = args.k or [100, 2000]
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    store = Path(args.store) if args.store else peers.ensure_store(Path(args.corpus), cache)
    train_store, _ = peers.prepare_split(store, args.heldout_docs, args.seed, cache)
    corpus = peers.peer_corpus(train_store)
    load_start = os.getloadavg()
    results = []
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    with tempfile.TemporaryDirectory(prefix="shared-", dir=cache) as work:
        try:
            for k in ks:  # the busy counts interleaved within a K, so that a drift of the machine hits all alike
                for busy in args.busy:
                    for system, threads in args.runs + (args.efficiency_runs if busy == 0 else []):
                        results.append(train_rate(system, k, threads, busy, args, train_store, corpus, Path(work)))
        finally:  # interrupted: the training child too (the spinners are gone with their `with`)
            kill_descendants()
    machine = machine_description()
    tstore = peers.open_store(train_store)
    header = [f"machine: {machine['cpu']}, {machine['cores']} cores; bigtopics may use {available_cores()}",
              f"load average (1 min) {load_start[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end (the busy "
              "processes count: compare with the number run)",
              f"corpus: {train_store}: {tstore.n_docs:,} documents, {tstore.n_tokens:,} tokens; "
              f"about {args.seconds:g} s of training a run",
              "versions: " + ", ".join(f"{k} {v}" for k, v in versions().items())]
    lines, figures = summarise(results, ks, args)
    print("\n".join(header + lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"header": header, "runs": results, "summary": figures,
                                               "machine": machine}, indent=2, default=str))


if __name__ == "__main__":
    main()
