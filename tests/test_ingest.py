import gzip
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import naive
import numpy as np
import pytest
from click.testing import CliRunner

from bigtopics import StoreError, open_store
from bigtopics.cli import main
from bigtopics.ingest import Pruning, describe_store, ingest, pipeline
from bigtopics.input_formats import FormatOptions, InputError
from bigtopics.tokenizer import TokenizerSettings, load_stoplist

NO_PRUNING = Pruning(min_df=1, max_df=1.0, max_vocab=None)
WORDS = "alpha beta gamma delta epsilon zeta theta iota kappa lambda omega sigma".split()


def random_docs(n_docs: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n_docs):
        words = rng.choice(WORDS + ["the", "and", "Über", "naïve"] + [f"w{j}x" for j in range(i % 300)],
                           size=rng.integers(0, 40))
        docs.append({"id": f"d{i}", "text": " ".join(words) + (" 123, x!" if i % 3 else ""), "year": int(1900 + i),
                     "tags": ["t", i % 2]})
    return docs


def write_jsonl(path: Path, docs: list[dict]) -> Path:
    data = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def store_docs(path) -> dict[str, dict[str, int]]:
    """{doc id: {word: count}} of a whole store, read block by block."""
    store = open_store(path)
    vocab, ids, out = store.vocab, store.doc_ids(), {}
    for block in store.iter_blocks(docs_per_block=7):
        for i in range(block.n_docs):
            words, counts = block.row(i)
            assert np.all(np.diff(words.astype(np.int64)) > 0), "rows are sorted by word id"
            out[ids[block.start + i]] = {vocab[w]: int(c) for w, c in zip(words, counts)}
    return out


def run(inputs, out, **kw):
    kw.setdefault("pruning", NO_PRUNING)
    kw.setdefault("workers", 1)
    return ingest(inputs, out, quiet=True, log=lambda m: None, **kw)


def test_round_trip_counts_are_exact(tmp_path):
    docs = random_docs(60)
    report = run(write_jsonl(tmp_path / "in.jsonl.gz", docs), tmp_path / "s.zarr")
    stop = load_stoplist("en")
    expected = {d["id"]: bow for d in docs if (bow := naive.bag_of_words(d["text"], stop=stop))}
    assert store_docs(tmp_path / "s.zarr") == expected
    store = open_store(tmp_path / "s.zarr")
    assert store.n_docs == len(expected) == report.n_docs
    assert report.stats["empty_docs_dropped"] == len(docs) - len(expected)
    assert store.n_tokens == sum(sum(b.values()) for b in expected.values())
    totals = {}
    for bow in expected.values():
        for w, c in bow.items():
            totals[w] = totals.get(w, 0) + c
    assert dict(zip(store.vocab, store.term_counts.tolist())) == totals
    # id 0 is the most frequent word; ties are broken by the word
    assert list(store.vocab) == sorted(totals, key=lambda w: (-totals[w], w))
    assert store.attrs["settings"]["tokenizer"] == TokenizerSettings().to_dict()


def test_metadata_fields_are_typed(tmp_path):
    docs = [{"id": "a", "text": "alpha beta", "year": 1900, "score": 1.5, "ok": True, "tags": ["x"]},
            {"id": "b", "text": "gamma delta", "year": 1901, "ok": False, "tags": {"k": 1}}]
    run(write_jsonl(tmp_path / "in.jsonl", docs), tmp_path / "s.zarr")
    store = open_store(tmp_path / "s.zarr")
    assert store.metadata_fields == ["ok", "score", "tags", "year"]
    assert store.metadata("year").tolist() == [1900, 1901]
    assert store.metadata("ok").tolist() == [True, False]
    score = store.metadata("score")
    assert score[0] == 1.5 and math.isnan(score[1])
    assert store.metadata("tags").tolist() == ['["x"]', '{"k": 1}']


