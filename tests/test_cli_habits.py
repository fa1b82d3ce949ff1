"""What MALLET users and shell scripts expect of the command line: MALLET's option names, exit
statuses (2 usage, 1 failure at run time, 130 Ctrl-C, 143 SIGTERM), --debug, and `info` and
`topics` on a run still training."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from bigtopics.checkpoints import list_checkpoints
from bigtopics.cli import main
from bigtopics.synth import CorpusSpec, write_corpus


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("habits") / "corpus.zarr"
    write_corpus(CorpusSpec(n_docs=3000, n_topics=4, n_words=200, mean_length=40, seed=4), path, "store")
    return path


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def model_arrays(run):
    group = zarr.open_group(run / "model.zarr", mode="r")
    return {name: group[name][:] for name in ("topic_word/indptr", "topic_word/indices", "topic_word/data",
                                              "topic_totals")}


def test_mallet_option_names_give_the_same_model(store, tmp_path):
    ours, mallets = tmp_path / "ours", tmp_path / "mallets"
    result = invoke("train", store, "-o", ours, "-k", 4, "--seed", 3, "--workers", 1, "--alpha", 0.5,
                    "--max-docs", 2000, "--quiet")
    assert result.exit_code == 0, result.output
    result = invoke("train", store, "-o", mallets, "--num-topics", 4, "--random-seed", 3, "--num-threads", 1,
                    "--alpha-sum", 2.0, "--max-docs", 2000, "--quiet")
    assert result.exit_code == 0, result.output
    settings = [json.loads((run / "settings.json").read_text())["settings"] for run in (ours, mallets)]
    assert settings[0] == settings[1] and settings[1]["alpha"] == 0.5  # --alpha-sum 2 over 4 topics
    for name, values in model_arrays(ours).items():
        np.testing.assert_array_equal(values, model_arrays(mallets)[name], err_msg=name)
    for args in (["--alpha", 0.5, "--alpha-sum", 2.0], ["--alpha-sum", "nan"]):
        result = invoke("train", store, "-o", tmp_path / "x", "-k", 4, *args, "--quiet")
        assert result.exit_code == 2 and not (tmp_path / "x").exists(), result.output
    result = invoke("train", "--resume", ours, "--alpha-sum", 2.0)
    assert result.exit_code == 2 and "--alpha-sum needs -k" in result.output
    dt = tmp_path / "dt.zarr"
    result = invoke("infer", ours, store, "-o", dt, "--random-seed", 1, "--num-threads", 1, "--quiet")
    assert result.exit_code == 0, result.output
    result = invoke("evaluate", ours, "--doc-topics", dt, "--random-seed", 1, "--num-threads", 1, "--quiet",
                    "--heldout-docs", 10)
    assert result.exit_code == 0 and "npmi" in result.output.splitlines()[0] and "c_v" in result.output


def test_exit_status_says_usage_error_or_failure(store, tmp_path):
    run = tmp_path / "run"
    result = invoke("train", store, "-o", run, "-k", 0, "--quiet")  # an option out of range
    assert result.exit_code == 2 and result.output.startswith("error: -k")
    result = invoke("train", store, "-o", run, "-k", 3, "--cluster", "remote:2", "--quiet")
    assert result.exit_code == 2 and "give local:N" in result.output
    result = invoke("train", store, "--quiet")  # options missing
    assert result.exit_code == 2 and "Usage:" in result.output
    result = invoke("topics", tmp_path)  # no model there: a failure, not a usage error
    assert result.exit_code == 1 and result.output.startswith("error: ") and "Traceback" not in result.output
    result = invoke("topics", tmp_path, "--debug")
    assert result.exit_code == 1 and "Traceback (most recent call last)" in result.output
    assert result.output.rstrip().splitlines()[-1].startswith("error: ")


def cli(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "bigtopics.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def wait_for(condition, process, seconds=240.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_info_and_topics_read_a_run_in_progress_and_sigterm_exits_143(store, tmp_path):
    run = tmp_path / "run"
    process = cli("train", store, "-o", run, "-k", 4, "--epochs", 500, "--batch-size", 100, "--quiet")
    try:
        # the first model comes after the first minibatch, not after --snapshot-every (10 minutes)
        assert wait_for(lambda: (run / "model.zarr" / "zarr.json").exists(), process)
        shown = subprocess.run([sys.executable, "-m", "bigtopics.cli", "topics", str(run)], capture_output=True,
                               text=True, check=False)
        assert shown.returncode == 0 and len(shown.stdout.splitlines()) == 4, shown.stderr

        def progress():
            text = subprocess.run([sys.executable, "-m", "bigtopics.cli", "info", str(run)], capture_output=True,
                                  text=True, check=False).stdout
            return next((line for line in text.splitlines() if "progress" in line), "")
        # the metrics log is read, though the only checkpoint is still the one written at the start
        assert wait_for(lambda: " 0 minibatches" not in progress() and progress(), process)
        line = progress()
        assert "(training now)" in line and "epochs done" in line
        assert [c.step for c in list_checkpoints(run)] == [0]
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
        assert process.returncode == 143, err
        assert f"bigtopics train --resume {run}" in err
    finally:
        if process.poll() is None:
            process.kill()
    assert "(training now)" not in progress()
    out = tmp_path / "dt.zarr"
    inference = cli("infer", run, store, "-o", out, "--part-tokens", 2000, "--workers", 1, "--burnin", 200,
                    "--samples", 200, "--quiet")
    assert wait_for(lambda: (tmp_path / ".dt.zarr.parts").exists() and any((tmp_path / ".dt.zarr.parts").iterdir()),
                    inference)
    inference.send_signal(signal.SIGTERM)
    _, err = inference.communicate(timeout=60)
    assert inference.returncode == 143 and err.startswith("terminated: the parts inferred so far are kept"), err


# SIGTERM while Python runs a callback from C: numba's compiler calls back into Python through
# ctypes, and an exception raised there is printed and dropped ("Exception ignored on calling
# ctypes callback function"), so the command went on and exited 0.
IN_A_CALLBACK = """
import ctypes, sys, time
from bigtopics import cli, command_errors
cli.main.callback()  # the handlers every command runs with
def compiling():
    print("in the callback", flush=True)
    time.sleep(3)
try:
    ctypes.CFUNCTYPE(None)(compiling)()
    time.sleep(10)
    print("went on")
except command_errors.Terminated:
    print("terminated")
"""


def test_sigterm_inside_a_callback_from_c_still_stops_the_command():
    process = subprocess.Popen([sys.executable, "-c", IN_A_CALLBACK], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline() == "in the callback\n"
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert out == "terminated\n" and err == "", (out, err)
