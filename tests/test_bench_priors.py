"""benchmarks/bench_priors.py runs end to end on a tiny synthetic store."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bigtopics.local_steps.gibbs import REVISITING
from bigtopics.synth import CorpusSpec, write_corpus

pytestmark = pytest.mark.slow  # a benchmark smoke test

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_priors.py"


def test_bench_priors_scores_every_system_and_measures_the_update(tmp_path):
    store = tmp_path / "tiny.zarr"
    write_corpus(CorpusSpec(n_docs=400, n_topics=4, n_words=200, mean_length=30, seed=5, alpha_skew=1.0), store,
                 "store")
    systems = "bigtopics,bigtopics-fixed,bigtopics-learned" + (
        ",tomotopy,tomotopy-fixed" if importlib.util.find_spec("tomotopy") else "")
    output = tmp_path / "priors.jsonl"
    common = [sys.executable, str(SCRIPT), "--store", str(store), "-k", "4", "--seconds", "2", "--heldout-docs", "40",
              "--cache", str(tmp_path / "cache")]
    out = subprocess.run([*common, "--systems", systems, "--output", str(output)], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    results = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["system"] for r in results] == systems.split(",")
    for r in results:
        assert r["left-to-right"] < 0 and r["completion"] < 0 and r["coherence"] < 0 and r["seconds"] >= 2
        assert 0 < r["cosine"] <= 1 + 1e-9 and 1 <= r["distinct_top10"] <= 4  # the store's true topics are beside it
    # a run by time trains for 1,000,000 epochs, so the revisiting default settles at its largest
    assert next(r for r in results if r["system"] == "bigtopics")["batch_size"] == REVISITING.batch_size
    fixed = next(r for r in results if r["system"] == "bigtopics-fixed")
    assert fixed["alpha_sum"] == pytest.approx(5.0) and fixed["eta"] == 0.01
    stepped = tmp_path / "vb.jsonl"
    # without the floor, which could hold vb's learned alpha_0 at its start of 5, so the check below sees it move
    out = subprocess.run([*common, "--systems", "bigtopics-alpha", "--step", "local_step=vb", "--step",
                          "optimize_burn_in=1", "--step", "min_alpha_sum=0", "--output", str(stepped)],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    (vb,) = [json.loads(line) for line in stepped.read_text().splitlines()]
    assert vb["local_step"] == "vb" and vb["alpha_sum"] != pytest.approx(5.0) and vb["left-to-right"] < 0
    by_epochs = tmp_path / "epochs.jsonl"
    out = subprocess.run([*common, "--systems", "bigtopics", "--epochs", "2", "--step", "batch_size=64", "--output",
                          str(by_epochs)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    (two,) = [json.loads(line) for line in by_epochs.read_text().splitlines()]
    assert two["epochs"] == 2 and two["batch_size"] == 64 and two["minibatches"] == 2 * -(-360 // 64)  # 360 documents
    assert [line.split(":")[0].strip() for line in out.stdout.splitlines() if "alpha_0" in line] == [
        "step 1", "step 2", "step 4", "step 8"]
    out = subprocess.run([*common, "--update-cost"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "K=4:" in out.stdout and "a minibatch" in out.stdout
