"""Hardening of what the commands write and read back (issue 47, "No silent harm").

One rule for every output (bigtopics/places.py): never a run's own files, never inside a store or
any Zarr group, never a device or a pipe, a user's file only with --overwrite, and a refusal that
--overwrite cannot lift does not suggest it. `info` reads a run on read-only media and names a bad
metrics line; evaluate stops when the run's store has moved; temporaries of a killed export are
removed by the next one; an input that is not a regular file is named for what it is.

The run is a real one (a tiny corpus, trained in-process once for the module); the read-only
medium is a real read-only tmpfs, mounted when the tests run as root (skipped otherwise).
"""

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import warnings

import pytest
from click.testing import CliRunner

from bigtopics.atomic import temporary_sibling
from bigtopics.cli import main
from bigtopics.places import check_output_file, what_is
from bigtopics.rundir import RunLock, run_in_progress
from bigtopics.synth import CorpusSpec, write_corpus

SPEC = CorpusSpec(n_docs=120, n_topics=3, n_words=200, mean_length=30, alpha=0.1, eta=0.02, seed=7)


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(result, status: int = 1) -> str:
    """The one line of a command that failed with `status`: 1 at run time, 2 for a bad option."""
    assert result.exit_code == status, (result.exit_code, result.output)
    text = result.output.strip()
    assert text.count("\n") == 0 and text.startswith("error: "), text
    return text


def tree_bytes(folder) -> dict:
    """Every file below `folder` with its bytes: what must not change."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A store and a finished run with settings, metrics, checkpoints and a model."""
    root = tmp_path_factory.mktemp("outputs")
    store = root / "store.zarr"
    write_corpus(SPEC, store, "store")
    run = root / "run"
    result = cli("train", store, "-o", run, "-k", 3, "--epochs", 1, "--batch-size", 40, "--checkpoint-every", 1,
                 "--seed", 1, "--quiet")
    assert result.exit_code == 0, result.output
    assert list((run / "checkpoints").glob("step-*.ckpt")) and (run / "metrics.jsonl").exists()
    return {"root": root, "store": store, "run": run}


def info_reads(run) -> str:
    result = cli("info", run)
    assert result.exit_code == 0, result.output
    assert "progress" in result.output and "checkpoints" in result.output
    return result.output


# -- ITEM 1: report -o / evaluate -o never write over a run's or a store's files ------------------
TARGETS = {"settings": "run/settings.json", "metrics": "run/metrics.jsonl", "checkpoint": "checkpoint",
           "model group": "run/model.zarr/zarr.json", "store group": "store.zarr/zarr.json",
           "store chunk": "store.zarr/indices/c/0"}


def target_path(trained, which: str):
    if which == "checkpoint":
        return sorted((trained["run"] / "checkpoints").glob("step-*.ckpt"))[-1]
    return trained["root"] / TARGETS[which]


@pytest.mark.parametrize("command", ["report", "evaluate"])
@pytest.mark.parametrize("which", list(TARGETS))
def test_a_file_output_never_replaces_a_runs_or_a_stores_files_even_with_overwrite(trained, command, which):
    target = target_path(trained, which)
    assert target.is_file()
    before = {name: tree_bytes(trained[name]) for name in ("run", "store")}
    extra = ["--quiet"] if command == "evaluate" else []
    for flags in ([], ["--overwrite"]):
        line = one_line_error(cli(command, trained["run"], "-o", target, *flags, *extra))
        assert str(target) in line and "--overwrite" not in line
        assert ("lies inside a store" in line or "lies inside a model" in line or "training run" in line), line
    assert {name: tree_bytes(trained[name]) for name in ("run", "store")} == before
    assert not list(target.parent.glob(f".{target.name}.tmp-*"))
    info_reads(trained["run"])
    assert cli("info", trained["store"]).exit_code == 0


@pytest.mark.parametrize("args", [
    ["export", "{run}", "-o", "{store}/exported"],
    ["site", "{run}", "--doc-topics", "{store}", "-o", "{run}/checkpoints/site"],
    ["infer", "{run}", "{store}", "-o", "{run}/table/doc_topics.zarr"],
    ["ingest", "{corpus}", "-o", "{run}/model.zarr/more.zarr"],
    ["train", "{store}", "-o", "{store}/indices/run", "-k", "2"],
])
def test_a_folder_output_is_never_written_inside_a_store_a_model_or_a_runs_files(trained, tmp_path, args):
    corpus = tmp_path / "texts.txt"
    corpus.write_text("whale ship sea\n")
    args = [a.format(run=trained["run"], store=trained["store"], corpus=corpus) for a in args]
    before = {name: tree_bytes(trained[name]) for name in ("run", "store")}
    for flags in ([], ["--overwrite"]):
        line = one_line_error(cli(*args, *flags))
        assert "no output may be written into" in line and "--overwrite" not in line, line
        assert not os.path.exists(args[args.index("-o") + 1])
    assert {name: tree_bytes(trained[name]) for name in ("run", "store")} == before


