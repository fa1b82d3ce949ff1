"""The training benchmarks run end to end on a tiny synthetic store (tomotopy only where it is installed)."""

import importlib.util
import json
import subprocess
import sys
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
    figures = tmp_path / "train.json"
    out = run("bench_train.py", "--store", store, "-k", 4, "-k", 8, "--warm", 64, "--docs", 96, "--batch-size", 32,
              "--repeat", 1, "--workers", 1, "--workers", 2, "--option", "samples=1", "--json", figures,
              "--against", BENCHMARKS.parent)
    assert "time per 10k documents, K=8 vs K=4" in out and "'samples': 1" in out
    assert "parallel efficiency at K=8" in out and "per round" in out
    assert f"{BENCHMARKS.parent} against this tree, K=8 workers=2: " in out and "per round: median" in out
    result = json.loads(figures.read_text())
    for runs in (result["runs"], result["against"][str(BENCHMARKS.parent)]):
        assert {(r["k"], r["workers"]) for r in runs} == {(4, 1), (8, 1), (4, 2), (8, 2)}
        assert all(r["docs"] >= 96 and r["tokens_per_s"] > 0 for r in runs)


def test_bench_epoch(store, tmp_path):
    figures = tmp_path / "epoch.json"
    out = run("bench_epoch.py", "--store", store, "-k", 4, "-k", 8, "--workers", 1, "--workers", 2, "--heldout", 20,
              "--json", figures)
    assert "parallel efficiency on 2 threads against 1: K=4" in out and "against K=4 (2 threads): K=8" in out
    assert "one epoch over 33B tokens at K=8 on 2 threads" in out and "local step: sampling" in out
    result = json.loads(figures.read_text())
    runs = result["runs"]
    assert {(r["k"], r["workers"]) for r in runs} == {(4, 1), (8, 1), (4, 2), (8, 2)}
    for r in runs:  # one whole epoch of the 280 training documents, its clocks inside the trainer's phases
        assert r["docs"] == 280 and r["draws"] == r["tokens"] * r["sweeps_per_visit"] == r["tokens"] * 7
        clocked, local = r["clocked_seconds"], r["phase_seconds"]["local_step"]
        assert 0 < clocked["sampling"] and clocked["merge"] > 0 and clocked["beta estimate"] > 0
        inside = clocked["sampling"] + clocked["sampler set-up"] + clocked["merge"] + clocked["beta estimate"]
        assert inside <= local + 0.002  # the metrics log rounds phases to milliseconds
        assert 1 <= r["topics_per_section"] <= r["k"] and 1 <= r["entries_per_row_token_weighted"] <= r["k"]
        assert r["heldout_loglik"] < 0 and r["peak_rss_mib"] > 0 and r["cpu_seconds"] > 0
    assert result["projection"][str(store)]["hours_33b_tokens"] > 0
    machine, = result["machine_efficiency_per_round"]  # the machine's own ceiling, measured in the same run
    assert set(machine) == {"arithmetic", "random reads in cache", "random reads from memory", "random adds to memory"}
    assert all(0.2 < e < 1.5 for e in machine.values())
    assert "round 1/1 this machine's own efficiency on 2 threads against 1: arithmetic" in out
    assert "(machine_scaling.py, after each round)" in out and result["machine_threads"] == 2


def test_machine_efficiency_is_described_as_a_range_over_rounds():
    sys.path.insert(0, str(BENCHMARKS))
    from machine_scaling import describe_efficiency

    line = describe_efficiency({"arithmetic": [0.995, 0.999], "random adds to memory": [0.54, 1.01],
                                "random reads in cache": 0.9}, 2)
    assert line == ("this machine's own efficiency on 2 threads against 1: arithmetic 100%, "
                    "random adds to memory 54%-101%, random reads in cache 90%")


def test_bench_train_beside_tomotopy(store, tmp_path):
    pytest.importorskip("tomotopy")
    figures = tmp_path / "train.json"
    out = run("bench_train.py", "--store", store, "-k", 4, "-k", 8, "--warm", 64, "--docs", 96, "--batch-size", 32,
              "--repeat", 1, "--workers", 1, "--tomotopy", "--tomotopy-sweeps", 2, "--json", figures)
    assert "bigtopics takes" in out and "time per sweep, K=8 vs K=4: tomotopy" in out
    peer = json.loads(figures.read_text())["tomotopy"]
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
