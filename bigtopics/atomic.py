"""Crash-safe file and directory writes: temporary name, fsync, rename.

Finished work (a store, a model, a checkpoint) is only ever visible under its final name once it
is complete and on disk; an interrupted write leaves at most a temporary name behind.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path


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
    """A unique name next to path, hidden, that never opens as the finished thing."""
    path = Path(path)
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


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
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


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
    os.replace(tmp, final)
    fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
