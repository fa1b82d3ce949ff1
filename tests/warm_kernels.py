"""Compile the kernels of the commands' common path into numba's on-disk cache, once, before the
test processes start (conftest.py runs it in pytest-xdist's controller).

On a fresh checkout numba compiles a kernel the first time a process calls it and caches it for
the processes after. Under pytest-xdist the workers' first tests, and the command processes they
start, would each compile the same kernels at the same time, until one of them had cached them.
Run here, one process compiles them once: ingest, train with the defaults, infer, evaluate and
export on the demo books, as a user's first session would.

    python tests/warm_kernels.py
"""

import sys
import tempfile
from importlib.resources import files
from pathlib import Path

from bigtopics.cli import main


def command(*args) -> None:
    try:
        main([str(a) for a in args], standalone_mode=False)
    except SystemExit as stop:  # a command that exits 0 is as good as one that returns
        if stop.code:
            raise


def warm() -> None:
    with tempfile.TemporaryDirectory(prefix="bigtopics-warm-") as folder:
        folder = Path(folder)
        books = files("bigtopics") / "data" / "demo_books.jsonl.gz"
        store, run = folder / "books.zarr", folder / "run"
        command("ingest", books, "-o", store, "--section-tokens", "500", "--quiet")
        command("train", store, "-o", run, "-k", "10", "--epochs", "2", "--quiet")
        command("infer", run, store, "-o", folder / "doc_topics.zarr", "--quiet")
        command("evaluate", run, "--store", store, "--quiet")
        command("export", run, "-o", folder / "export", "--doc-topics", folder / "doc_topics.zarr")


if __name__ == "__main__":
    sys.exit(warm())
