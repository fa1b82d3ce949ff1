"""The same seed and settings give the same model, bit for bit, as the code that recorded
tests/golden_models.json (recorded before the seams refactor; rerun with --record-golden only
when a change is meant to change results, and say so in the commit).

Each case trains from the CLI on the built-in demo books (sections of 500 tokens) and hashes
the written model's arrays (topic totals in float64, the word-major CSR statistics).
"""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from bigtopics.cli import main

GOLDEN = Path(__file__).with_name("golden_models.json")
COMMON = ["-k", "12", "--seed", "5", "--max-docs", "1200", "--checkpoint-every", "3", "--quiet"]
CASES = {
    "gibbs-buckets": ["--sampler", "buckets"],
    "gibbs-alias": ["--sampler", "alias"],
    "gibbs-mh": ["--sampler", "mh", "--mh-steps", "3"],
    "gibbs-word-major": [],
    "gibbs-word-major-warm-start": ["--epochs", "2", "--max-docs", "2400", "--batch-size", "300"],
    "gibbs-geometric": ["--sampler", "buckets", "--beta-estimate", "geometric"],
    "gibbs-exclude-own-heldout": ["--sampler", "buckets", "--epochs", "2", "--max-docs", "2400", "--heldout", "40",
                                  "--batch-size", "300"],
    "vb": ["--local-step", "vb", "--batch-size", "400"],
    "lsparse": ["--local-step", "lsparse", "--top-l", "4", "--batch-size", "400"],
    "scvb0": ["--local-step", "scvb0", "--batch-size", "400"],
}


def model_hash(run: Path) -> str:
    group = zarr.open_group(run / "model.zarr", mode="r")
    digest = hashlib.sha256()
    for name in ("topic_totals", "word_topic/indptr", "word_topic/indices", "word_topic/data"):
        values = np.asarray(group[name][:])
        digest.update(name.encode() + values.dtype.str.encode() + values.tobytes())
    return digest.hexdigest()


def train_case(store: Path, run: Path, args: list[str], workers: int) -> str:
    result = CliRunner().invoke(main, ["train", str(store), "-o", str(run), *COMMON, *args,
                                       "--workers", str(workers)])
    assert result.exit_code == 0, result.output
    return model_hash(run)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_model_is_bit_identical_to_the_recorded_one(demo_store, tmp_path, case, request):
    hashes = {workers: train_case(demo_store, tmp_path / f"w{workers}", CASES[case], workers) for workers in (1, 2)}
    assert hashes[1] == hashes[2], "the model depends on the number of workers"
    if request.config.getoption("--record-golden"):
        recorded = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        GOLDEN.write_text(json.dumps({**recorded, case: hashes[1]}, indent=2, sort_keys=True) + "\n")
    assert hashes[1] == json.loads(GOLDEN.read_text())[case]
