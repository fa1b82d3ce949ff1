"""What bigtopics writes and how it recognises its own output before it replaces anything (where
a group lives, and the errors of object storage: locations.py).

Replacing: --overwrite must replace earlier results, never a user's files: a directory (or a
prefix) counts as bigtopics' output only if its marker says so, not merely by a file name that
other tools use too. Each command replaces only output of its own kind (`check_output`'s `kind`:
ingest a store, train a run, infer document topics, export an export), never a store from
another command, and never a run or export folder holding entries it did not write (RUN_ENTRIES,
EXPORT_ENTRIES): those are named and left alone. Nor, whatever the flags, is anything written
inside a Zarr group or among a run's, an export's or a site's own files (places.py: the rule for
every output, a single file's included). `OutputLock` keeps two processes from writing one
output at once.

Writing: `NewGroup` writes a group so that readers never take a half-written one for finished.
Locally it is built under a temporary name and renamed into place. Object storage has no rename:
the group is written in place, its attributes say UNFINISHED until `publish` writes the final
ones last, and readers refuse it until then.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
from pathlib import Path

from .atomic import publish_dir, temporary_sibling
from .locations import Location, canonical_location, locate
from .places import (
    KIND_ATTRIBUTES,
    KINDS,
    OWN_ENTRIES,
    attributes_kind,
    check_output_place,
    output_kind,
    read_json,
)

# Which command writes each kind of output (KINDS), for messages.
KIND_COMMANDS = {"store": "ingest", "run": "train", "doc_topics": "infer", "export": "export", "site": "site"}
# The attributes of a group while it is being written in place (object storage): complete groups
# never carry "unfinished", since `NewGroup.publish` replaces all attributes at once.
UNFINISHED = {"created_by": "bigtopics",
              "unfinished": "bigtopics is writing this group; it is complete once its final attributes are written"}

# -- recognising and replacing bigtopics' output ----------------------------------------------
def attributes_by_bigtopics(attributes: dict | None) -> bool:
    """Whether a Zarr group's attributes mark it as bigtopics' (a store, a model, document
    topics, or one of them unfinished). A store's generic "format_version" alone is not enough."""
    return isinstance(attributes, dict) and (attributes.get("created_by") == "bigtopics" or any(
        key in attributes for key in KIND_ATTRIBUTES if key != "format_version"))


def written_by_bigtopics(folder: Path) -> bool:
    """Whether `folder` is a store (a Zarr group created_by bigtopics), a model or document topics
    (a Zarr group with their format attribute), a training run (settings.json with the store's
    fingerprint) or an export. A store's generic "format_version" alone is not enough."""
    folder = Path(folder)
    if attributes_by_bigtopics(read_json(folder / "zarr.json").get("attributes")):
        return True
    return output_kind(folder) is not None


def foreign_entries(folder: Path, kind: str) -> list[str]:
    """The top-level entries of a run or export `folder` that its kind does not write (besides
    LEFTOVERS), sorted: what a user added."""
    patterns = OWN_ENTRIES.get(kind)
    if patterns is None:
        return []
    return sorted(entry.name for entry in Path(folder).iterdir() if entry.name not in LEFTOVERS
                  and not any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in patterns))


