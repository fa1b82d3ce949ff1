"""The training benchmarks run end to end on a tiny synthetic store (tomotopy only where it is installed)."""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bigtopics.settings import scale_doc_count
from bigtopics.synth import CorpusSpec, write_corpus

pytestmark = pytest.mark.slow  # benchmark smoke tests: each runs a script end to end

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "tiny.zarr"
    write_corpus(CorpusSpec(n_docs=300, n_topics=4, n_words=200, mean_length=30, seed=5), path, "store")
    return path


def run(script, *args, timeout=600):
    out = subprocess.run([sys.executable, str(BENCHMARKS / script), *map(str, args)], capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_bench_train(store, tmp_path):
    """bench_train.py's whole report in one run (each of its runs is a process that compiles the
    kernels): K against K, parallel efficiency, this tree against another checkout (here itself),
    and tomotopy's sweeps where it is installed."""
    figures = tmp_path / "train.json"
    beside = ["--tomotopy", "--tomotopy-sweeps", 2] if importlib.util.find_spec("tomotopy") else []
    out = run("bench_train.py", "--store", store, "-k", 4, "-k", 8, "--warm", 64, "--docs", 96, "--batch-size", 32,
              "--repeat", 1, "--workers", 1, "--workers", 2, "--option", "samples=1", "--json", figures,
              "--against", BENCHMARKS.parent, *beside)
    assert "time per 10k documents, K=8 vs K=4" in out and "'samples': 1" in out
    assert "parallel efficiency at K=8" in out and "per round" in out
    assert f"{BENCHMARKS.parent} against this tree, K=8 workers=2: " in out and "per round: median" in out
    result = json.loads(figures.read_text())
    for runs in (result["runs"], result["against"][str(BENCHMARKS.parent)]):
        assert {(r["k"], r["workers"]) for r in runs} == {(4, 1), (8, 1), (4, 2), (8, 2)}
        assert all(r["docs"] >= 96 and r["tokens_per_s"] > 0 for r in runs)
    if beside:
        assert "bigtopics takes" in out and "time per sweep, K=8 vs K=4: tomotopy" in out
        peer = result["tomotopy"]
        assert sorted(peer) == ["4", "8"] and all(len(p["sweep_seconds"]) == 2 for p in peer.values())


def test_bench_local_steps(store, tmp_path):
    figures = tmp_path / "steps.json"
    out = run("bench_local_steps.py", "--store", store, "-k", 4, "--steps", "gibbs:mh,vb", "--warm", 32,
              "--docs", 64, "--batch-size", 32, "--curve-k", 4, "--curve-seconds", 0.5, "--heldout", 20,
              "--json", figures)
    assert "time per 10k documents relative to the same step" in out
    result = json.loads(figures.read_text())
    assert [r["step"] for r in result["speed"]] == ["gibbs:mh", "vb"]
    assert all("error" not in r for r in result["speed"])
    assert all(c["curve"] and c["curve"][-1][2] < 0 for c in result["curves"])


def test_bench_scale(tmp_path):
    out = run("bench_scale.py", "--dir", tmp_path, "--docs", 2000, "--mean-length", 20, "--vocab", 300,
              "--true-topics", 5, "-k", 5, "--heldout", 50, "--poll", 0.2)
    assert "44M documents / 33B tokens" in out
    result = json.loads((tmp_path / "scale.json").read_text())
    kept_out = 50 + scale_doc_count(2000 - 50)  # held out, and kept out to fit the learned alpha's scale
    assert result["corpus"]["docs"] == 2000 and result["train"]["docs"] == 2000 - kept_out
    assert result["memory"]["peak_rss_bytes"] > 0 and result["checkpoints"]
    assert "mean best-match cosine" in out and 0 < result["recovery"]["mean_best_match_cosine"] <= 1


# A child that marks its phases as bench_peers' children do: 400 MiB held only while it says
# "snapshot", released before it says "train" again.
PHASED_CHILD = """
import sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from systems import write_phase
from pathlib import Path

phase = Path(sys.argv[2])
write_phase(phase, 1, "train")
time.sleep(1.0)
write_phase(phase, 2, "snapshot")
ballast = np.ones(400 * 2**20, np.uint8)
time.sleep(1.0)
del ballast
write_phase(phase, 3, "train")
time.sleep(0.6)
"""


def test_bench_peers_leaves_snapshot_memory_out_of_the_training_peak(tmp_path):
    sys.path.insert(0, str(BENCHMARKS))
    from bench_peers import watch_memory

    proc = subprocess.Popen([sys.executable, "-c", PHASED_CHILD, str(BENCHMARKS), str(tmp_path / "phase")])
    peak, train_peak, killed = watch_memory(proc, tmp_path / "phase", hard_limit_s=60)
    assert proc.returncode == 0 and not killed
    assert peak > 400 * 2**20
    assert 0 < train_peak < peak - 300 * 2**20


def test_steal_percent_is_the_stolen_share_of_the_ticks_between_two_readings():
    sys.path.insert(0, str(BENCHMARKS))
    from bench_peers import cpu_times, steal_percent

    assert steal_percent((10, 1000), (60, 1500)) == 10.0
    assert steal_percent((10, 1000), (10, 1000)) is None  # no time passed
    assert steal_percent(None, (10, 1000)) is None  # not Linux
    now = cpu_times()
    if now is not None:
        assert 0 <= now[0] <= now[1]



def test_bench_shared_base(tmp_path):
    systems = "bigtopics,tomotopy" if importlib.util.find_spec("tomotopy") else "bigtopics"
    figures = tmp_path / "shared.json"
    out = run("bench_shared_base.py", "--docs", 600, "-k", 4, "--vocab", 300, "--mean-length", 40, "--true-eta", 0.1,
              "--heldout", 50, "--passes", 2, "--systems", systems, "-o", "batch_size=64", "--cache", tmp_path,
              "--json", figures)
    result = json.loads(figures.read_text())
    assert result["truth"] > result["unigram"]  # the true topics predict held-out text better than word frequencies
    for name in systems.split(","):
        curve = result["curves"][name]
        assert [p["mark"] for p in curve] == [round(2 * f, 2) for f in (1 / 6, 1 / 3, 2 / 3, 1)]
        assert all(p["passes"] >= p["mark"] and 0 < p["cosine"] <= 1 and 1 <= p["distinct_top10"] <= 4 for p in curve)
    assert '"batch_size": 64' in out and "distinct" in out


SPINNER = [sys.executable, "-c", "while True:\n    pass\n"]  # bench_shared.SPIN


def spinners() -> list:
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline"]):
        if p.info["cmdline"] == SPINNER:
            found.append(p)
    return found


def command_line(process) -> str:
    """A process's command line, or "" once it has exited (a child that has ended but not yet been
    reaped by its parent is a zombie, whose command line psutil refuses to read)."""
    import psutil

    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def test_bench_shared(store, tmp_path):
    """Every system with its default threads alone and beside two busy processes, bigtopics alone on
    1 and 2 fixed threads too; the table's slowdowns and efficiency are the ratios of the rates it
    reports; no spinner outlives it."""
    peer = importlib.util.find_spec("tomotopy") is not None
    figures = tmp_path / "shared.json"
    out = run("bench_shared.py", "--store", store, "--heldout-docs", 20, "-k", 4, "--seconds", 1.5, "--busy", "0,2",
              "--threads", 2, "--systems", "bigtopics,tomotopy", "--cache", tmp_path, "--json", figures)
    result = json.loads(figures.read_text())
    systems = ["bigtopics", "tomotopy"] if peer else ["bigtopics"]
    assert ("skipping tomotopy" in out) != peer
    runs = {(r["system"], r["threads"], r["busy"]): r for r in result["runs"]}
    expected = {("bigtopics", 0, 0), ("bigtopics", 0, 2), ("bigtopics", 2, 0), ("bigtopics", 1, 0)} | (
        {("tomotopy", 0, 0), ("tomotopy", 0, 2)} if peer else set())
    assert set(runs) == expected
    for r in runs.values():
        assert r["passes"] >= 1 and 0 < r["seconds"] and r["passes_per_minute"] == 60 * r["passes"] / r["seconds"]
    summary = result["summary"]["4"]
    for system in systems:
        alone, beside = runs[(system, 0, 0)], runs[(system, 0, 2)]
        figures_k = summary[system]
        assert figures_k["alone"] == alone["passes_per_minute"]
        assert figures_k["slowdown"]["2"] == alone["passes_per_minute"] / beside["passes_per_minute"]
        assert f"{figures_k['slowdown']['2']:10.2f}x" in out
    efficiency = runs[("bigtopics", 2, 0)]["passes_per_minute"] / (2 * runs[("bigtopics", 1, 0)]["passes_per_minute"])
    assert summary["bigtopics_parallel_efficiency"] == efficiency
    assert "parallel efficiency on 2 threads at K = 4: " in out and f"= {100 * efficiency:.0f}%" in out
    assert not spinners()


def test_bench_shared_busy_processes_run_in_another_session_and_die_with_it(store, tmp_path):
    """A spinner is in a session of its own (autogroup: else it would cost the training nothing),
    and SIGTERM to the benchmark mid-run (3 s alone, then beside the spinner) kills it and the
    training child."""
    import psutil

    system = "tomotopy" if importlib.util.find_spec("tomotopy") else "bigtopics"
    bench = subprocess.Popen([sys.executable, str(BENCHMARKS / "bench_shared.py"), "--store", str(store),
                              "--heldout-docs", "20", "-k", "4", "--seconds", "3", "--busy", "0,1", "--threads", "1",
                              "--systems", system, "--cache", str(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 900
        while True:  # the spinner starts first, then the child that trains beside it
            found = [p for p in spinners() if p.ppid() == bench.pid]
            training = [p for p in psutil.Process(bench.pid).children() if "systems.py" in command_line(p)]
            if found and training:
                break
            assert bench.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        assert os.getsid(found[0].pid) != os.getsid(bench.pid) == os.getsid(0)
        bench.terminate()
        bench.wait(timeout=60)
        psutil.wait_procs(found + training, timeout=10)
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in found + training)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
