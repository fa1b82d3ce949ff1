"""Memory and disk bounded by what the machine has, and content checked where it is read (issue 47).

Checkpoints are read piece by piece with their declared sizes checked first, so a sparse 3 GiB
file is refused at once; a FIFO or a device where a checkpoint is expected is refused naming what
it is (a FIFO never hangs the reader); a checkpoint with a good SHA-256 but impossible content (a
topic twice in a row, 1e308) is set aside as a damaged one. Exports never build a K x K matrix
and are refused up front when their files would not fit on the disk. A model's crafted attributes
are one line in every command that opens it.

Every command runs through the real CLI: in a subprocess where it could hang or where its peak
memory is measured, else with click's CliRunner."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from test_hardening_disk import encoded, error_line, small_disk, write_raw  # noqa: F401 (small_disk: a fixture)
from test_hardening_inputs import ODD_WORDS, write_doc_topics, write_run, write_store

from bigtopics.checkpoints import list_checkpoints, list_damaged, read_checkpoint
from bigtopics.cli import main
from bigtopics.model import load_model, write_model
from bigtopics.synth import CorpusSpec, write_corpus

PYTHON = sys.executable
WORKTREE = str(Path(__file__).resolve().parents[1])
SPEC = CorpusSpec(n_docs=300, n_topics=5, n_words=400, mean_length=30, alpha=0.1, eta=0.05, seed=2)
TRAIN = ["-k", "6", "--epochs", "1", "--batch-size", "50", "--seed", "1", "--checkpoint-every", "1",
         "--keep-checkpoints", "2", "--scale-docs", "0", "--quiet"]
# Runs a bigtopics command and writes its peak resident set (KiB) to the file named first. The peak
# is VmHWM, the high-water mark of this process's own memory since exec; getrusage's ru_maxrss
# would also count the memory of pytest, from which this process was forked.
MEASURED = ("import atexit, pathlib, re, sys\n"
            "out = pathlib.Path(sys.argv.pop(1))\n"
            "hwm = lambda: re.search(r'VmHWM:\\s*(\\d+)', pathlib.Path('/proc/self/status').read_text())[1]\n"
            "atexit.register(lambda: out.write_text(hwm()))\n"
            "from bigtopics.cli import main\n"
            "main()\n")


def run_cli(args, tmp_path, timeout=300):
    """(completed process, seconds, peak RSS bytes) of `bigtopics ARGS` in a subprocess of this worktree."""
    rss_file = tmp_path / f"rss-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": WORKTREE, "PYTHONWARNINGS": "default"}
    start = time.monotonic()
    done = subprocess.run([PYTHON, "-c", MEASURED, str(rss_file), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)
    seconds = time.monotonic() - start
    return done, seconds, int(rss_file.read_text()) * 1024 if rss_file.exists() else 0


def one_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and stderr.rstrip().endswith(lines[0]) and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run stopped after 4 of 6 minibatches, checkpoints 3 and 4 kept, and its store."""
    root = tmp_path_factory.mktemp("bounds")
    store = root / "store.zarr"
    write_corpus(SPEC, store, "store")
    run = root / "run"
    result = CliRunner().invoke(main, ["train", str(store), "-o", str(run), *TRAIN, "--max-docs", "200"])
    assert result.exit_code == 0, result.output
    assert [c.step for c in list_checkpoints(run)] == [3, 4]
    return run