def test_evaluate_and_report_write_into_the_run_only_their_own_file(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    # report as the run's evaluation, evaluate as its report: refused whatever the flags
    line = one_line_error(cli("report", run, "-o", run / "evaluation.json", "--overwrite"))
    assert "is a file of the training run" in line and "--overwrite" not in line
    assert not (run / "evaluation.json").exists()
    assert cli("report", run).exit_code == 0  # the default, run/report.html
    report = (run / "report.html").read_bytes()
    line = one_line_error(cli("evaluate", run, "-o", run / "report.html", "--overwrite", "--quiet"))
    assert "is a file of the training run" in line and (run / "report.html").read_bytes() == report
    assert cli("report", run).exit_code == 0  # its own earlier report is replaced without asking
    # a file there that is not its own is not replaced, even with --overwrite
    (run / "report.html").write_text("my notes")
    line = one_line_error(cli("report", run, "--overwrite"))
    assert "is not a bigtopics report" in line and "--overwrite" not in line
    assert (run / "report.html").read_text() == "my notes"
    # a user's file elsewhere: only with --overwrite, as the message says
    mine = tmp_path / "page.html"
    mine.write_text("mine")
    line = one_line_error(cli("report", run, "-o", mine))
    assert line.endswith("(use --overwrite to replace it)") and mine.read_text() == "mine"
    assert cli("report", run, "-o", mine, "--overwrite").exit_code == 0
    assert "bigtopics report" in mine.read_text()


def test_a_broken_evaluation_leaves_the_report_with_a_notice(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    (run / "evaluation.json").write_text('{"evaluation_format_version": 1, "topics": ')
    result = cli("report", run)
    assert result.exit_code == 0, result.output
    assert "evaluation.json cannot be read as an evaluation" in result.output


@pytest.mark.parametrize("kind", ["/dev/null", "link to /dev/zero", "named pipe"])
def test_a_device_or_a_pipe_is_never_taken_for_a_file_to_replace(trained, tmp_path, kind):
    if kind == "/dev/null":
        target, said = "/dev/null", "a character device"
    elif kind == "link to /dev/zero":
        target, said = tmp_path / "zero", "a character device"
        target.symlink_to("/dev/zero")
    else:
        target, said = tmp_path / "pipe", "a named pipe (FIFO)"
        os.mkfifo(target)
    for command, extra in (("report", []), ("evaluate", ["--quiet"])):
        line = one_line_error(cli(command, trained["run"], "-o", target, "--overwrite", *extra))
        assert f"is {said}, not a regular file" in line and "--overwrite" not in line
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert what_is(target) == said and (kind != "link to /dev/zero" or os.path.islink(target))


def test_check_output_file_names_what_is_there(tmp_path):
    with pytest.raises(FileExistsError, match="is a directory"):
        check_output_file(tmp_path, True, lambda p: False, "a report")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError, match=r"gone exists and is not a report \(use --overwrite"):
        check_output_file(tmp_path / "gone", False, lambda p: False, "a report")
    check_output_file(tmp_path / "gone", True, lambda p: False, "a report")  # a link the user lets go
    check_output_file(tmp_path / "new.html", False, lambda p: False, "a report")


# -- ITEM 9 (a): info reads a run on read-only media --------------------------------------------
@pytest.fixture
def read_only_copy(trained, tmp_path):
    """A copy of the run on a real read-only filesystem (a tmpfs remounted read-only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "medium"
    point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(point)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        shutil.copytree(trained["run"], point / "run")
        (point / "run" / ".lock").touch()  # as a run that trained there left it
        subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True, capture_output=True)
        yield point / "run"
    finally:
        if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)


def test_info_reads_a_run_on_read_only_media(read_only_copy, trained):
    with pytest.raises(OSError) as refused:
        (read_only_copy / "probe").write_text("x")
    assert refused.value.errno == errno.EROFS
    shown = info_reads(read_only_copy)
    assert "(training now)" not in shown
    assert shown.split("\n", 1)[1] == info_reads(trained["run"]).split("\n", 1)[1].replace(
        str(trained["run"]), str(read_only_copy))


def test_info_still_sees_a_run_being_trained(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    lock = RunLock(run)
    lock.acquire()
    try:
        assert run_in_progress(run)
        assert "(training now)" in info_reads(run)
    finally:
        lock.release()
    assert not run_in_progress(run)


# -- ITEM 8: a bad metrics.jsonl in info --------------------------------------------------------
@pytest.mark.parametrize("lines, number", [
    (['{"minibatch": 9}'], 0), (['[1, 2]'], 0), (['{"minibatch": "nine", "epoch": 0}'], 0),
    (['not json at all', '{"minibatch": 9}'], 1),
])
def test_info_names_a_bad_metrics_line_and_shows_the_rest(trained, tmp_path, lines, number):
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    metrics = run / "metrics.jsonl"
    good = len(metrics.read_text().splitlines())
    metrics.write_text(metrics.read_text() + "".join(line + "\n" for line in lines))
    output, warned = info_warning(run)
    assert warned.startswith(f"{metrics}:{good + 1 + number}: not a ") and "\n" not in warned
    assert "the last good record before it is shown" in warned
    assert "last report      minibatch" in output and "Traceback" not in output


def info_warning(run) -> tuple[str, str]:
    """The output of `info RUN` (which must succeed) and the one warning it gave."""
    with pytest.warns(UserWarning) as warned:
        result = cli("info", run)
    assert result.exit_code == 0, result.output
    assert len(warned) == 1
    return result.output, str(warned[0].message)


def test_info_with_no_usable_metrics_record_says_so(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    (run / "metrics.jsonl").write_text('{"minibatch": 1}\n{"minibatch": 2, "epoch": null}\n')
    output, warned = info_warning(run)
    assert warned.startswith(f"{run / 'metrics.jsonl'}:2: not a metrics record") and "no report is shown" in warned
    assert "last report" not in output
    # a line torn by a crash, the last one, is skipped without a word, as training does
    (run / "metrics.jsonl").write_text(((trained["run"] / "metrics.jsonl").read_text()) + '{"minibatch": 1')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "last report" in info_reads(run)


def test_a_metrics_warning_is_one_line_on_the_command_line(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    good = (trained["run"] / "metrics.jsonl").read_text()
    (run / "metrics.jsonl").write_text(good + "[]\n")
    shown = subprocess.run([sys.executable, "-m", "bigtopics.cli", "info", str(run)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr == (f"warning: {run / 'metrics.jsonl'}:{len(good.splitlines()) + 1}: not a JSON object; "
                            "the last good record before it is shown\n")


# -- ITEM 9 (b): evaluate when the run's store has moved -----------------------------------------
def test_evaluate_stops_when_the_runs_store_has_moved(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    settings = json.loads((run / "settings.json").read_text())
    gone = tmp_path / "moved-away.zarr"
    (run / "settings.json").write_text(json.dumps(settings | {"store": str(gone)}))
    line = one_line_error(cli("evaluate", run, "--quiet"))
    assert f"the run's store {gone} is gone" in line and "--store" in line
    assert not (run / "evaluation.json").exists()


# -- ITEM 9 (c): what a killed export left is removed by the next one ----------------------------
def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_next_export_removes_what_a_killed_one_left_and_nothing_else(trained, tmp_path):
    out = tmp_path / "export"
    pid = dead_pid()
    killed = tmp_path / f".export.tmp-{pid}-0123abcd"  # as kill -9 in the middle of an export leaves it
    (killed / "topic_word.zarr").mkdir(parents=True)
    (killed / "vocab.txt").write_text("half")
    running = tmp_path / f".export.tmp-{os.getppid()}-89abcdef"  # a process still running: left alone
    running.mkdir()
    spill = tmp_path / f".export.spill-{pid}-00000000"  # an ingest's resumable work: not an export's
    spill.mkdir()
    other = tmp_path / f".notes.tmp-{pid}-11111111"  # another output's
    other.mkdir()
    result = CliRunner().invoke(main, ["export", str(trained["run"]), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"removed {killed.name}" in result.output
    assert not killed.exists() and running.exists() and spill.exists() and other.exists()
    assert (out / "topic_keys.tsv").is_file()
    # an export --overwrite killed between its two renames left the earlier one only as .old-: put back
    old = tmp_path / f".export.old-{pid}-22222222"
    os.replace(out, old)
    result = CliRunner().invoke(main, ["export", str(trained["run"]), "-o", str(out), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert f"put back {out}" in result.output and not old.exists() and (out / "topic_keys.tsv").is_file()
    assert sorted(p.name for p in tmp_path.glob(".export.*")) == sorted([running.name, spill.name])


def test_a_temporary_names_its_writer(tmp_path):
    assert f".out.tmp-{os.getpid()}-" in temporary_sibling(tmp_path / "out").name


# -- ITEM 9 (d): an input that is not a regular file is named for what it is ---------------------
def test_an_input_that_is_a_device_or_a_pipe_is_named_so(tmp_path):
    zero = tmp_path / "zero.txt"
    zero.symlink_to("/dev/zero")
    line = one_line_error(cli("ingest", zero, "-o", tmp_path / "s.zarr", "--quiet"))
    assert "zero.txt: a character device, not a regular file" in line and "broken" not in line
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("whale ship sea whale ship\n")
    (folder / "b.txt").write_text("whale sea ship sea\n")
    os.mkfifo(folder / "pipe.txt")
    line = one_line_error(cli("ingest", folder, "-o", tmp_path / "s.zarr", "--quiet"))
    assert "pipe.txt: a named pipe (FIFO), not a regular file" in line
    result = cli("ingest", folder, "-o", tmp_path / "s.zarr", "--skip-bad", "--min-df", 1, "--max-df", 1.0)
    assert result.exit_code == 0, result.output
    assert "a named pipe (FIFO), not a regular file" in result.output
    assert what_is(tmp_path / "nothing") == "nothing" and what_is(folder) == "a directory"
