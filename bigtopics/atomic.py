"""Crash-safe file and directory writes: temporary name, fsync, rename.

Finished work (a store, a model, a checkpoint) is only ever visible under its final name once it
is complete and on disk; an interrupted write leaves at most a temporary name behind.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil

from .memory import format_bytes

# Errors that mean the disk (or the user's quota on it) is full.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


class DiskFullError(OSError):
    """No space left on a disk for something bigtopics writes.

    Its message is one line naming the directory and the bytes the write needed; `hint` (set by
    whoever knows it, e.g. the trainer's resume command) is appended to it. An OSError with errno
    ENOSPC, so code that handles a full disk in general handles this one too.
    """

    def __init__(self, message: str, path, needed: int | None = None, hint: str = ""):
        super().__init__(errno.ENOSPC, message)
        self.message = message
        self.path = Path(path)
        self.needed = needed
        self.hint = hint

    def __str__(self) -> str:
        return self.message + (f"; {self.hint}" if self.hint else "")

    def __reduce__(self):
        return type(self), (self.message, self.path, self.needed, self.hint)


def is_disk_full(error: BaseException) -> bool:
    """Whether an error, or one it was raised from (zarr and asyncio wrap them), is a full disk."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in NO_SPACE:
            return True
        if isinstance(error, BaseExceptionGroup):
            return any(is_disk_full(inner) for inner in error.exceptions)
        error = error.__cause__ or error.__context__
    return False


def no_space(path, what: str, needed: int | None, up_to: bool = False) -> DiskFullError:
    """The one-line error for a write of `what` into directory `path` that found the disk full;
    `needed` is what the write needed (`up_to`: at most that, e.g. before compression)."""
    need = f": it needed {'up to ' if up_to else ''}{format_bytes(needed)} more" if needed else ""
    return DiskFullError(f"no space left on {path} for {what}{need}", path, needed)


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (a rename is durable only after this)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file and directory below root (root included)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


def temporary_sibling(path: Path, tag: str = "tmp") -> Path:
    """A unique name next to path, hidden, that never opens as the finished thing. It names the
    process that made it, so that `leftover_siblings` can tell one whose writer is gone."""
    path = Path(path)
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


# temporary_sibling's names: ".<name>.<tag>-<pid>-<8 hex digits>" (tags: tmp, old, spill, grow).
SIBLING_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<tag>[a-z]+)-(?P<pid>\d+)-[0-9a-f]{8}$")


def leftover_siblings(path: Path, tags=("tmp", "old"), this_process: bool = False) -> Iterator[tuple[str, Path]]:
    """(tag, entry) of the hidden siblings temporary_sibling made for `path` with one of `tags`
    whose process is gone (killed, or the machine restarted): what nothing will finish or remove.
    A sibling of a process still running is never listed; with `this_process`, this process's
    own are (ingest: a call interrupted earlier in this process, whose work a rerun continues)."""
    path = Path(path)
    try:
        entries = sorted(path.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        match = SIBLING_NAME.match(entry.name)
        if match and match["name"] == path.name and match["tag"] in tags:
            pid = int(match["pid"])
            if (this_process and pid == os.getpid()) or not (pid == os.getpid() or _running(pid)):
                yield match["tag"], entry


def _running(pid: int) -> bool:
    """Whether process `pid` runs: one killed but not yet waited for by its parent (a zombie: a
    `kill -9` whose caller has not reaped it, or a container without an init) never writes again."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def clear_leftovers(path: Path, log, what: str) -> None:
    """Before writing `path` (published whole with publish_dir): remove the temporaries that
    writers now gone left beside it, and put back a `path` that an interrupted replacement left
    only under its ".old-" name; each said to `log`. `what` names the command, for the notes."""
    path = Path(path)
    for tag, entry in leftover_siblings(path):
        if tag == "old" and not path.exists() and not path.is_symlink():
            os.replace(entry, path)
            log(f"note: put back {path}, left as {entry.name} by an interrupted {what}")
            continue
        shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() and not entry.is_symlink() else \
            entry.unlink(missing_ok=True)
        log(f"note: removed {entry.name}, left beside {path.name} by an interrupted {what}")


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write payload to path so that readers see either the old file or the whole new one."""
    path = Path(path)
    tmp = temporary_sibling(path)
    try:
        with open(tmp, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if is_disk_full(e):
            raise no_space(path.parent, path.name, len(payload)) from e
        raise


def publish_dir(tmp: Path, final: Path, overwrite: bool) -> None:
    """Move a finished directory tmp to final after flushing it to disk.

    With overwrite, an existing final is renamed aside first and deleted only after the new one
    is in place: a crash between the two renames leaves no directory under final, but the old
    one intact under its hidden ".old" name, and nothing half-written under final.
    """
    tmp, final = Path(tmp), Path(final)
    fsync_tree(tmp)
    old = None
    if final.exists():
        if not overwrite:
            raise FileExistsError(f"{final} already exists (use --overwrite to replace it)")
        old = temporary_sibling(final, "old")
        os.replace(final, old)
    try:
        os.replace(tmp, final)
    except BaseException:
        if old is not None:  # put the old one back rather than leave nothing under final
            os.replace(old, final)
        raise
    fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
