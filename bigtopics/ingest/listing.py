"""The input files of an ingest, listed as a stream: memory does not grow with their number.

`input_files` yields (file, name) for every input file in a reproducible order: directories
recursively, entry by entry in name order (the order of their sorted paths), hidden entries and
bigtopics' own output (a store, run or export written beside the texts) left out. A file's name,
its document id for `txt`, is its path relative to the input root, or the path as given for a
file named directly (on the command line or in a `--files-from` list), so ids are the same on
every rerun.

Folders reached through symbolic links are followed; one reached twice (a link to a folder
already read, or a loop) is skipped. That, a folder that cannot be read, a broken link and
anything else that is not a regular file (a device, a named pipe, a socket: named as such) are
passed to `problem(name, reason, error)`, never dropped unmentioned.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..outputs import written_by_bigtopics
from ..places import what_is

Problem = Callable[[str, str, bool], None]  # (name, reason, is it an error (else a note))


def input_files(inputs: Iterable[str | os.PathLike], problem: Problem, *,
                full_names: bool = False) -> Iterator[tuple[Path, str]]:
    """(file, name) of every input file; a file given directly is named by its file name, or with
    `full_names` (a --files-from list) by its path as given."""
    for item in map(Path, inputs):
        if item.is_dir():
            st = item.stat()
            yield from _walk(item, "", {(st.st_dev, st.st_ino)}, problem)
        elif item.is_file():
            yield item, str(item) if full_names else item.name
        elif item.is_symlink() or item.exists():
            problem(str(item), _not_a_file(item), True)
        else:  # (a path of a --files-from list, or a file gone since it was listed)
            problem(str(item) if full_names else item.name, "cannot be read (No such file or directory)", True)


def _walk(folder: Path, prefix: str, seen: set, problem: Problem) -> Iterator[tuple[Path, str]]:
    """Files under folder in the order of their sorted paths; `seen` holds the (device, inode) of
    every folder entered so far (folders, not files: a thousand times fewer)."""
    if written_by_bigtopics(folder):
        return
    try:
        with os.scandir(folder) as it:
            entries = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    except OSError as e:
        problem(prefix.rstrip("/") or str(folder), f"a folder that cannot be read ({e.strerror or e})", True)
        return
    for entry in entries:
        name = prefix + entry.name
        try:
            if entry.is_dir():  # (follows symbolic links)
                st = entry.stat()
                if (st.st_dev, st.st_ino) in seen:
                    problem(name, "a folder reached twice (through a symbolic link), read once", False)
                    continue
                seen.add((st.st_dev, st.st_ino))
                yield from _walk(Path(entry.path), name + "/", seen, problem)
            elif entry.is_file():
                yield Path(entry.path), name
            else:  # a broken link, a device, a named pipe, a socket: never read as text
                problem(name, _not_a_file(entry.path), True)
        except OSError as e:
            problem(name, f"cannot be read ({e.strerror or e})", True)


def _not_a_file(path) -> str:
    """Why an input that is neither a file nor a folder is not read: what it is."""
    kind = what_is(path)
    return kind if kind == "a broken symbolic link" else f"{kind}, not a regular file"


def overlapping_inputs(inputs: list[str | os.PathLike]) -> tuple[Path, Path] | None:
    """Two inputs that overlap (the same file or folder, or one inside the other), whose
    documents would be read twice, or None."""
    resolved = [(Path(i), Path(i).resolve()) for i in inputs]
    for k, (item, real) in enumerate(resolved):
        for other, other_real in resolved[:k]:
            if real.is_relative_to(other_real) or other_real.is_relative_to(real):
                return item, other
    return None


def read_file_list(source) -> Iterator[str]:
    """The paths listed in a --files-from file (a path, or an open text file: stdin's copy), one
    a line, blank lines skipped."""
    if not isinstance(source, (str, os.PathLike)):
        source.seek(0)
        yield from (line.rstrip("\n") for line in source if line.strip())
        return
    with open(source, encoding="utf-8", errors="surrogateescape") as f:  # (as Python reads names not UTF-8)
        yield from (line.rstrip("\n") for line in f if line.strip())
