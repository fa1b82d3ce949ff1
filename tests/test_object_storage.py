"""Stores and document topics on object storage: a real S3 endpoint on 127.0.0.1 (moto's server
mode, tests/s3server.py), memory:// and zarr store objects.

What a user relies on: a store ingested to s3:// holds the same arrays as a local ingest; it opens
from a URL with the environment's or the given credentials, and reopens from a pickle in another
process; a store an ingest did not finish is refused; --overwrite replaces only bigtopics' own
output; a missing bucket, wrong credentials, an unreachable endpoint or a missing filesystem
package are one line each, fast; infer reads from and writes to s3://. (moto answers a request
in tens of milliseconds, so an ingest to it takes seconds: most tests here are marked slow.)
"""

from __future__ import annotations

import json
import pickle
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

pytest.importorskip("s3fs")
pytest.importorskip("moto")

from s3server import KEY_ID, SECRET, s3_fixture, s3_server_fixture  # noqa: E402,F401 (fixtures `s3`, `s3_server`)

from bigtopics.cli import main  # noqa: E402
from bigtopics.doc_topics import DocTopics  # noqa: E402
from bigtopics.infer import InferSettings, infer  # noqa: E402
from bigtopics.ingest import describe_store, ingest  # noqa: E402
from bigtopics.outputs import UNFINISHED  # noqa: E402
from bigtopics.store import Store, StoreError, StoreWriter, open_store  # noqa: E402


def write_corpus(folder, n_docs: int = 60, seed: int = 0):
    """jsonl documents of Zipf-distributed made-up words, with a title and a year."""
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    words = ["".join(rng.choice(letters, rng.integers(4, 9))) for _ in range(400)]
    p = 1 / np.arange(1, len(words) + 1) ** 0.9
    p /= p.sum()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "docs.jsonl", "w") as f:
        for i in range(n_docs):
            text = " ".join(rng.choice(words, int(rng.integers(30, 120)), p=p))
            f.write(json.dumps({"id": f"doc{i}", "text": text, "title": f"Title {i}", "year": 1800 + i}) + "\n")
    return folder


@pytest.fixture
def corpus(tmp_path):
    return write_corpus(tmp_path / "docs")


def group_arrays(group) -> dict:
    """Every array of a group (doc_meta included), by path."""
    out = {name: np.asarray(array[:]) for name, array in group.arrays()}
    if "doc_meta" in group:
        out |= {f"doc_meta/{name}": np.asarray(array[:]) for name, array in group["doc_meta"].arrays()}
    return out


def assert_same_store(a: Store, b: Store):
    left, right = group_arrays(a.group), group_arrays(b.group)
    assert sorted(left) == sorted(right)
    for name in left:
        assert left[name].dtype == right[name].dtype, name
        np.testing.assert_array_equal(left[name], right[name], err_msg=name)
    assert {k: v for k, v in a.attrs.items()} == {k: v for k, v in b.attrs.items()}
    assert a.group["indices"].chunks == b.group["indices"].chunks


def one_line_error(result, exit_code: int = 1) -> str:  # 1: a failure at run time (cli.user_errors)
    assert result.exit_code == exit_code, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


# -- without a server ------------------------------------------------------------------------------
def test_open_from_a_path_a_file_url_a_memory_url_and_a_zarr_store(corpus, tmp_path):
    local = tmp_path / "books.zarr"
    ingest([corpus], local, quiet=True, workers=1)
    by_path = open_store(local)
    assert by_path.path == local and by_path.location == str(local.resolve())
    for other in (str(local), f"file://{local}", zarr.storage.LocalStore(local)):
        store = open_store(other)
        assert store.location == str(local.resolve()) and store.path is not None
        assert_same_store(store, by_path)

    ingest([corpus], "memory://bigtopics-test/books.zarr", quiet=True, workers=1)
    memory = open_store("memory://bigtopics-test/books.zarr")
    assert memory.path is None and memory.location == "memory://bigtopics-test/books.zarr"
    assert_same_store(memory, by_path)
    assert memory.storage_bytes()[0] > 0

    in_memory = zarr.storage.MemoryStore()
    ingest([corpus], in_memory, quiet=True, workers=1)
    from_object = open_store(in_memory)
    assert from_object.path is None
    assert_same_store(from_object, by_path)
    assert from_object.stored_bytes("indices") > 0

    copy = pickle.loads(pickle.dumps(memory))  # the same process: memory:// is shared
    assert copy.location == memory.location
    block = copy.read_docs(0, copy.n_docs)
    np.testing.assert_array_equal(block.indices, by_path.read_docs(0, by_path.n_docs).indices)
    assert open_store(**memory.spec()).n_docs == memory.n_docs


