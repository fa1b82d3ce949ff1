import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

# Tests must not depend on how many cores the machine has.
os.environ.setdefault("NUMBA_NUM_THREADS", "2")
# Where the environment forbids bytecode caches (PYTHONDONTWRITEBYTECODE), every command, benchmark
# and cluster worker process the tests start compiles bigtopics' modules anew, about 0.2 s of a core
# each; the suite writes them (__pycache__, which git ignores).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# `import naive` and `from . import naive` both find tests/naive.py.
sys.path.insert(0, os.path.dirname(__file__))


def pytest_configure(config):
    """Under pytest-xdist the controller compiles the commands' common kernels once, before the
    workers start (tests/warm_kernels.py); a failure there is left for the tests to show."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        subprocess.run([sys.executable, str(Path(__file__).with_name("warm_kernels.py"))], capture_output=True,
                       timeout=900)


def pytest_addoption(parser):
    parser.addoption("--record-golden", action="store_true",
                     help="rewrite tests/golden_models.json from this code's models (test_golden_models.py)")


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory):
    """The built-in demo books ingested as `bigtopics demo` does (sections of 500 tokens)."""
    from click.testing import CliRunner

    from bigtopics.cli import main

    path = tmp_path_factory.mktemp("demo") / "books.zarr"
    books = files("bigtopics") / "data" / "demo_books.jsonl.gz"
    result = CliRunner().invoke(main, ["ingest", str(books), "-o", str(path), "--section-tokens", "500", "--quiet"])
    assert result.exit_code == 0, result.output
    return path