def _names(names: list[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _wrong_kind(location, found: str, kind: str) -> FileExistsError:
    command = KIND_COMMANDS.get(kind, "this command")
    return FileExistsError(f"{location} is {KINDS[found]}, which bigtopics {command} never replaces (its --overwrite "
                           f"replaces only {KINDS[kind]}): choose another output")


# Entries that leave a folder as good as empty: a refused start's lock, macOS's folder settings.
# (Any other hidden entry, such as .git, is the user's.)
LEFTOVERS = (".lock", ".DS_Store")


def holds_files(folder: Path) -> bool:
    """Whether `folder` holds anything but LEFTOVERS."""
    return any(entry.name not in LEFTOVERS for entry in Path(folder).iterdir())


def check_output(path, overwrite: bool, inputs=(), storage_options: dict | None = None,
                 kind: str | None = None) -> None:
    """Refuse to write `path` (a local path, a URL or a Location) where that would destroy
    anything but bigtopics' earlier output of `kind` (a key of KINDS; None: of any kind, the
    behaviour of callers that do not say).

    Raises if an input is `path` or lies inside it, if a local `path` is in a place no output
    may go (places.check_output_place: inside a Zarr group, among a run's files), if `path`
    exists as something else than a directory (or prefix) that is empty or written by
    bigtopics, if it is bigtopics output of another kind than `kind`, if it is a run or export
    folder holding entries its kind does not write (named in the message), or if it exists and
    overwrite is not given. A group an interrupted write left unfinished on object storage is
    replaced without overwrite, as a local one never shows under its final name. Inputs may be
    paths, URLs or None (skipped).
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind of output {kind!r}; one of {', '.join(KINDS)}")
    location = locate(path, storage_options)
    target = location.text
    for source in inputs:
        if source is None or (not isinstance(source, (str, os.PathLike, Location))):
            continue
        source = locate(source).text if isinstance(source, Location) else canonical_location(os.fspath(source))
        if source == target or source.startswith(target.rstrip("/") + "/"):
            raise ValueError(f"{path} holds the input {source}: choose another output")
    if location.path is None:
        attributes, occupied = location.inspect()
        if not occupied or (attributes is not None and "unfinished" in attributes):
            return
        if not attributes_by_bigtopics(attributes):
            raise FileExistsError(f"{location} exists and is not bigtopics output, so bigtopics will not replace it: "
                                  "remove it yourself or choose another output")
        found = attributes_kind(attributes)
        if kind is not None and found is not None and found != kind:
            raise _wrong_kind(location, found, kind)
        if not overwrite:
            raise FileExistsError(f"{location} already exists (use --overwrite to replace it)")
        return
    path = location.path
    check_output_place(path)
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_dir() or (holds_files(path) and not written_by_bigtopics(path)):
        raise FileExistsError(f"{path} exists and is not bigtopics output, so bigtopics will not replace it: "
                              "remove it yourself or choose another output")
    if kind is not None and holds_files(path):
        found = output_kind(path)
        if found is not None and found != kind:
            raise _wrong_kind(path, found, kind)
        foreign = foreign_entries(path, kind)
        if foreign:
            raise FileExistsError(f"{path} holds {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'} bigtopics "
                                  f"did not write ({_names(foreign)}), which --overwrite would delete: move "
                                  f"{'it' if len(foreign) == 1 else 'them'} out or choose another output")
    if not overwrite:
        raise FileExistsError(f"{path} already exists (use --overwrite to replace it)")


class OutputLock:
    """An exclusive lock (flock) on a lock file next to an output, so that two processes never
    write one output at once: `acquire` refuses with one line if another process holds it.
    `release` deletes the lock file; a process that opened the file before it was deleted sees
    that the file it locked is no longer the one at the path and tries again."""

    def __init__(self, path: Path, what: str):
        self.path, self.what = Path(path), what
        self.handle = None

    def acquire(self) -> "OutputLock":
        import fcntl

        while True:
            handle = open(self.path, "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                raise FileExistsError(f"{self.what} is being written by another bigtopics process (it holds "
                                      f"{self.path}); wait for it to finish or stop it") from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.handle = handle
                return self
            handle.close()  # the holder released and deleted it in between: lock the new one

    def release(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.handle.close()
            self.handle = None

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


class NewGroup:
    """A new Zarr group at `location`, seen as finished only once `publish` has run.

    A local directory is built under a hidden temporary name next to it and renamed into place by
    `publish` (atomic.publish_dir; an existing one is replaced only with overwrite). A URL or a
    zarr store object has no rename: what is there is checked (check_output: bigtopics' own
    output, of `kind` if given, and overwrite given), deleted, and the group is written in place
    with the UNFINISHED attributes; `publish` writes the final attributes last. `abort` removes
    what was written.
    """

    def __init__(self, location, overwrite: bool = False, storage_options: dict | None = None,
                 kind: str | None = None):
        import zarr

        self.location, self.overwrite = locate(location, storage_options), overwrite
        path = self.location.path
        if path is not None:
            if path.exists() and not overwrite:
                raise FileExistsError(f"{path} already exists (use --overwrite to replace it)")
            self.tmp = temporary_sibling(path)
            self.group = zarr.open_group(self.tmp, mode="w")
            return
        self.tmp = None
        check_output(self.location, overwrite, kind=kind)
        with self.location.errors():
            self.location.delete()
            self.group = zarr.open_group(self.location.zarr_store(read_only=False), mode="w",
                                         attributes=dict(UNFINISHED))

    def errors(self):
        return self.location.errors()

    def publish(self, attributes: dict) -> None:
        """Write the group's final attributes (all at once, replacing UNFINISHED) and publish it."""
        with self.errors():
            self.group.attrs.put(dict(attributes))
        if self.tmp is not None:
            publish_dir(self.tmp, self.location.path, self.overwrite)

    def abort(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        with contextlib.suppress(Exception):
            self.location.delete()