def test_txt_directory_lines_and_tsv(tmp_path):
    (tmp_path / "books" / "sub").mkdir(parents=True)
    (tmp_path / "books" / "a.txt").write_text("alpha beta beta")
    (tmp_path / "books" / "sub" / "b").write_bytes(gzip.compress("gamma Über".encode()))
    run(tmp_path / "books", tmp_path / "t.zarr")
    assert store_docs(tmp_path / "t.zarr") == {"a.txt": {"beta": 2, "alpha": 1}, "sub/b": {"gamma": 1, "über": 1}}

    (tmp_path / "docs.txt").write_text("alpha beta\n\ngamma\n")
    report = run(tmp_path / "docs.txt", tmp_path / "l.zarr", formats=FormatOptions(format="lines"))
    assert store_docs(tmp_path / "l.zarr") == {"docs.txt:1": {"alpha": 1, "beta": 1}, "docs.txt:3": {"gamma": 1}}
    assert report.stats["empty_docs_dropped"] == 1

    (tmp_path / "m.tsv").write_text("d1\tpos\talpha alpha\nd2\tneg\tbeta\n")
    run(tmp_path / "m.tsv", tmp_path / "m.zarr")
    assert store_docs(tmp_path / "m.zarr") == {"d1": {"alpha": 2}, "d2": {"beta": 1}}
    assert open_store(tmp_path / "m.zarr").metadata("label").tolist() == ["pos", "neg"]


def test_bow_jsonl(tmp_path):
    """Pre-counted words are kept as given (lowercased), stop words excepted: someone else tokenized them."""
    docs = [{"id": "v1", "counts": {"Apple": 2, "apple": 1, "the": 5, "it's": 3, "pear": 4, "c++": 1, "x11": 2,
                                    "mp3": 1, "w00001": 1, "ox": 6}, "vol": 1},
            {"id": "v2", "counts": {"pear": 1, "C++": 2}, "vol": 2}]
    report = run(write_jsonl(tmp_path / "bow.jsonl", docs), tmp_path / "b.zarr",
                 formats=FormatOptions(format="bow-jsonl"))
    assert store_docs(tmp_path / "b.zarr") == {
        "v1": {"apple": 3, "it's": 3, "pear": 4, "c++": 1, "x11": 2, "mp3": 1, "w00001": 1, "ox": 6},
        "v2": {"pear": 1, "c++": 2}}
    assert open_store(tmp_path / "b.zarr").metadata("vol").tolist() == [1, 2]
    assert report.stats["raw_tokens"] == 29 and report.stats["stop_tokens"] == 5
    (tmp_path / "empty.jsonl").write_text(json.dumps({"id": "v3", "counts": {" ": 1}}) + "\n")
    with pytest.raises(InputError, match="empty.jsonl:1: field 'counts' has an empty word"):
        run(tmp_path / "empty.jsonl", tmp_path / "e.zarr", formats=FormatOptions(format="bow-jsonl"))