def test_a_url_without_its_filesystem_package_says_what_to_install(monkeypatch):
    import importlib

    registry = importlib.import_module("fsspec.registry")  # the module; fsspec.registry is its mapping
    monkeypatch.delitem(registry._registry, "s3", raising=False)
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if s3fs were not installed
    with pytest.raises(StoreError, match=r"^s3:// needs s3fs: pip install 'bigtopics\[distributed\]'$"):
        open_store("s3://bucket/books.zarr")
    with pytest.raises(StoreError, match="s3:// needs s3fs"):
        ingest(["nowhere"], "s3://bucket/books.zarr", quiet=True)
    with pytest.raises(StoreError, match="no filesystem for nosuchfs://"):
        open_store("nosuchfs://bucket/books.zarr")


@pytest.mark.slow
# -- on S3 (moto) ------------------------------------------------------------------------------------
def test_ingest_to_s3_holds_the_same_store_as_a_local_ingest(s3, corpus, tmp_path):
    url = s3.url("library/books.zarr")
    result = CliRunner().invoke(main, ["ingest", str(corpus), "-o", url, "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert f"wrote {url}:" in result.output
    ingest([corpus], tmp_path / "books.zarr", quiet=True, workers=1)
    local, remote = open_store(tmp_path / "books.zarr"), open_store(url)
    assert remote.path is None and remote.location == url and remote.storage_options is None
    assert_same_store(remote, local)
    assert "library/books.zarr/zarr.json" in s3.keys()
    stored, raw = remote.storage_bytes()
    assert stored == sum(o["Size"] for o in s3.client().list_objects_v2(Bucket=s3.bucket)["Contents"])
    assert raw == local.storage_bytes()[1]
    text = describe_store(remote)
    assert f"store       {url}" in text and "stored" in text
    np.testing.assert_array_equal(remote.metadata("year"), local.metadata("year"))
    assert list(remote.doc_ids(0, 3)) == ["doc0", "doc1", "doc2"]


@pytest.mark.slow
def test_storage_options_instead_of_the_environment(s3, corpus, monkeypatch):
    ingest([corpus], s3.url("books.zarr"), quiet=True, workers=1)
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    options = {"endpoint_url": s3.endpoint, "key": KEY_ID, "secret": SECRET}
    store = open_store(s3.url("books.zarr"), storage_options=options)
    assert store.storage_options == options
    assert store.spec() == {"location": s3.url("books.zarr"), "storage_options": options}
    assert open_store(**store.spec()).n_docs == store.n_docs
    copy = pickle.loads(pickle.dumps(store))
    np.testing.assert_array_equal(copy.read_docs(0, 10).data, store.read_docs(0, 10).data)
    with pytest.raises(PermissionError, match="no credentials"):  # and nothing in the environment
        open_store(s3.url("books.zarr"), storage_options={"endpoint_url": s3.endpoint})


def _sum_of_counts(store: Store) -> tuple[str, int]:
    return store.location, int(sum(block.data.sum(dtype=np.int64) for block in store.iter_blocks()))


@pytest.mark.slow
def test_a_pickled_store_reopens_in_another_process(s3, corpus):
    ingest([corpus], s3.url("books.zarr"), quiet=True, workers=1)
    store = open_store(s3.url("books.zarr"))
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        location, total = pool.submit(_sum_of_counts, store).result(timeout=120)
    assert location == store.location and total == store.n_tokens


@pytest.mark.slow
def test_a_pickled_store_refuses_a_store_ingested_again_meanwhile(s3, corpus, tmp_path):
    ingest([corpus], s3.url("books.zarr"), quiet=True, workers=1)
    state = pickle.dumps(open_store(s3.url("books.zarr")))
    ingest([write_corpus(tmp_path / "other", n_docs=40, seed=5)], s3.url("books.zarr"), quiet=True, workers=1,
           overwrite=True)
    with pytest.raises(StoreError, match="changed since it was opened"):
        pickle.loads(state)


@pytest.mark.slow
def test_a_store_an_ingest_did_not_finish_is_refused(s3, corpus):
    url = s3.url("books.zarr")
    writer = StoreWriter(url)
    writer.append([0, 2], [0, 1], [3, 1], ["a"])  # interrupted here: no commit
    assert "books.zarr/zarr.json" in s3.keys()
    message = f"{url} is incomplete: an ingest did not finish writing it (ingest it again)"
    with pytest.raises(StoreError) as refused:
        open_store(url)
    assert str(refused.value) == message

    # an ingest again replaces it, without --overwrite (as a local one leaves nothing behind)
    ingest([corpus], url, quiet=True, workers=1)
    store = open_store(url)
    # a finished store whose completion attributes are gone is refused too
    raw = json.loads(s3.client().get_object(Bucket=s3.bucket, Key="books.zarr/zarr.json")["Body"].read())
    raw["attributes"] = dict(UNFINISHED)
    s3.client().put_object(Bucket=s3.bucket, Key="books.zarr/zarr.json", Body=json.dumps(raw).encode())
    with pytest.raises(StoreError, match="is incomplete"):
        open_store(url)
    del store


@pytest.mark.slow
def test_a_failed_ingest_leaves_nothing_at_the_url(s3, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.txt").write_text("the and of")  # stop words only: nothing to keep
    with pytest.raises(Exception, match="no document with a word to keep"):
        ingest([empty], s3.url("books.zarr"), quiet=True, workers=1)
    assert not [k for k in s3.keys() if k.startswith("books.zarr/")]


@pytest.mark.slow
def test_a_missing_chunk_is_found_remotely(s3, corpus):
    ingest([corpus], s3.url("books.zarr"), quiet=True, workers=1)
    chunk = next(k for k in s3.keys("books.zarr/indices/c/"))
    s3.client().delete_object(Bucket=s3.bucket, Key=chunk)
    with pytest.raises(StoreError, match=r"is damaged: 1 of the 1 chunks of indices are missing \(ingest it again\)"):
        open_store(s3.url("books.zarr"))


@pytest.mark.slow
def test_overwrite_replaces_only_a_bigtopics_store(s3, corpus, tmp_path):
    url = s3.url("books.zarr")
    ingest([corpus], url, quiet=True, workers=1)
    s3.client().put_object(Bucket=s3.bucket, Key="books.zarr/stale/leftover", Body=b"x")
    runner = CliRunner()
    line = one_line_error(runner.invoke(main, ["ingest", str(corpus), "-o", url, "--quiet"]))
    assert "already exists (use --overwrite to replace it)" in line
    other = write_corpus(tmp_path / "other", n_docs=40, seed=5)
    result = runner.invoke(main, ["ingest", str(other), "-o", url, "--quiet", "--overwrite", "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert open_store(url).n_docs == 40
    assert "books.zarr/stale/leftover" not in s3.keys()  # the old prefix was deleted first

    # someone else's objects, or another tool's Zarr group, are never replaced
    s3.client().put_object(Bucket=s3.bucket, Key="mine/notes.txt", Body=b"keep me")
    s3.client().put_object(Bucket=s3.bucket, Key="theirs.zarr/zarr.json",
                           Body=b'{"zarr_format": 3, "node_type": "group", "attributes": {"format_version": 1}}')
    for target in ("mine", "theirs.zarr"):
        line = one_line_error(runner.invoke(main, ["ingest", str(corpus), "-o", s3.url(target), "--overwrite"]))
        assert "exists and is not bigtopics output" in line
    assert "mine/notes.txt" in s3.keys() and "theirs.zarr/zarr.json" in s3.keys()
    with pytest.raises(StoreError, match="is not a bigtopics store"):
        open_store(s3.url("mine"))


# -- errors: one line each, fast ------------------------------------------------------------------
def _fast(fn, seconds: float = 10.0):
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        fn()
    assert time.monotonic() - started < seconds
    assert "\n" not in str(caught.value)
    return caught.value


def test_a_missing_bucket(s3, corpus):
    error = _fast(lambda: open_store("s3://no-such-bucket/books.zarr"))
    assert isinstance(error, FileNotFoundError)
    assert str(error) == f"s3://no-such-bucket/books.zarr: there is no bucket 'no-such-bucket' at {s3.endpoint}"
    line = one_line_error(CliRunner().invoke(main, ["ingest", str(corpus), "-o", "s3://no-such-bucket/books.zarr"]))
    assert "there is no bucket 'no-such-bucket'" in line
    error = _fast(lambda: open_store(s3.url("nothing/here.zarr")))
    assert isinstance(error, FileNotFoundError) and "does not exist" in str(error)


@pytest.mark.slow
def test_wrong_credentials(s3, corpus, monkeypatch):
    ingest([corpus], s3.url("books.zarr"), quiet=True, workers=1)
    s3.require_auth()  # moto now checks keys: the test's are unknown to it, i.e. wrong
    error = _fast(lambda: open_store(s3.url("books.zarr")))
    assert isinstance(error, PermissionError)
    assert str(error).startswith(f"{s3.url('books.zarr')}: access denied at {s3.endpoint}")
    assert "AWS_ACCESS_KEY_ID" in str(error)
    line = one_line_error(CliRunner().invoke(main, ["ingest", str(corpus), "-o", s3.url("other.zarr")]))
    assert "access denied" in line


def test_an_unreachable_endpoint(s3, corpus, monkeypatch):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    error = _fast(lambda: open_store(s3.url("books.zarr")))
    assert isinstance(error, StoreError)
    assert str(error).startswith(f"{s3.url('books.zarr')}: cannot reach http://127.0.0.1:{port}")
    started = time.monotonic()
    line = one_line_error(CliRunner().invoke(main, ["ingest", str(corpus), "-o", s3.url("books.zarr")]))
    assert "cannot reach" in line and time.monotonic() - started < 10


# -- infer ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_infer_from_and_to_s3(s3, corpus, tmp_path):
    from bigtopics.evaluate import evaluate
    from bigtopics.export import export
    from bigtopics.report import build_report
    from bigtopics.settings import TrainSettings
    from bigtopics.trainer import train

    local_store = tmp_path / "books.zarr"
    ingest([corpus], local_store, quiet=True, workers=1)
    ingest([corpus], s3.url("books.zarr"), quiet=True, workers=1)
    run = tmp_path / "run"
    train(local_store, run, TrainSettings(n_topics=3, epochs=2, batch_size=20, tau0=1, seed=1), quiet=True)
    settings = InferSettings(threshold=0.0, seed=3, workers=1)
    infer(run, local_store, tmp_path / "doc_topics.zarr", settings, quiet=True)
    out = s3.url("out/doc_topics.zarr")
    summary = infer(run, s3.url("books.zarr"), out, settings, quiet=True, part_tokens=500)
    assert summary["output"] == out and summary["n_docs"] == 60
    assert not list(run.glob(".infer-*.parts"))  # the local parts are gone once assembled
    remote, local = DocTopics(out), DocTopics(tmp_path / "doc_topics.zarr")
    assert remote.path is None and remote.location == out
    assert remote.attrs["store"] == s3.url("books.zarr")
    for a, b in zip(remote.iter_blocks(), local.iter_blocks()):
        for x, y in zip(a[1:], b[1:]):
            np.testing.assert_array_equal(x, y)

    # evaluate, export and report read the document topics and their store from s3://
    result = evaluate(run, store=s3.url("books.zarr"), doc_topics=out, output=tmp_path / "evaluation.json",
                      heldout_store=s3.url("books.zarr"), heldout_docs=10, particles=2, sample_docs=10, quiet=True)
    assert result["store"] == s3.url("books.zarr") and result["heldout"]["store"] == s3.url("books.zarr")
    assert "doc_topics.txt" in export(run, tmp_path / "export", doc_topics=out, log=lambda msg: None)
    build_report(run, tmp_path / "report.html", doc_topics=out, log=lambda msg: None)
    assert re.search(r"Title \d+ \[doc\d+\]", (tmp_path / "report.html").read_text())  # the store's titles

    with pytest.raises(FileExistsError, match="already exists"):
        infer(run, s3.url("books.zarr"), out, settings, quiet=True)
    # the CLI takes a URL for -o (a local store here: its STORE argument must exist locally)
    result = CliRunner().invoke(main, ["infer", str(run), str(local_store), "-o", out, "--overwrite", "--quiet",
                                       "--threshold", "0", "--seed", "3", "--workers", "1"])
    assert result.exit_code == 0, result.output
    for a, b in zip(DocTopics(out).iter_blocks(), local.iter_blocks()):
        for x, y in zip(a[1:], b[1:]):
            np.testing.assert_array_equal(x, y)
    # an interrupted assembly leaves an unfinished group, refused, and replaced by a rerun
    raw = json.loads(s3.client().get_object(Bucket=s3.bucket, Key="out/doc_topics.zarr/zarr.json")["Body"].read())
    raw["attributes"] = dict(UNFINISHED)
    s3.client().put_object(Bucket=s3.bucket, Key="out/doc_topics.zarr/zarr.json", Body=json.dumps(raw).encode())
    with pytest.raises(StoreError, match="is incomplete: an inference did not finish"):
        DocTopics(out)
    infer(run, s3.url("books.zarr"), out, settings, quiet=True)
    assert DocTopics(out).n_docs == 60


@pytest.mark.slow
def test_the_demo_books_via_the_cli(s3, tmp_path):
    from importlib.resources import files

    books = str(files("bigtopics") / "data" / "demo_books.jsonl.gz")
    url = s3.url("demo/books.zarr")
    result = CliRunner().invoke(main, ["ingest", books, "-o", url, "--section-tokens", "500", "--quiet"])
    assert result.exit_code == 0, result.output
    ingest([books], tmp_path / "books.zarr", section_tokens=500, quiet=True)
    assert_same_store(open_store(url), open_store(tmp_path / "books.zarr"))


@pytest.mark.slow
def test_train_info_and_infer_from_s3_in_process_and_on_a_cluster(s3, tmp_path):
    """The user's path (issue: Beyond one machine): ingest to s3://, info, train from it in
    process and on a LocalCluster whose workers read the store themselves, infer from s3:// to
    s3://; the models equal the one trained on a local ingest of the same books."""
    pytest.importorskip("distributed")
    from importlib.resources import files

    from test_golden_models import model_hash

    books = str(files("bigtopics") / "data" / "demo_books.jsonl.gz")
    url, local = s3.url("demo/books.zarr"), tmp_path / "books.zarr"
    runner = CliRunner()
    for target in (url, str(local)):
        result = runner.invoke(main, ["ingest", books, "-o", target, "--section-tokens", "500", "--quiet"])
        assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["info", url])
    assert result.exit_code == 0 and url in result.output, result.output
    common = ["-k", "6", "--max-docs", "600", "--batch-size", "200", "--seed", "2", "--quiet"]
    hashes = {}
    for name, store, extra in (("local", str(local), []), ("s3", url, []),
                               ("s3-cluster", url, ["--cluster", "local:2"])):
        result = runner.invoke(main, ["train", store, "-o", str(tmp_path / name), *common, *extra])
        assert result.exit_code == 0, result.output
        hashes[name] = model_hash(tmp_path / name)
    assert hashes["s3"] == hashes["local"] == hashes["s3-cluster"]
    assert json.loads((tmp_path / "s3" / "settings.json").read_text())["store"] == url
    output = s3.url("demo/doc_topics.zarr")
    result = runner.invoke(main, ["infer", str(tmp_path / "s3"), url, "-o", output, "--quiet"])
    assert result.exit_code == 0, result.output
    assert DocTopics(output).n_docs == open_store(url).n_docs
