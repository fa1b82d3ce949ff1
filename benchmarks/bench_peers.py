"""bigtopics side by side with the topic-model libraries a user would pick instead, on one real
corpus and one train/held-out split, every model scored by ONE evaluator.

    python benchmarks/bench_peers.py                                  # Reuters, K = 100 and 1000
    python benchmarks/bench_peers.py -k 100 --systems bigtopics,tomotopy
    python benchmarks/bench_peers.py --store my.zarr --bigtopics-option sampler=mh --json out.json

For benchmarks/RESULTS.md (both K, about 25 minutes on 2 quiet cores; everything it needs is printed):
    .venv/bin/python benchmarks/bench_peers.py --json /tmp/peers.json

Systems (the peers are the `bench` extra: pip install -e .[bench]):
  bigtopics  Python API (one Trainer, its minibatch loop one epoch at a time); defaults unless
             --bigtopics-option key=value (any TrainSettings field) says otherwise
  tomotopy   tp.LDAModel, collapsed Gibbs, train(1, workers=0) per pass (a pass = one sweep)
  gensim     LdaMulticore(workers=cores, chunksize=--batch-size or 1024), update(corpus) per pass
  sklearn    LatentDirichletAllocation(learning_method="online", n_jobs=-1,
             batch_size=--batch-size or 1024), partial_fit(X) per pass
alpha = --alpha (default 5/K, bigtopics' and MALLET's default) for every system; eta is each library's
default (printed).

Every (system, K) trains in its own subprocess, pass by pass, until --max-passes or until the next
pass would end past --max-train-seconds (so every curve covers about the same time). After each
scheduled pass its p(w | k) is written outside the timed region; afterwards every snapshot is
scored: held-out log-likelihood per token (left-to-right, the same alpha, particles and seed for
all) on the held-out documents, and mean UMass coherence of the top 10 words on the training
store. Memory is the peak of the summed PSS of the child's process tree (gensim's and
scikit-learn's worker processes count), polled every 0.2 s, while the system prepares and trains:
the harness's own snapshot conversion (a dense K x V p(w | k)) is reported apart, as no user's run
makes one. A child loads only numpy and its own library (benchmarks/systems.py): a peer's memory
is what its users would see.

Two comparisons per K: equal passes (--passes) and time to quality (the cumulative training time
at which a system's snapshot first reaches the best peer's final score, or --target; and every
system's score at equal wall-clock budgets, by default 1/4, 1/2 and all of the shortest run).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402  (benchmarks/peers.py, beside this file)
import systems  # noqa: E402

from bigtopics.cores import use_threads  # noqa: E402
from bigtopics.settings import ALPHA_SUM  # noqa: E402

REUTERS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "reuters21578" / "docs.jsonl.gz"
PEER_MODULES = {"tomotopy": "tomotopy", "gensim": "gensim", "sklearn": "sklearn"}
POLL_SECONDS = 0.2
# TrainSettings fields the harness itself sets to train pass by pass on the training store.
HARNESS_SETTINGS = ("n_topics", "epochs", "max_docs", "heldout", "heldout_every", "checkpoint_every",
                    "keep_checkpoints")


# -- watching a child (benchmarks/systems.py) --------------------------------------------------
def tree_memory(proc) -> int:
    """Summed PSS (RSS where PSS is unreadable) of a process and its descendants, in bytes."""
    import psutil

    total = 0
    for p in [proc] + proc.children(recursive=True):
        try:
            try:
                total += p.memory_full_info().pss
            except (psutil.AccessDenied, AttributeError):
                total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def read_phase(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def watch_memory(proc: subprocess.Popen, phase: Path, hard_limit_s: float) -> tuple[int, int, bool]:
    """Poll a child's memory until it exits: (peak, training peak, killed at the hard limit), in bytes.

    Two peaks: over the whole child, and while it trains (preparing and passes), leaving out the
    harness's own snapshots (a system's K x V p(w|k), converted chunk by chunk for the evaluator),
    which no user's run makes. A poll counts as training only if the child's phase mark
    (write_phase) read before and after it is the same "train" mark.
    """
    import psutil

    ps = psutil.Process(proc.pid)
    peak, train_peak, start, killed = 0, 0, time.monotonic(), False
    while proc.poll() is None:
        before = read_phase(phase)
        try:
            memory = tree_memory(ps)
        except psutil.NoSuchProcess:
            break
        peak = max(peak, memory)
        if before is not None and before.endswith(" train") and read_phase(phase) == before:
            train_peak = max(train_peak, memory)
        if time.monotonic() - start > hard_limit_s:
            for p in ps.children(recursive=True) + [ps]:  # only the processes this child started
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            killed = True
            break
        # densely at first: a peer on a tiny store can import, train and exit within one interval
        time.sleep(min(POLL_SECONDS, 0.01 + (time.monotonic() - start) / 10))
    proc.wait()
    return peak, train_peak, killed


def run_child(spec: dict, hard_limit_s: float) -> dict:
    """Run one child, polling its memory; returns its log records plus peak memory and status."""
    Path(spec["log"]).unlink(missing_ok=True)
    phase = Path(spec["phase"])
    phase.unlink(missing_ok=True)
    output = Path(spec["log"]).with_suffix(".out")  # a file, not a pipe: a chatty child never blocks
    with open(output, "w") as out:
        proc = subprocess.Popen([sys.executable, systems.__file__, json.dumps(spec)], stdout=out, stderr=out)
    peak, train_peak, killed = watch_memory(proc, phase, hard_limit_s)
    stderr = output.read_text(errors="replace")
    records = [json.loads(line) for line in Path(spec["log"]).read_text().splitlines()] \
        if Path(spec["log"]).exists() else []
    out = {"peak_mem_mib": peak / 2**20, "peak_train_mem_mib": train_peak / 2**20 if train_peak else None,
           "passes": [r for r in records if r["event"] == "pass"]}
    for r in records:
        if r["event"] in ("ready", "done"):
            out.update({k: v for k, v in r.items() if k != "event"})
    if killed:
        out["stopped"] = f"killed after {hard_limit_s:.0f} s (hard limit); passes finished before count"
    elif proc.returncode != 0:
        out["stopped"] = f"failed (exit {proc.returncode}): {stderr.strip().splitlines()[-1] if stderr.strip() else ''}"
        out["stderr"] = stderr[-4000:]
    return out


# -- orchestration --------------------------------------------------------------------------------
def snapshot_schedule(passes: list[int], max_passes: int) -> list[int]:
    """Passes after which p(w|k) is saved: 1-10, then about every 10 % more, and the --passes.

    Times to a target are rounded up to the next saved pass; with 25 % steps that rounding hid
    half of bigtopics' margin at K = 1000 (benchmarks/RESULTS.md). The price is disk: a K = 1000
    snapshot of Reuters is 96 MB, about 40 of them for tomotopy's 110 passes.
    """
    schedule, p = set(range(1, 11)) | set(passes), 10
    while p < max_passes:
        p = max(p + 1, round(p * 1.1))
        schedule.add(p)
    return sorted(x for x in schedule if x <= max_passes)


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) CPU time of the machine so far, in clock ticks, from Linux's /proc/stat; None
    elsewhere. Steal is time a virtual machine's host gave this machine's CPUs to someone else."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    return ticks[7], sum(ticks)  # user nice system idle iowait irq softirq steal


def steal_percent(before, after) -> float | None:
    """The share of CPU time stolen between two cpu_times() readings, in percent."""
    if before is None or after is None or after[1] == before[1]:
        return None
    return 100.0 * (after[0] - before[0]) / (after[1] - before[1])


def alpha_for(k: int, args) -> float:
    """The document-topic prior every system gets at K (and the evaluator uses)."""
    return args.alpha if args.alpha else ALPHA_SUM / k


def parse_options(pairs: list[str]) -> dict:
    """key=value pairs of TrainSettings fields (--bigtopics-option here, --option in bench_train.py),
    typed like the fields."""
    from bigtopics.local_steps import LOCAL_STEPS
    from bigtopics.settings import TrainSettings

    fields = {f.name: f for f in dataclasses.fields(TrainSettings) if f.name not in (*HARNESS_SETTINGS, "step_options")}
    fields.update({f.name: f for step in LOCAL_STEPS.values() for f in step.options()})
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in fields:
            raise ValueError(f"--bigtopics-option {pair!r}: give key=value with a TrainSettings field "
                             f"({', '.join(fields)}; the harness sets {', '.join(HARNESS_SETTINGS)})")
        default = fields[key].default
        kind = type(default) if default is not None else next(
            (t for t in (bool, int, str) if t.__name__ in str(fields[key].type)), float)
        try:
            options[key] = (value.lower() in ("1", "true", "yes", "on") if kind is bool else value if kind is str
                            else kind(float(value)) if kind is int else kind(value))
        except ValueError:
            raise ValueError(f"--bigtopics-option {pair!r}: {key} takes a {kind.__name__}") from None
    TrainSettings(n_topics=2, **options).validate()
    return options


def machine_description() -> dict:
    import psutil

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(), "platform": platform.platform()}


def versions() -> dict:
    import numba

    out = {"numpy": np.__version__, "numba": numba.__version__, "bigtopics": systems.library_version("bigtopics")}
    try:
        rev = subprocess.run(["git", "-C", str(Path(__file__).parent), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        out["bigtopics"] += f" ({rev})" if rev else ""
    except (OSError, subprocess.SubprocessError):
        pass
    for system in PEER_MODULES:
        out[system] = systems.library_version(system)
    out["scipy"] = __import__("scipy").__version__ if importlib.util.find_spec("scipy") else "missing"
    return out


def evaluate_runs(runs: list[dict], heldout, train_store, args) -> None:
    """Score every snapshot in place (record['heldout_loglik'], record['coherence'])."""
    use_threads(0)
    n_words = peers.open_store(train_store).n_words
    for run in runs:
        for record in run["passes"]:
            if record["snapshot"]:
                p = peers.read_snapshot(record["snapshot"], run["k"], n_words)
                record.update(peers.evaluate(p, heldout, train_store, alpha=alpha_for(run["k"], args),
                                             particles=args.particles,
                                             seed=args.seed, top_n=10, n_workers=os.cpu_count() or 1))
        scored = [r for r in run["passes"] if "heldout_loglik" in r]
        if scored:
            print(f"  scored {run['system']:9s} K={run['k']}: "
                  + ", ".join(f"p{r['pass']} {r['heldout_loglik']:.3f}" for r in scored), flush=True)


# -- reporting ---------------------------------------------------------------------------------
def at_pass(run: dict, p: int) -> dict | None:
    return next((r for r in run["passes"] if r["pass"] == p and "heldout_loglik" in r), None)


def first_reaching(run: dict, target: float) -> dict | None:
    return next((r for r in run["passes"] if r.get("heldout_loglik", -np.inf) >= target), None)


def at_budget(run: dict, budget: float) -> dict | None:
    within = [r for r in run["passes"] if "heldout_loglik" in r and r["seconds"] <= budget]
    return within[-1] if within else None


def final(run: dict) -> dict | None:
    scored = [r for r in run["passes"] if "heldout_loglik" in r]
    return scored[-1] if scored else None


def targets_for(k: int, given: list[str]) -> list[float]:
    """The --target values that apply at K: 'VALUE' (every K) or 'K:VALUE'."""
    out = []
    for t in given:
        scope, sep, value = t.rpartition(":")
        try:
            scope_k, target = (int(scope) if sep else k), float(value)
        except ValueError:
            raise ValueError(f"--target {t!r}: give LOGLIK or K:LOGLIK, e.g. -7.6 or 100:-7.6") from None
        if scope_k == k:
            out.append(target)
    return out


def mib(value: float | None) -> str:
    """A peak in MiB; '-' when no poll fell in that phase (a child that failed or ran under 0.2 s)."""
    return "-" if value is None else f"{value:.0f}"


def report(runs: list[dict], k: int, args, n_tokens: int) -> tuple[list[str], dict]:
    """The printed tables for one K and their figures."""
    by = {r["system"]: r for r in runs if r["k"] == k}
    base = by.get("bigtopics")
    lines = ["", f"=== K = {k} ===", "", "Equal passes (training time excludes corpus conversion and evaluation;"
             " bigtopics' numba compile is the separate warm-up;", "peak MiB: summed PSS while preparing and"
             " training, not while the harness converts a snapshot)", ""]
    head = (f"{'system':9s} {'pass':>4s} {'train s':>8s} {'Mtok/s':>7s} {'peak MiB':>8s} {'heldout':>8s} "
            f"{'coher.':>7s} {'time/bigtopics':>14s} {'ll-bigtopics':>12s}")
    lines += [head, "-" * len(head)]
    summary = {"equal_passes": [], "time_to_quality": {}, "budget": {}}
    notes = ["time/bigtopics > 1: bigtopics trained faster; ll-bigtopics > 0: the system scored better than bigtopics"]
    for p in args.passes:
        for name, run in by.items():
            r = at_pass(run, p)
            b = at_pass(base, p) if base else None
            if r is None:
                lines.append(f"{name:9s} {p:4d}  not reached: {run.get('stopped', '?')}")
                continue
            ratio = f"{r['seconds'] / b['seconds']:13.2f}x" if b else f"{'-':>14s}"
            diff = f"{r['heldout_loglik'] - b['heldout_loglik']:+12.3f}" if b else f"{'-':>12s}"
            lines.append(f"{name:9s} {p:4d} {r['seconds']:8.1f} {n_tokens * p / r['seconds'] / 1e6:7.2f} "
                         f"{mib(run['peak_train_mem_mib']):>8s} {r['heldout_loglik']:8.3f} {r['coherence']:7.1f} "
                         f"{ratio} {diff}")
            summary["equal_passes"].append({"system": name, "pass": p, "seconds": r["seconds"],
                                            "tokens_per_s": n_tokens * p / r["seconds"],
                                            "peak_train_mem_mib": run["peak_train_mem_mib"],
                                            "peak_mem_mib": run["peak_mem_mib"],
                                            "heldout_loglik": r["heldout_loglik"], "coherence": r["coherence"]})
    lines += notes
    peer_finals = {n: final(r) for n, r in by.items() if n != "bigtopics" and final(r)}
    targets = []
    if peer_finals:
        best = max(peer_finals, key=lambda n: peer_finals[n]["heldout_loglik"])
        targets.append((f"best peer final ({best} {peer_finals[best]['heldout_loglik']:.3f})",
                        peer_finals[best]["heldout_loglik"]))
    targets += [(f"fixed {t:.3f}", t) for t in targets_for(k, args.target)]
    common_end = min((final(r)["seconds"] for r in by.values() if final(r)), default=None)
    budgets = args.budget_seconds or ([common_end / 4, common_end / 2, common_end] if common_end else [])
    lines += ["", "Time to quality: cumulative training seconds at the first saved pass reaching the target;",
              "equal wall-clock: the score of the last saved pass within each budget "
              f"(default budgets: 1/4, 1/2 and all of the shortest run, {common_end or 0:.1f} s)", ""]
    head = (f"{'system':9s} {'passes':>6s} {'final':>7s} " + " ".join(f"{label:>30s}" for label, _ in targets)
            + "".join(f" {'at ' + format(b, '.1f') + ' s':>17s}" for b in budgets))
    lines += [head, "-" * len(head)]
    for name, run in by.items():
        f = final(run)
        cells = []
        for label, target in targets:
            r = first_reaching(run, target)
            cell = (format(r['seconds'], '.1f') + ' s (pass ' + str(r['pass']) + ')') if r else 'not reached'
            cells.append(f"{cell:>30s}")
            summary["time_to_quality"].setdefault(label, {})[name] = r and r["seconds"]
        line = (f"{name:9s} {len(run['passes']):6d} {f['heldout_loglik'] if f else float('nan'):7.3f} "
                + " ".join(cells))
        for b in budgets:
            r = at_budget(run, b)
            line += f" {format(r['heldout_loglik'], '.3f') + ' (p' + str(r['pass']) + ')' if r else 'no pass yet':>17s}"
            summary["budget"].setdefault(str(b), {})[name] = r and r["heldout_loglik"]
        lines.append(line)
    lines += ["", "Curves (pass: cumulative seconds, held-out log-likelihood per token, coherence)"]
    for name, run in by.items():
        lines.append(f"  {name:9s} " + "  ".join(f"{r['pass']}: {r['seconds']:.1f}s {r['heldout_loglik']:.3f} "
                                                 f"{r['coherence']:.0f}"
                                                 for r in run["passes"] if "heldout_loglik" in r))
    lines += ["", "Settings used"]
    for name, run in by.items():
        lines.append(f"  {name:9s} {run.get('version', '?')}: prepare {run.get('prepare_s', float('nan')):.1f} s; "
                     + ", ".join(f"{k}={v}" for k, v in run.get("settings", {}).items())
                     + f"; {run.get('stopped', '')}")
    return lines, summary


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    """--store, --corpus and --cache: the store the systems train on, Reuters by default."""
    parser.add_argument("--store", help="an existing store (default: ingest Reuters-21578 once into --cache)")
    parser.add_argument("--corpus", default=str(REUTERS), help="the jsonl.gz ingested when --store is not given")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "bigtopics-bench"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(parser)
    parser.add_argument("-k", "--k", type=int, action="append", help="topics (repeatable; default 100 and 1000)")
    parser.add_argument("--passes", default="1,3", help="equal-pass comparison points (default 1,3)")
    parser.add_argument("--max-passes", type=int, default=500, help="passes per system at most (default 500)")
    parser.add_argument("--max-train-seconds", type=float, default=90.0,
                        help="per system and K: no pass is started that would end past this (default 90; "
                             "the first pass always runs; a child is killed after 4x this or this + 600 s)")
    parser.add_argument("--heldout-docs", type=int, default=1000)
    parser.add_argument("--budget-seconds", type=float, action="append",
                        help="an equal wall-clock budget (repeatable; default: 1/4, 1/2 and all of the shortest "
                             "system's training time)")
    parser.add_argument("--target", action="append", default=[], metavar="[K:]LOGLIK",
                        help="a fixed held-out log-likelihood per token to reach, at every K or at K only "
                             "(repeatable), e.g. --target 100:-7.6")
    parser.add_argument("--systems", default=",".join(systems.SYSTEMS), help="comma-separated subset")
    parser.add_argument("--alpha", type=float, help="document-topic prior for every system (default 5/K)")
    parser.add_argument("--batch-size", type=int,
                        help="minibatch documents (bigtopics, gensim, sklearn; default: bigtopics' own default, "
                             f"{systems.PEER_BATCH_SIZE} for gensim and sklearn)")
    parser.add_argument("--particles", type=int, default=10, help="left-to-right particles")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bigtopics-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a TrainSettings field for bigtopics, e.g. sampler=mh (repeatable)")
    parser.add_argument("--json", help="write all figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the snapshots and runs (in --cache)")
    args = parser.parse_args()
    try:
        args.passes = sorted({int(p) for p in args.passes.split(",")})
        if args.passes[0] < 1:
            raise ValueError("--passes must be positive integers")
        chosen = [s.strip() for s in args.systems.split(",") if s.strip()]
        unknown = [s for s in chosen if s not in systems.SYSTEMS]
        if unknown:
            raise ValueError(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(systems.SYSTEMS)}")
        options = parse_options(args.bigtopics_option)
        targets_for(0, args.target)
    except ValueError as e:
        parser.exit(2, f"error: {e}\n")
    missing = [s for s in chosen if s in PEER_MODULES and importlib.util.find_spec(PEER_MODULES[s]) is None]
    for s in missing:
        print(f"skipping {s}: not installed (pip install -e .[bench])")
    chosen = [s for s in chosen if s not in missing]
    ks = args.k or [100, 1000]
    max_passes = max(args.max_passes, max(args.passes))
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    store = Path(args.store) if args.store else peers.ensure_store(Path(args.corpus), cache)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = os.getloadavg()
    train_store, heldout_path = peers.prepare_split(store, args.heldout_docs, args.seed, cache)
    heldout, unseen = peers.load_heldout(heldout_path)
    tstore = peers.open_store(train_store)
    corpus = peers.peer_corpus(train_store)
    work = Path(tempfile.mkdtemp(prefix="peers-", dir=cache))
    cores = os.cpu_count() or 1
    runs = []
    try:
        for k in ks:
            for system in chosen:
                spec = {"system": system, "store": str(train_store), "corpus": str(corpus),
                        "work": str(work / f"{system}-k{k}"), "k": k,
                        "alpha": alpha_for(k, args), "seed": args.seed, "batch_size": args.batch_size, "workers": cores,
                        "options": options if system == "bigtopics" else {}, "max_passes": max_passes,
                        "snapshot_passes": snapshot_schedule(args.passes, max_passes),
                        "max_seconds": args.max_train_seconds, "log": str(work / f"{system}-k{k}.jsonl"),
                        "phase": str(work / f"{system}-k{k}.phase")}
                Path(spec["work"]).mkdir(parents=True)
                ticks = cpu_times()
                run = run_child(spec, hard_limit_s=max(4 * args.max_train_seconds, args.max_train_seconds + 600))
                run.update(system=system, k=k, cpu_steal_percent=steal_percent(ticks, cpu_times()))
                runs.append(run)
                last = run["passes"][-1] if run["passes"] else None
                print(f"trained {system:9s} K={k:<5d} "
                      + (f"{last['pass']} passes in {last['seconds']:.1f} s" if last else "no pass")
                      + f", peak {mib(run['peak_train_mem_mib'])} MiB training, {mib(run['peak_mem_mib'])} MiB "
                      f"with the harness's snapshots; {run.get('stopped', '')}"
                      + ("" if run["cpu_steal_percent"] is None else f"; CPU steal {run['cpu_steal_percent']:.0f}%"),
                      flush=True)
        print("scoring every snapshot with the one evaluator", flush=True)
        eval_start = time.perf_counter()
        evaluate_runs(runs, heldout, train_store, args)
        print(f"  scoring took {time.perf_counter() - eval_start:.0f} s", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    machine = machine_description()
    header = [
        "",
        f"date: {started:%Y-%m-%d %H:%M} UTC; machine: {machine['cpu']}, {machine['cores']} cores, "
        f"{machine['ram_gib']} GiB, Python {machine['python']}",
        f"load average (1, 5, 15 min): {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} at start, "
        + " ".join(f"{x:.2f}" for x in os.getloadavg()) + " at end (above ~0.5 the machine was not quiet)",
        "CPU steal while training (the VM's host giving these cores to others; above a few % the times are not "
        "comparable): " + ", ".join(f"{r['system']} K={r['k']} " + ("n/a" if r["cpu_steal_percent"] is None
                                    else f"{r['cpu_steal_percent']:.0f}%") for r in runs),
        "versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()),
        f"command: {shlex.join([Path(sys.executable).name, *sys.argv])}",
        f"corpus: {store} -> training store {train_store}: {tstore.n_docs:,} documents, {tstore.n_tokens:,} tokens, "
        f"{tstore.n_words:,} words; held out {heldout.n_docs:,} documents (seed {args.seed}), {heldout.n_tokens:,} "
        f"tokens scored ({unseen:,} tokens of words unseen in training dropped)",
        "a pass: bigtopics one epoch (every document sampled burnin + samples sweeps, then a global step per "
        "minibatch); tomotopy one Gibbs sweep; gensim and scikit-learn one online-VB pass",
        f"evaluator: left-to-right, {args.particles} particles, no resampling, alpha {args.alpha or '5/K'}, "
        f"seed {args.seed}; "
        "UMass coherence of the top 10 words on the training store; memory = peak summed PSS of the process tree "
        "while preparing and training (the harness's snapshot conversion apart)",
    ]
    print("\n".join(header))
    figures = {}
    for k in ks:
        lines, figures[k] = report(runs, k, args, tstore.n_tokens)
        print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"header": header, "runs": runs, "summary": figures,
                                               "machine": machine, "versions": versions()}, indent=2, default=str))


if __name__ == "__main__":
    main()