def test_sections(tmp_path):
    text = " ".join(f"w{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(250))  # 250 distinct words
    write_jsonl(tmp_path / "in.jsonl", [{"id": "book", "text": text}, {"id": "short", "text": "alpha beta"}])
    run(tmp_path / "in.jsonl", tmp_path / "s.zarr", section_tokens=100, tokenizer=TokenizerSettings(stoplist="none"))
    store = open_store(tmp_path / "s.zarr")
    assert store.doc_ids().tolist() == ["book#0", "book#1", "short#0"]
    assert store.read_docs(0, 3).doc_lengths.tolist() == [125, 125, 2]
    assert store.metadata("section_of").tolist() == ["book", "book", "short"]
    assert store.metadata("section_index").tolist() == [0, 1, 0]


def test_pruning_rules(tmp_path):
    # df: common 10/10, mid 5/10, rare 1/10; term counts: mid 5*3=15, pair_a = pair_b = 4
    docs = [{"id": str(i), "text": "common " + ("mid mid mid " if i < 5 else "") + ("rare " if i == 0 else "")
             + ("pairb pairb paira paira" if i in (1, 2) else "")} for i in range(10)]
    src = write_jsonl(tmp_path / "in.jsonl", docs)
    report = run(src, tmp_path / "a.zarr", pruning=Pruning(min_df=2, max_df=0.9, max_vocab=2))
    assert list(open_store(tmp_path / "a.zarr").vocab) == ["mid", "paira"]  # pairb loses the tie to paira
    assert report.pruned["min_df"] == (1, 1) and report.pruned["max_df"] == (1, 10)
    assert report.pruned["max_vocab"] == (1, 4)
    assert "min-df 2" in report.summary() and "max-vocab 2" in report.summary()


@pytest.mark.slow
def test_one_and_two_workers_write_identical_stores(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", random_docs(3000, seed=1))
    run(src, tmp_path / "w1.zarr", workers=1, pruning=Pruning(min_df=2, max_df=0.9))
    run(src, tmp_path / "w2.zarr", workers=2, pruning=Pruning(min_df=2, max_df=0.9), unit_bytes=20_000)
    one, two = open_store(tmp_path / "w1.zarr"), open_store(tmp_path / "w2.zarr")
    assert one.attrs == two.attrs and one.n_docs > 2000
    for name in ("indptr", "indices", "data", "vocab", "doc_ids", "term_counts", "doc_freqs", "doc_meta/year"):
        assert np.array_equal(one.group[name][:], two.group[name][:]), name


def test_bad_inputs_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "text": "alpha"}\nnot json\n')
    with pytest.raises(InputError, match="bad.jsonl:2: malformed JSON"):
        run(bad, tmp_path / "x.zarr")
    assert not (tmp_path / "x.zarr").exists() and not list(tmp_path.glob(".x.zarr*"))
    report = run(bad, tmp_path / "x.zarr", formats=FormatOptions(skip_bad=True))
    assert report.stats["bad_lines_skipped"] == 1 and report.n_docs == 1

    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(b'{"text": "alpha beta"}\n' * 5000)[:-100])
    result = CliRunner().invoke(main, ["ingest", str(cut), "-o", str(tmp_path / "c.zarr"), "--quiet"])
    assert result.exit_code == 1 and "cut.jsonl.gz" in result.output and "Traceback" not in result.output

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "a.txt").write_bytes(b"alpha caf\xe9 beta")
    (mixed / "b.bin").write_bytes(b"\0\1\2alpha")
    (mixed / "c.txt").write_text("   ")
    report = run(mixed, tmp_path / "m.zarr")
    s = report.stats
    assert (s["invalid_utf8_docs"], s["binary_files_skipped"], s["empty_docs_dropped"], report.n_docs) == (1, 1, 1, 1)
    assert "1 binary-looking files" in report.summary()


