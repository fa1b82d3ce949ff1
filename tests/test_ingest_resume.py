"""Ingest at library scale (issue 24): an interrupted ingest is resumed by running it again, from
the runs it spilled (checked, not trusted), and gives the same store; kill -9 leaves no worker
running; the hidden folders interruptions leave are reused, put back or removed, and reported."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import test_ingest_scale
from test_ingest_scale import RECORDED, SMALL_VOCAB, run, store_digest

from bigtopics import open_store
from bigtopics.ingest import workers
from bigtopics.ingest.pipeline import MIN_BUDGET

ocr = test_ingest_scale.ocr  # the fixture: the OCR-like corpus

SMALL = {"pruning": SMALL_VOCAB, "memory_limit": MIN_BUDGET, "unit_bytes": 1 << 16}


def _waited() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def interrupt_after(monkeypatch, n_units: int) -> None:
    """Ctrl-C in the middle of the tokenizing, after n_units units."""
    process, calls = workers.UnitTokenizer.process, []

    def interrupted(self, unit):
        calls.append(unit.seq)
        if len(calls) > n_units:
            raise KeyboardInterrupt
        return process(self, unit)

    monkeypatch.setattr(workers.UnitTokenizer, "process", interrupted)


def test_an_interrupted_ingest_continues_where_it_stopped(ocr, tmp_path, monkeypatch):
    logged = []
    interrupt_after(monkeypatch, 30)
    with pytest.raises(KeyboardInterrupt):
        run(ocr, tmp_path / "s.zarr", log=logged.append, **SMALL)
    (spill,) = tmp_path.glob(".s.zarr.spill-*")
    assert len(list(spill.glob("run-*.json"))) >= 2 and "run the same command again" in logged[-1]
    monkeypatch.undo()

    # One of the spilled runs is damaged: it is found out and its units are done again.
    damaged = min(spill.glob("run-*.tf"))
    damaged.write_bytes(damaged.read_bytes()[:-8] + b"\1" * 8)
    logged.clear()
    report = run(ocr, tmp_path / "s.zarr", log=logged.append, **SMALL)
    assert store_digest(tmp_path / "s.zarr") == RECORDED["small_vocab"][0]
    assert report.pruned == {rule: tuple(v) for rule, v in RECORDED["small_vocab"][1].items()}
    assert any("does not check out" in m for m in logged) and any("resuming" in m for m in logged)
    assert not list(tmp_path.glob(".s.zarr*"))


def test_changed_input_is_not_resumed(ocr, tmp_path, monkeypatch):
    (tmp_path / "in.jsonl").write_bytes(ocr.read_bytes())
    interrupt_after(monkeypatch, 30)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "in.jsonl", tmp_path / "s.zarr", **SMALL)
    monkeypatch.undo()
    assert list(tmp_path.glob(".s.zarr.spill-*/run-*.json"))
    text = (tmp_path / "in.jsonl").read_bytes()
    (tmp_path / "in.jsonl").write_bytes(text.replace(b"doc-1\"", b"doc-X\"", 1))
    with pytest.raises(ValueError, match="in.jsonl changed since the interrupted ingest"):
        run(tmp_path / "in.jsonl", tmp_path / "s.zarr", **SMALL)
    assert not list(tmp_path.glob(".s.zarr*"))  # the next run starts afresh


def test_leftovers_of_dead_processes_are_put_back_or_removed_and_reported(ocr, tmp_path):
    run(ocr, tmp_path / "s.zarr", **SMALL)
    pid = _waited()
    os.rename(tmp_path / "s.zarr", tmp_path / f".s.zarr.old-{pid}-0123abcd")  # --overwrite killed between renames
    (tmp_path / f".s.zarr.tmp-{pid}-89abcdef").mkdir()
    (tmp_path / f".s.zarr.tmp-{pid}-89abcdef" / "zarr.json").write_text("{}")
    (tmp_path / f".s.zarr.spill-{pid}-00000000").mkdir()  # of no known settings
    (tmp_path / f".s.zarr.spill-{os.getppid()}-11111111").mkdir()  # a process still running: left alone
    logged = []
    run(ocr, tmp_path / "s.zarr", overwrite=True, log=logged.append, **SMALL)
    assert any(f"put back {tmp_path / 's.zarr'}" in m for m in logged)
    assert sum("removed .s.zarr." in m for m in logged) == 2
    assert [p.name for p in tmp_path.glob(".s.zarr*")] == [f".s.zarr.spill-{os.getppid()}-11111111"]
    assert store_digest(tmp_path / "s.zarr") == RECORDED["small_vocab"][0]


@pytest.mark.slow
def test_kill_9_leaves_no_worker_and_the_rerun_gives_the_same_store(ocr, tmp_path):
    command = [sys.executable, "-m", "bigtopics.cli", "ingest", str(ocr), "-o", str(tmp_path / "s.zarr"),
               "--workers", "2", "--memory-limit", "16M", "--max-vocab", "2000", "--quiet"]
    main = subprocess.Popen(command)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".s.zarr.spill-*/run-*.json")):
        assert main.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    children = psutil.Process(main.pid).children(recursive=True)
    assert len([c for c in children if "spawn_main" in " ".join(c.cmdline())]) == 2
    main.send_signal(signal.SIGKILL)
    main.wait()
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive
    subprocess.run(command, check=True)
    assert store_digest(tmp_path / "s.zarr") == RECORDED["small_vocab"][0]
    assert open_store(tmp_path / "s.zarr").n_docs > 0 and not list(tmp_path.glob(".s.zarr*"))