@pytest.fixture
def run(trained, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


def only_newest(run) -> Path:
    """Leave only the newest checkpoint; returns its path."""
    *older, newest = list_checkpoints(run)
    for info in older:
        info.path.unlink()
    return newest.path


# -- checkpoints: sizes, files that are not files ----------------------------------------------
@pytest.mark.parametrize("how", ["sparse zeros", "real one made sparse"])
def test_a_sparse_3_gib_checkpoint_is_refused_at_once_without_reading_it(run, tmp_path, how):
    newest = only_newest(run)
    if how == "sparse zeros":
        newest.unlink()
    subprocess.run(["truncate", "-s", "3G", str(newest)], check=True)
    assert newest.stat().st_size == 3 << 30 and newest.stat().st_blocks * 512 < 10 << 20
    done, seconds, peak = run_cli(["train", "--resume", run], tmp_path)
    assert done.returncode == 1, done.stderr
    assert "none of the 1 checkpoints" in one_error(done.stderr)
    said = "not a bigtopics checkpoint" if how == "sparse zeros" else "truncated or damaged"
    assert f"{newest}: " in done.stderr and said in done.stderr, done.stderr
    assert seconds < 60 and peak < 1 << 30, (seconds, peak)  # read whole, it would take 3 GiB and more
    assert [p.name for p in list_damaged(run)] == [newest.name + ".damaged"]


@pytest.mark.parametrize("kind", ["fifo", "symlink to /dev/zero"])
def test_a_fifo_or_a_device_where_a_checkpoint_is_expected_is_refused_in_one_line(run, tmp_path, kind):
    newest = only_newest(run)
    newest.unlink()
    if kind == "fifo":
        os.mkfifo(newest)
        said = "a FIFO (named pipe), not a checkpoint file"
    else:
        newest.symlink_to("/dev/zero")
        said = f"a character device ({newest} -> /dev/zero), not a checkpoint file"
    info, _, _ = run_cli(["info", run], tmp_path, timeout=60)  # reads the newest checkpoint's progress
    assert info.returncode == 0 and said in info.stdout, info.stdout + info.stderr
    done, _, _ = run_cli(["train", "--resume", run], tmp_path, timeout=60)  # a FIFO read would never return
    assert done.returncode == 1
    warned = [line for line in done.stderr.splitlines() if said in line]
    assert len(warned) == 1 and warned[0].startswith(f"warning: {newest}: "), done.stderr
    assert "none of the 1 checkpoints" in one_error(done.stderr)


def test_a_fifo_newest_falls_back_to_the_checkpoint_before(run, tmp_path):
    newest = list_checkpoints(run)[-1].path
    newest.unlink()
    os.mkfifo(newest)
    done, _, _ = run_cli(["train", "--resume", run, "--max-docs", "100000"], tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "a FIFO (named pipe)" in done.stderr and "falling back to the previous checkpoint, step-000000000003" \
        in done.stderr
    assert list_checkpoints(run)[-1].step > 4  # trained on from step 3 to the end


# -- checkpoints: content with a good checksum -------------------------------------------------
def rewrite(path: Path, how: str) -> None:
    """Rewrite a checkpoint with changed content and a recomputed, valid SHA-256."""
    meta, arrays = read_checkpoint(path)
    indptr, topics, values, sums = (arrays[n].copy() for n in ("indptr", "topics", "stored_values", "topic_sums"))
    row = int(np.flatnonzero(np.diff(indptr) >= 2)[0])
    at = int(indptr[row])
    if how == "a topic twice in a row":
        topics[at + 1] = topics[at]
    elif how == "1e308 in one entry":
        values[at] = 1e308
    else:  # 1e308 in an entry and its topic's sum, which then add up
        sums[topics[at]] += 1e308 - values[at]
        values[at] = 1e308
    arrays.update(indptr=indptr, topics=topics, stored_values=values, topic_sums=sums)
    write_raw(path, meta, [(n, a.dtype.str, list(a.shape), encoded(a)) for n, a in arrays.items()])
    read_checkpoint(path)  # its checksum is good


CONTENT = {"a topic twice in a row": "holds topic", "1e308 in one entry": "is not the sum of its entries",
           "1e308 that adds up": "more than training on 300 documents"}


@pytest.mark.parametrize("how", list(CONTENT))
def test_a_checkpoint_with_a_good_checksum_and_impossible_content_is_refused(run, how):
    newest = only_newest(run)
    rewrite(newest, how)
    with pytest.warns(UserWarning) as warned:
        result = CliRunner().invoke(main, ["train", "--resume", str(run)])
    assert "none of the 1 checkpoints" in error_line(result)
    assert len(warned) == 1 and str(warned[0].message).startswith(f"{newest}: ")
    assert CONTENT[how] in str(warned[0].message)
    assert [p.name for p in list_damaged(run)] == [newest.name + ".damaged"]


def test_a_checkpoint_with_impossible_content_falls_back_to_the_one_before(run):
    rewrite(list_checkpoints(run)[-1].path, "a topic twice in a row")
    with pytest.warns(UserWarning, match="falling back to the previous checkpoint, step-000000000003.ckpt"):
        result = CliRunner().invoke(main, ["train", "--resume", str(run), "--max-docs", "100000"])
    assert result.exit_code == 0, result.output
    assert list_checkpoints(run)[-1].step > 4


# -- exports -----------------------------------------------------------------------------------
def write_big_model(path: Path, n_topics: int, n_words: int) -> None:
    """A model of K topics over V words without training: word w in topics w % K and (w + 1) % K."""
    topics = np.stack([np.arange(n_words) % n_topics, (np.arange(n_words) + 1) % n_topics], 1)
    topics = np.sort(topics, 1).ravel()
    values = np.arange(1, 2 * n_words + 1, dtype=np.float64)
    indptr = np.arange(0, 2 * n_words + 1, 2)
    totals = np.bincount(topics, weights=values, minlength=n_topics)
    write_model(path / "model.zarr", (indptr, topics, values), totals, [f"w{i}" for i in range(n_words)],
                alpha=0.1, eta=0.01)


@pytest.mark.slow
def test_pyldavis_at_20000_topics_is_written_without_a_k_by_k_matrix(tmp_path):
    k, v = 20_000, 60
    write_big_model(tmp_path / "run", k, v)
    done, seconds, peak = run_cli(["export", tmp_path / "run", "-o", tmp_path / "out"], tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    assert peak < 1 << 30, peak  # the identity alone was 20,000^2 numbers: 3 GiB as floats, 13 GiB as a list
    payload = json.loads((tmp_path / "out" / "pyldavis.json").read_text())
    assert np.shape(payload["doc_topic_dists"]) == (1, k) and np.shape(payload["topic_term_dists"]) == (k, v)
    sizes = np.array(payload["doc_topic_dists"]).T @ np.array(payload["doc_lengths"])  # what pyLDAvis takes
    np.testing.assert_allclose(sizes, load_model(tmp_path / "run").topic_totals(), rtol=1e-12)
    assert np.allclose(np.sum(payload["topic_term_dists"], 1), 1)


def test_pyldavis_beyond_what_it_can_show_is_left_out_with_a_notice(tmp_path, monkeypatch):
    from bigtopics.export import pyldavis

    write_big_model(tmp_path / "run", 50, 100)
    monkeypatch.setattr(pyldavis, "MAX_FILE_CELLS", 50 * 100 - 1)
    result = CliRunner().invoke(main, ["export", str(tmp_path / "run"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "pyldavis.json left out (50 topics x 100 terms are 5,000 probabilities" in result.output
    assert not (tmp_path / "out" / "pyldavis.json").exists() and (tmp_path / "out" / "topic_keys.tsv").exists()


def test_topic_word_weights_beyond_the_free_disk_are_refused_before_writing(tmp_path, small_disk):  # noqa: F811
    small_disk.resize("32m")
    run = tmp_path / "run"
    write_big_model(run, 120, 20_000)  # K x V = 2.4 million lines, about 50 MB
    out = small_disk.path / "out"
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(out), "--topic-word-weights"])
    assert result.exit_code == 1, result.output
    line = result.output.strip()
    assert line.count("\n") == 0 and line.startswith("error: the export needs at least"), line
    assert "topic_word_weights.txt" in line and "leave out --topic-word-weights" in line
    assert f"{small_disk.path} has" in line and "MiB free" in line
    assert sorted(p.name for p in small_disk.path.iterdir()) == []  # nothing written, nothing left behind
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(out)])  # the rest fits
    assert result.exit_code == 0, result.output
    assert (out / "pyldavis.json").exists() and not (out / "topic_word_weights.txt").exists()


def test_topic_word_weights_that_fit_are_written_whole(tmp_path):
    run = write_run(tmp_path / "run", ODD_WORDS)
    result = CliRunner().invoke(main, ["export", str(run), "-o", str(tmp_path / "out"), "--topic-word-weights"])
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "out" / "topic_word_weights.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == 3 * len(ODD_WORDS) and lines[0].startswith("0\t")


def test_top_words_beyond_the_memory_are_refused(tmp_path):
    write_big_model(tmp_path / "run", 200_000, 100_000)  # 200,000 topics x 100,000 top words: 160 GB of ids
    result = CliRunner().invoke(main, ["export", str(tmp_path / "run"), "-o", str(tmp_path / "out"),
                                       "--top-words", "100000"])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert line.count("\n") == 0 and "--top-words 100,000 of 200,000 topics" in line
    assert "use a smaller --top-words" in line and not (tmp_path / "out").exists()


# -- a model's crafted attributes --------------------------------------------------------------
@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("attrs")
    store = write_store(root / "store.zarr", [f"d{i}" for i in range(30)], ODD_WORDS)
    return {"root": root, "store": store, "dt": write_doc_topics(root / "doc_topics.zarr", store)}


CRAFTED_ATTRIBUTES = [
    ("progress", ["a", "list"], "attribute progress is ['a', 'list'], expected an object"),
    ("progress", {"docs_seen": "lots", "step": 3}, "attribute progress.docs_seen is 'lots', expected a whole number"),
    ("progress", {"step": -4}, "attribute progress.step is -4, expected a whole number >= 0"),
    ("settings", {"heldout": 1e308}, "attribute settings.heldout is 1e+308, expected a whole number"),
    ("settings", "none", "attribute settings is 'none', expected an object"),
    ("store_fingerprint", {"n_docs": {"x": 1}}, "attribute store_fingerprint.n_docs is {'x': 1}, expected a whole"),
    ("alpha_scale", {"factor": "big", "documents": 3}, "attribute alpha_scale.factor is 'big', expected a finite"),
]


@pytest.mark.parametrize("command", ["report", "site", "evaluate", "export"])
@pytest.mark.parametrize("name, value, said", CRAFTED_ATTRIBUTES)
def test_a_crafted_model_attribute_is_one_line_in_every_command(small, tmp_path, command, name, value, said):
    run = write_run(tmp_path / "run", ODD_WORDS)
    document = run / "model.zarr" / "zarr.json"
    meta = json.loads(document.read_text())
    meta["attributes"][name] = value
    document.write_text(json.dumps(meta))
    args = {"report": ["report", run],
            "site": ["site", run, "--doc-topics", small["dt"], "--store", small["store"], "-o", tmp_path / "site",
                     "--quiet"],
            "evaluate": ["evaluate", run, "--store", small["store"]],
            "export": ["export", run, "-o", tmp_path / "out"]}[command]
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 1, result.output
    line = result.output.strip()
    assert line.count("\n") == 0 and line.startswith(f"error: the model {run / 'model.zarr'} is damaged: "), line
    assert said in line