def test_existing_output_needs_overwrite(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", random_docs(5))
    run(src, tmp_path / "s.zarr")
    with pytest.raises(FileExistsError):
        run(src, tmp_path / "s.zarr")
    run(src, tmp_path / "s.zarr", overwrite=True)
    result = CliRunner().invoke(main, ["ingest", str(src), "-o", str(tmp_path / "s.zarr")])
    assert result.exit_code == 1 and "--overwrite" in result.output


@pytest.mark.slow
def test_overwrite_replaces_only_earlier_output_and_never_an_input(tmp_path):
    texts = tmp_path / "texts"
    texts.mkdir()
    for i, doc in enumerate(random_docs(6)):
        (texts / f"{i}.txt").write_text(doc["text"])
    before = sorted(p.name for p in texts.iterdir())
    with pytest.raises(ValueError, match="holds the input"):
        run(texts, texts, overwrite=True)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not bigtopics output"):
        run(texts, mine, overwrite=True)
    (mine / "notes.txt").unlink()
    (mine / ".git").mkdir()  # hidden, and the user's all the same
    with pytest.raises(FileExistsError, match="not bigtopics output"):
        run(texts, mine, overwrite=True)
    (mine / "notes.txt").write_text("keep me")
    (mine / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {"format_version": 1}}')
    with pytest.raises(FileExistsError, match="not bigtopics output"):  # another tool's Zarr group
        run(texts, mine, overwrite=True)
    assert sorted(p.name for p in texts.iterdir()) == before and (mine / "notes.txt").read_text() == "keep me"

    # a store written inside the input folder is not read as input by the next ingest
    first = run(texts, texts / "first.zarr")
    second = run(texts, texts / "second.zarr", workers=2)
    assert (second.n_docs, second.stats["binary_files_skipped"]) == (first.n_docs, 0)
    assert store_docs(texts / "second.zarr") == store_docs(texts / "first.zarr")


def test_input_without_documents_writes_nothing(tmp_path):
    (tmp_path / "noise.gz").write_bytes(np.random.default_rng(0).bytes(3000))
    for source in (tmp_path / "noise.gz", write_jsonl(tmp_path / "digits.jsonl", [{"text": "12 34 !"}] * 3)):
        with pytest.raises(InputError, match="no document with a word"):
            run(source, tmp_path / "out.zarr")
        assert not list(tmp_path.glob("*out.zarr*"))
    result = CliRunner().invoke(main, ["ingest", str(tmp_path / "digits.jsonl"), "-o", str(tmp_path / "w.zarr"),
                                       "--workers", "-1", "--quiet"])
    assert result.exit_code == 2 and "--workers" in result.output


def test_a_damaged_store_is_an_error_not_wrong_documents(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", random_docs(50))
    run(src, tmp_path / "s.zarr")
    chunk = tmp_path / "s.zarr" / "indices" / "c" / "0"
    intact = chunk.read_bytes()
    chunk.unlink()  # zarr alone would read it as word 0 everywhere
    with pytest.raises(StoreError, match="1 of the 1 chunks of indices are missing"):
        open_store(tmp_path / "s.zarr")
    chunk.write_bytes(intact[: len(intact) // 2])
    store = open_store(tmp_path / "s.zarr")
    with pytest.raises(StoreError, match="damaged: documents 0-"):
        store.read_docs(0, store.n_docs)


@pytest.mark.slow
def test_killed_ingest_leaves_no_valid_store(tmp_path):
    src = tmp_path / "big.jsonl"
    src.write_bytes("".join(json.dumps(d) + "\n" for d in random_docs(2000)).encode() * 100)
    out = tmp_path / "k.zarr"
    proc = subprocess.Popen([sys.executable, "-m", "bigtopics.cli", "ingest", str(src), "-o", str(out),
                             "--workers", "2", "--quiet"], start_new_session=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".k.zarr.spill-*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "ingest finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    with pytest.raises(StoreError):
        open_store(out)


def test_info_describes_the_store(tmp_path):
    run(write_jsonl(tmp_path / "in.jsonl", random_docs(40)), tmp_path / "s.zarr")
    text = describe_store(open_store(tmp_path / "s.zarr"))
    for key in ("documents", "tokens", "nnz", "codec", "ratio", "chunking", "metadata    tags, year", "top words"):
        assert key in text
    result = CliRunner().invoke(main, ["info", str(tmp_path / "s.zarr")])
    assert result.exit_code == 0 and "alpha" in result.output


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to narrow to one")
def test_by_default_a_worker_per_core_it_may_use_not_per_core_of_the_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "SMALL_INPUT_BYTES", 1)  # the smallest input is work enough for every core
    docs = write_jsonl(tmp_path / "in.jsonl", random_docs(20))
    everything = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(everything)})
    try:
        report = run(docs, tmp_path / "s.zarr", workers=0)
    finally:
        os.sched_setaffinity(0, everything)
    assert report.n_workers == 1
