"""Hardening of `bigtopics ingest` against crafted input (issue 47): one bad line is reported by
file:line and, with --skip-bad, only it is skipped (a NUL byte, JSON nested 100,000 deep, counts or
metadata integers beyond 32 or 64 bits), never a whole file dropped in silence; a document too big
for the memory budget is refused (or skipped) without ever being held whole, be it a line of tens
of megabytes or a small gzip file that unpacks to them; file names that are not UTF-8 become ids
and messages; a disk that fills under two worker processes, and Ctrl-C while any command is still
starting, end in one line instead of a traceback.

Everything goes through the real CLI: click's CliRunner, or a subprocess where memory or signals
are measured."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from bigtopics.cli import main
from bigtopics.store import open_store

from .test_hardening_disk import error_line, small_disk  # noqa: F401  (a fixture: a small tmpfs)

WORDS = ["apple", "orange", "pear", "banana", "cherry", "grape", "melon", "lemon", "mango", "peach", "plum", "kiwi"]
KEEP_ALL = ["--min-df", "1", "--max-df", "1", "--quiet"]


def ingest(*args):
    return CliRunner().invoke(main, ["ingest", *map(str, args)])


def text_of(i: int) -> str:
    return " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(8))


def doc_ids(store) -> list[str]:
    return open_store(store).doc_ids().tolist()


def jsonl_with(path: Path, bad_line: bytes, n_docs: int = 5, at: int = 4) -> Path:
    """n_docs good JSON lines with `bad_line` in place of line `at`."""
    lines = [json.dumps({"id": f"d{i}", "text": text_of(i)}).encode() for i in range(n_docs)]
    lines[at - 1] = bad_line
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


# -- one bad line: reported by file:line, skipped alone ----------------------------------------
def test_a_nul_in_line_4_of_a_jsonl_names_the_line_and_skip_bad_skips_only_it(tmp_path):
    path = jsonl_with(tmp_path / "books.jsonl", b'{"id": "d3", "text": "\0' + text_of(3).encode() + b'"}', 2001)
    assert b"\0" in path.read_bytes()[:8192]
    line = error_line(ingest(path, "-o", tmp_path / "a.zarr", *KEEP_ALL))
    assert "books.jsonl:4: a NUL byte" in line and "--skip-bad" in line
    assert not (tmp_path / "a.zarr").exists()
    result = ingest(path, "-o", tmp_path / "b.zarr", "--skip-bad", "--min-df", "1", "--max-df", "1")
    assert result.exit_code == 0, result.output
    assert "1 bad lines skipped" in result.stderr and "0 binary-looking files" in result.stderr
    ids = doc_ids(tmp_path / "b.zarr")
    assert len(ids) == 2000 and "d3" not in ids and {"d2", "d4", "d2000"} <= set(ids)


def test_a_nul_in_a_tsv_line_is_that_line_only(tmp_path):
    path = tmp_path / "mallet.tsv"
    path.write_bytes(b"".join(f"d{i}\tx\t{text_of(i)}{chr(0) if i == 1 else ''}\n".encode() for i in range(6)))
    assert "mallet.tsv:2: a NUL byte" in error_line(ingest(path, "-o", tmp_path / "a.zarr", *KEEP_ALL))
    assert ingest(path, "-o", tmp_path / "b.zarr", "--skip-bad", *KEEP_ALL).exit_code == 0
    assert doc_ids(tmp_path / "b.zarr") == ["d0", "d2", "d3", "d4", "d5"]


def test_a_binary_file_named_jsonl_is_an_error_naming_it_never_skipped_in_silence(tmp_path):
    (tmp_path / "in").mkdir()
    jsonl_with(tmp_path / "in" / "good.jsonl", json.dumps({"text": text_of(9)}).encode())
    (tmp_path / "in" / "data.jsonl").write_bytes(bytes(range(256)) * 64)  # zstd, say: mostly not text
    line = error_line(ingest(tmp_path / "in", "-o", tmp_path / "a.zarr", *KEEP_ALL))
    assert "data.jsonl: looks binary, not jsonl text" in line and "--skip-bad" in line
    result = ingest(tmp_path / "in", "-o", tmp_path / "b.zarr", "--skip-bad", "--min-df", "1", "--max-df", "1")
    assert result.exit_code == 0 and "warning: skipping data.jsonl: looks binary" in result.stderr
    assert "skipped 1 files" in result.stderr
    assert open_store(tmp_path / "b.zarr").settings["skipped"][0]["name"] == "data.jsonl"


@pytest.mark.parametrize("skip_bad", [False, True])
def test_json_nested_100000_deep_is_a_bad_line(tmp_path, skip_bad):
    deep = b'{"id": "deep", "text": "plum pear", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    path = jsonl_with(tmp_path / "deep.jsonl", deep, at=2)
    result = ingest(path, "-o", tmp_path / "s.zarr", *KEEP_ALL, *(["--skip-bad"] if skip_bad else []))
    if not skip_bad:
        assert "deep.jsonl:2: JSON nested too deeply" in error_line(result)
        return
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert doc_ids(tmp_path / "s.zarr") == ["d0", "d2", "d3", "d4"]


@pytest.mark.parametrize("fmt, bad, expected", [
    ("bow-jsonl", {"id": "big", "counts": {"apple": 2**32}}, "add up to 2^32 or more"),
    ("bow-jsonl", {"id": "big", "counts": {"apple": 2**31, "Apple": 2**31}}, "add up to 2^32 or more"),
    ("jsonl", {"id": "big", "text": "plum", "n": 2**63}, "metadata field 'n' holds an integer beyond 64 bits"),
    ("jsonl", {"id": "big", "text": "plum", "n": -2**63 - 1}, "metadata field 'n' holds an integer beyond 64 bits"),
])
def test_numbers_beyond_what_the_store_holds_are_a_bad_line(tmp_path, fmt, bad, expected):
    path = tmp_path / "in.jsonl"
    good = [{"id": f"d{i}", "counts": {w: 3 for w in text_of(i).split()}, "n": i} if fmt == "bow-jsonl"
            else {"id": f"d{i}", "text": text_of(i), "n": 2**63 - 1 - i} for i in range(4)]
    path.write_text("".join(json.dumps(d) + "\n" for d in good[:2] + [bad] + good[2:]))
    line = error_line(ingest(path, "--format", fmt, "-o", tmp_path / "a.zarr", *KEEP_ALL))
    assert line.startswith("error: in.jsonl:3: ") and expected in line
    result = ingest(path, "--format", fmt, "-o", tmp_path / "b.zarr", "--skip-bad", *KEEP_ALL)
    assert result.exit_code == 0, result.output
    assert doc_ids(tmp_path / "b.zarr") == ["d0", "d1", "d2", "d3"]
    if fmt == "jsonl":  # the largest int64 kept exactly
        assert open_store(tmp_path / "b.zarr").metadata("n").tolist()[0] == 2**63 - 1


@pytest.mark.parametrize("value, expected", [
    ("1e400", "the number 1e400 is beyond a 64-bit float"),
    ("[1, -1e999]", "the number -1e999 is beyond a 64-bit float"),
    ("NaN", "NaN is not a JSON number"),
    ('{"a": Infinity}', "Infinity is not a JSON number"),
])
def test_numbers_json_cannot_write_back_are_a_bad_line(tmp_path, value, expected):
    """Python reads 1e400 as inf and accepts NaN and Infinity; stored, they would reach pages and
    files as values no JSON reader takes."""
    path = tmp_path / "in.jsonl"
    good = [json.dumps({"id": f"d{i}", "text": text_of(i), "n": i + 0.5}) for i in range(3)]
    path.write_text("\n".join(good[:2] + ['{"id": "odd", "text": "plum", "n": ' + value + "}"] + good[2:]) + "\n")
    line = error_line(ingest(path, "-o", tmp_path / "a.zarr", *KEEP_ALL))
    assert line.startswith("error: in.jsonl:3: ") and expected in line
    result = ingest(path, "-o", tmp_path / "b.zarr", "--skip-bad", *KEEP_ALL)
    assert result.exit_code == 0, result.output
    assert doc_ids(tmp_path / "b.zarr") == ["d0", "d1", "d2"]
    assert open_store(tmp_path / "b.zarr").metadata("n").tolist() == [0.5, 1.5, 2.5]


# -- file names that are not UTF-8 -------------------------------------------------------------
def test_file_names_that_are_not_utf8_become_escaped_ids_and_messages(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    odd = os.fsencode(folder) + b"/caf\xe9 \xff.txt"
    with open(odd, "wb") as f:
        f.write(text_of(1).encode())
    (folder / "plain.txt").write_text(text_of(2))
    result = ingest(folder, "-o", tmp_path / "s.zarr", *KEEP_ALL)
    assert result.exit_code == 0, result.output
    assert doc_ids(tmp_path / "s.zarr") == ["caf\\xe9 \\xff.txt", "plain.txt"]
    # named directly, as the shell passes it (bytes, decoded by Python with surrogates)
    result = ingest(os.fsdecode(odd), "-o", tmp_path / "t.zarr", *KEEP_ALL)
    assert result.exit_code == 0 and doc_ids(tmp_path / "t.zarr") == ["caf\\xe9 \\xff.txt"]
    # listed in a --files-from file, and on stdin
    (tmp_path / "list.txt").write_bytes(odd + b"\n")
    result = ingest("--files-from", tmp_path / "list.txt", "-o", tmp_path / "v.zarr", *KEEP_ALL)
    assert result.exit_code == 0, result.output
    assert doc_ids(tmp_path / "v.zarr") == [str(folder) + "/caf\\xe9 \\xff.txt"]
    result = CliRunner().invoke(main, ["ingest", "--files-from", "-", "-o", str(tmp_path / "w.zarr"), *KEEP_ALL],
                                input=odd + b"\n")
    assert result.exit_code == 0, result.output
    assert doc_ids(tmp_path / "w.zarr") == doc_ids(tmp_path / "v.zarr")
    # and in a message, from a real process whose stderr must be UTF-8
    bad = os.fsencode(folder) + b"/\xe9.jsonl"
    with open(bad, "wb") as f:
        f.write(b'{"text": "plum"}\n{"text": \n')
    done = subprocess.run([sys.executable, "-m", "bigtopics.cli", "ingest", bad, "-o", tmp_path / "u.zarr", "--quiet"],
                          capture_output=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert done.stderr.decode("utf-8").strip() == (
        "error: \\xe9.jsonl:2: malformed JSON: Expecting value at column 10 (use --skip-bad to skip such lines)")


# -- a document too big for the memory budget ---------------------------------------------------
MEMORY_LIMIT = "16M"  # the smallest: a document may have 512 KiB of it
HUGE = 64 << 20  # a line of 64 MiB: holding it (as bytes, str and code points) would take hundreds


def huge_text(n_bytes: int) -> bytes:
    word = b"plum pear apple kiwi "
    return word * (n_bytes // len(word))


# Runs a command and prints its peak memory. Not measured from this process: a child's peak counts
# the memory of the process it was forked from (here pytest, with the test's data), the grandchild's not.
MEASURE = """import resource, subprocess, sys
status = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
sys.exit(status)
"""


def run_measured(*args) -> tuple[int, str, int]:
    """(exit status, stderr, peak resident memory in bytes) of `bigtopics ingest ARGS` in a
    process of its own (its workers included)."""
    done = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "bigtopics.cli", "ingest",
                           *map(str, args)], capture_output=True, text=True, timeout=600)
    return done.returncode, done.stderr, int(done.stdout)


@pytest.fixture(scope="module")
def baseline_rss(tmp_path_factory):
    """The peak memory of a small ingest: Python, numpy, numba and zarr, and little data."""
    root = tmp_path_factory.mktemp("baseline")
    jsonl_with(root / "small.jsonl", json.dumps({"text": text_of(5)}).encode())
    status, err, peak = run_measured(root / "small.jsonl", "-o", root / "s.zarr", "--workers", "1",
                                     "--memory-limit", MEMORY_LIMIT, *KEEP_ALL)
    assert status == 0, err
    return peak


def test_a_huge_line_is_refused_naming_it_without_being_held(tmp_path, baseline_rss):
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as f:
        f.write(json.dumps({"text": text_of(0)}).encode() + b'\n{"text": "')
        for _ in range(HUGE // (1 << 20)):
            f.write(huge_text(1 << 20))
        f.write(b'"}\n' + json.dumps({"text": text_of(2)}).encode() + b"\n")
    status, err, peak = run_measured(path, "-o", tmp_path / "s.zarr", "--workers", "1", "--memory-limit",
                                     MEMORY_LIMIT, *KEEP_ALL)
    assert status == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: huge.jsonl:2: a document longer than 512.0 KiB") and "--memory-limit" in err
    assert peak < baseline_rss + (32 << 20), (peak >> 20, baseline_rss >> 20)
    assert not (tmp_path / "s.zarr").exists()


def test_gzip_bombs_are_refused_or_skipped_without_being_unpacked_whole(tmp_path, baseline_rss):
    """A few hundred KiB of gzip that unpack to a 64 MiB line, or a 64 MiB txt document."""
    (tmp_path / "in").mkdir()
    bomb = huge_text(HUGE)
    (tmp_path / "in" / "a.txt.gz").write_bytes(gzip.compress(bomb, 1))
    (tmp_path / "in" / "b.jsonl.gz").write_bytes(gzip.compress(
        b"".join(json.dumps({"id": f"d{i}", "text": text_of(i)}).encode() + b"\n" for i in range(3))
        + b'{"id": "bomb", "text": "' + bomb + b'"}\n' + json.dumps({"id": "d4", "text": text_of(4)}).encode(), 1))
    (tmp_path / "in" / "c.txt").write_text(text_of(6))
    assert sum(p.stat().st_size for p in (tmp_path / "in").iterdir()) < 2 << 20
    status, err, peak = run_measured(tmp_path / "in", "-o", tmp_path / "s.zarr", "--workers", "1",
                                     "--memory-limit", MEMORY_LIMIT, *KEEP_ALL)
    assert status == 1 and err.startswith("error: a.txt.gz: a document longer than 512.0 KiB"), err
    assert peak < baseline_rss + (32 << 20), (peak >> 20, baseline_rss >> 20)
    status, err, peak = run_measured(tmp_path / "in", "-o", tmp_path / "s.zarr", "--workers", "1",
                                     "--memory-limit", MEMORY_LIMIT, "--skip-bad", *KEEP_ALL)
    assert status == 0, err
    warnings = err.splitlines()
    assert warnings[0].startswith("warning: skipping a.txt.gz: a document longer than 512.0 KiB")
    assert warnings[1].startswith(f"warning: skipping b.jsonl.gz:4: a document of {(len(bomb) + 27) / 2**20:.1f} MiB")
    assert peak < baseline_rss + (32 << 20), (peak >> 20, baseline_rss >> 20)
    assert doc_ids(tmp_path / "s.zarr") == ["d0", "d1", "d2", "d4", "c.txt"]
    assert [s["name"] for s in open_store(tmp_path / "s.zarr").settings["skipped"]] == ["a.txt.gz"]


def test_a_document_within_the_limit_is_read_whole(tmp_path):
    path = tmp_path / "long.txt"
    path.write_bytes(huge_text(500 << 10))  # just under 512 KiB
    result = ingest(path, "-o", tmp_path / "s.zarr", "--memory-limit", MEMORY_LIMIT, *KEEP_ALL)
    assert result.exit_code == 0, result.output
    assert open_store(tmp_path / "s.zarr").n_tokens == 4 * ((500 << 10) // 21)


# -- a full disk under two workers ---------------------------------------------------------------
def test_a_disk_that_fills_under_two_workers_is_one_line_and_leaves_nothing(tmp_path, small_disk):  # noqa: F811
    source = tmp_path / "many.txt"
    def word(n: int) -> str:
        return "".join(chr(97 + n // 26**j % 26) for j in range(4))

    with open(source, "w") as f:  # many words, so that the spills do not shrink much
        for i in range(20_000):
            f.write(" ".join(word(i * 31 + k * 7919) for k in range(12)) + "\n")
    small_disk.resize("1m")
    store = small_disk.path / "s.zarr"
    args = [source, "--format", "lines", "-o", store, "--memory-limit", MEMORY_LIMIT, *KEEP_ALL]
    line = error_line(ingest(*args, "--workers", "2"))
    assert line.startswith(f"error: no space left on {small_disk.path} for the ingest's work files"), line
    assert list(small_disk.path.iterdir()) == []  # no store, no spill folder
    small_disk.resize("64m")
    result = ingest(*args, "--workers", "1")  # (the same store; no processes to start again)
    assert result.exit_code == 0, result.output
    assert open_store(store).n_docs == 20_000


# -- Ctrl-C while a command starts ---------------------------------------------------------------
SITE_DONE = """import os
open(os.environ["STARTED_MARKER"], "w").close()
"""


@pytest.mark.parametrize("command", [["ingest", "{input}", "-o", "{output}/s.zarr", "--quiet"], ["info", "{output}"]])
def test_ctrl_c_while_a_command_starts_exits_130_in_one_line(tmp_path, command):
    """SIGINT at several moments of the first second after Python has started (its own start-up,
    before any code of bigtopics runs, is timed by a sitecustomize that leaves a marker file)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITE_DONE)
    (tmp_path / "in.txt").write_text(text_of(1))
    (tmp_path / "out").mkdir()
    marker = tmp_path / "started"
    env = {**os.environ, "STARTED_MARKER": str(marker),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    args = [a.format(input=tmp_path / "in.txt", output=tmp_path / "out") for a in command]
    for delay in (0.05, 0.1, 0.2, 0.3, 0.6, 1.0):
        marker.unlink(missing_ok=True)
        process = subprocess.Popen([sys.executable, "-m", "bigtopics.cli", *args], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=300)
        if process.returncode in (0, 1) and "interrupted" not in err:  # done before the signal came (info: not a store)
            continue
        if process.returncode == -signal.SIGINT and err.startswith("error:") and "Traceback" not in err:
            continue  # the command had ended (info: not a store) and Python, exiting, no longer handles SIGINT
        assert process.returncode == 130 and "Traceback" not in err, (delay, process.returncode, err)
        assert err.rstrip().splitlines()[-1].startswith("interrupted"), (delay, err)
        assert not (tmp_path / "out" / "s.zarr").exists()
