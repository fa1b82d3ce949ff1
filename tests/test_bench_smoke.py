import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # benchmark smoke tests: each runs a script end to end

pytest.importorskip("sklearn")
pytest.importorskip("gensim")

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_ingest.py"


def test_bench_ingest_runs_on_a_tiny_corpus(tmp_path):
    corpus = tmp_path / "tiny.jsonl.gz"
    lines = [json.dumps({"id": i, "text": f"alpha beta gamma delta word{chr(97 + i % 5)}x"}) for i in range(50)]
    corpus.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    out = subprocess.run([sys.executable, str(BENCH), "--corpus", str(corpus), "--replicate", "2", "--workers", "1"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    for expected in ("bigtopics", "sklearn", "gensim", "the faster peer", "replicated 2x"):
        assert expected in out.stdout
