"""Ingest at library scale (issue 24): an OCR-like corpus (tools/ocr_corpus.py) gives, bit for bit,
the store recorded from the ingest of before the vocabulary was merged from disk: same vocabulary,
ids, counts and documents, whatever the memory budget (how many spills) and number of workers."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bigtopics import open_store
from bigtopics.ingest import Pruning, ingest, runs
from bigtopics.ingest.pipeline import MIN_BUDGET

TOOL = Path(__file__).resolve().parents[1] / "tools" / "ocr_corpus.py"
NO_PRUNING = Pruning(min_df=1, max_df=1.0, max_vocab=None)
SMALL_VOCAB = Pruning(min_df=2, max_df=0.5, max_vocab=2000)  # cuts among words of equal counts (ties by word)
# Non-ASCII words, a bow-free mix of cases, and a word that is a stop word: the slow paths of the tokenizer.
EXTRA_DOCS = [{"id": "unicode-1", "text": "Über naïve café CAFÉ the Straße straße ÜBER bajodi"},
              {"id": "unicode-2", "text": "naïve café Ωmega ωmega ωμέγα ωμέγα the and"}]

# sha256 of the stores the ingest of commit d0d7a12 wrote (see store_digest), for each case below.
NOTHING = [0, 0]
RECORDED = {
    "small_vocab": ["8af9ef0af74decc07c9b4cc5ae508ebcbdae37277b1e797bbd6cffa8faf26708",
                    {"zero": NOTHING, "min_df": [120026, 120030], "max_df": [8, 30519], "max_vocab": [2961, 21168]}],
    "no_pruning": ["507a42080391163999cac75f17c1397a23487e9142dfad0dcf5e3c94b45f8251",
                   {"zero": NOTHING, "min_df": NOTHING, "max_df": NOTHING, "max_vocab": NOTHING}],
    "fixed_vocabulary": ["0e368d7562908ec074a4776e6ac058a0a1f74ef137f0aa33cf22cad3111201d0",
                         {"out_of_vocabulary": [120962, 127102]}],
}


def store_digest(path) -> str:
    """sha256 of what a store holds: vocabulary (ids are positions), term counts, document
    frequencies, document ids and every row (word ids and counts)."""
    store = open_store(path)
    h = hashlib.sha256()
    h.update("\n".join(map(str, store.vocab)).encode())
    h.update(np.asarray(store.term_counts, np.int64).tobytes())
    h.update(np.asarray(store.doc_freqs, np.int64).tobytes())
    h.update("\n".join(map(str, store.doc_ids())).encode())
    block = store.read_docs(0, store.n_docs)
    for a in (block.indptr, block.indices, block.data):
        h.update(np.asarray(a, np.int64).tobytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def ocr(tmp_path_factory) -> Path:
    """3,002 OCR-like documents: 60 Zipfian words of 5,000 and 40 junk strings each, and two of Unicode."""
    root = tmp_path_factory.mktemp("ocr")
    subprocess.run([sys.executable, str(TOOL), str(root / "gen.jsonl"), "--docs", "3000", "--vocab", "5000",
                    "--seed", "7"], check=True, capture_output=True)
    subprocess.run([sys.executable, str(TOOL), str(root / "other.jsonl"), "--docs", "500", "--vocab", "5000",
                    "--seed", "8"], check=True, capture_output=True)
    lines = (root / "gen.jsonl").read_text()
    (root / "ocr.jsonl").write_text(lines + "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in EXTRA_DOCS))
    return root / "ocr.jsonl"


def run(ocr, out, **kw):
    kw.setdefault("workers", 1)
    kw.setdefault("log", lambda m: None)
    return ingest(ocr, out, quiet=True, **kw)


def cases(ocr, tmp: Path, **kw) -> dict[str, list]:
    """[store digest, words and tokens pruned by each rule] of each recorded case, ingested with
    `kw` (memory limit, workers)."""
    out = {}
    report = run(ocr, tmp / "small.zarr", pruning=SMALL_VOCAB, **kw)
    out["small_vocab"] = [store_digest(tmp / "small.zarr"), report.pruned]
    report = run(ocr, tmp / "all.zarr", pruning=NO_PRUNING, **kw)
    out["no_pruning"] = [store_digest(tmp / "all.zarr"), report.pruned]
    # The vocabulary of another corpus (its junk never occurs here; many of its words are rare here)
    run(ocr.with_name("other.jsonl"), tmp / "other.zarr", pruning=NO_PRUNING, **kw)
    report = run(ocr, tmp / "fixed.zarr", vocabulary=tmp / "other.zarr", **kw)
    out["fixed_vocabulary"] = [store_digest(tmp / "fixed.zarr"), report.pruned]
    return json.loads(json.dumps(out))  # tuples as lists, as recorded


def test_ocr_like_corpus_gives_the_recorded_stores(ocr, tmp_path):
    assert cases(ocr, tmp_path) == RECORDED


def test_a_small_memory_budget_spills_many_runs_and_gives_the_same_stores(ocr, tmp_path):
    assert cases(ocr, tmp_path, memory_limit=MIN_BUDGET, unit_bytes=1 << 16) == RECORDED
    report = run(ocr, tmp_path / "again.zarr", pruning=SMALL_VOCAB, memory_limit=MIN_BUDGET, unit_bytes=1 << 16)
    assert report.n_runs >= 4
    assert report.n_distinct == 124_995  # nearly all of the 120,000 junk strings, the words seen, the Unicode ones
    assert f"{report.n_distinct:,} distinct words seen, spilled in {report.n_runs} runs" in report.summary()


@pytest.mark.slow
def test_words_of_equal_hashes_are_still_told_apart(ocr, tmp_path, monkeypatch):
    """The merge's path for a 64-bit hash collision (grouping by the words themselves) is exact too."""
    monkeypatch.setattr(runs, "group_same_words", lambda *args: (np.zeros(0, np.int64), False))
    assert cases(ocr, tmp_path, memory_limit=MIN_BUDGET, unit_bytes=1 << 16) == RECORDED


def test_partitions_are_read_as_many_at_a_time_as_fit_the_budget():
    bounds = np.arange(runs.N_PARTITIONS + 1) * 1000  # 1,000 words of 5 characters a partition, in each run
    two_runs = [{"bounds": bounds.tolist(), "n_chars": 5 * int(bounds[-1])}] * 2
    groups = runs.partition_groups(two_runs, budget=2000 * 3 * (40 + 20) * 16)
    assert groups == [(p, p + 16) for p in range(0, runs.N_PARTITIONS, 16)]
    assert runs.partition_groups(two_runs, budget=1) == [(p, p + 1) for p in range(runs.N_PARTITIONS)]


@pytest.mark.slow
def test_worker_processes_give_the_same_stores(ocr, tmp_path):
    assert cases(ocr, tmp_path, workers=2, memory_limit=MIN_BUDGET, unit_bytes=1 << 16) == RECORDED
