"""Compressed, checksummed, crash-safe checkpoints of a training run.

A checkpoint is one file `<run>/checkpoints/step-<minibatches, 12 digits>.ckpt`, so the files
sort by step:

    magic (16 bytes) | manifest length (8 bytes, little endian) | manifest (JSON, UTF-8)
    | compressed array pieces ... | SHA-256 of everything before it (32 bytes)

The manifest holds the run's metadata (JSON) and, per array, its dtype, shape and the sizes of
its compressed pieces (Blosc/zstd with bit shuffle, 64 MiB of raw data a piece, since Blosc
takes at most 2 GB a call). A file is written under a temporary name, fsynced and renamed;
a full disk is a DiskFullError and leaves the earlier checkpoints as they were.

Reading checks the file before allocating anything from it and reads it piece by piece, never
whole (read_checkpoint): a truncated or corrupted file, one whose manifest and pieces do not add
up, or a path that is not a regular file (a FIFO, a device such as /dev/zero) is
CheckpointDamaged, set aside as `*.damaged` and passed over for the previous one; a file that
cannot be read now (a permission, an I/O error) is a CheckpointError and nothing is set aside. The SHA-256 detects
damage, not tampering: anyone who can write the file can write its hash.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Union

import numpy as np
from numcodecs import Blosc

from .atomic import DiskFullError, fsync_dir, is_disk_full, temporary_sibling
from .memory import available_bytes, format_bytes

MAGIC = b"BIGTOPICS-CKPT\x00\x01"
PIECE_BYTES = 64 << 20
CHECKPOINT_DIR = "checkpoints"
_CODEC = Blosc(cname="zstd", clevel=3, shuffle=Blosc.BITSHUFFLE)
_NAME = re.compile(r"step-(\d+)\.ckpt")
_DAMAGED = re.compile(r"step-\d+\.ckpt\.damaged")


class CheckpointError(Exception):
    """A checkpoint file is damaged, cannot be read now, or none could be read."""


class CheckpointDamaged(CheckpointError):
    """A checkpoint whose bytes are wrong: truncated, failing its checksum, or not of the format
    (a manifest or piece sizes that do not add up, a size beyond the reader's limits). Only these
    are set aside as `*.damaged`; a file that merely cannot be read now is left as it is."""


@dataclass
class CheckpointInfo:
    path: Path
    step: int
    size: int


# Where a run resumes from when it was stopped before it wrote its first checkpoint.
START_OF_RUN = CheckpointInfo(Path("the start, as no checkpoint had been written"), 0, 0)

# A limit on an array's elements: a number, or a function of the arrays read before it.
Limit = Union[int, Callable[[dict], int]]


def checkpoint_dir(run_dir) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def remove_temporaries(run_dir) -> None:
    """Delete what an interrupted checkpoint write left behind (hidden temporary files)."""
    folder = checkpoint_dir(run_dir)
    if folder.is_dir():
        for leftover in folder.glob(".step-*.ckpt.tmp-*"):
            leftover.unlink(missing_ok=True)


def _names(run_dir, strict: bool) -> list[str]:
    """The file names in the run's checkpoint folder (none if it does not exist). A folder that
    cannot be listed is a CheckpointError with `strict`, else as good as empty."""
    folder = checkpoint_dir(run_dir)
    try:
        return sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    except OSError as e:
        if strict:
            raise CheckpointError(f"the checkpoints in {folder} cannot be listed ({e.strerror or e})") from e
        return []


def list_checkpoints(run_dir, strict: bool = False) -> list[CheckpointInfo]:
    """The checkpoints of a run, oldest first. With `strict`, a folder or file that cannot be
    examined now (permissions, an I/O error) is a CheckpointError rather than passed over."""
    folder = checkpoint_dir(run_dir)
    out = []
    for name in _names(run_dir, strict):
        match = _NAME.fullmatch(name)
        if not match:
            continue
        path = folder / name
        try:
            out.append(CheckpointInfo(path, int(match.group(1)), path.stat().st_size))
        except FileNotFoundError:
            continue
        except OSError as e:
            if strict:
                raise CheckpointError(f"{path} cannot be examined ({e.strerror or e})") from e
    return sorted(out, key=lambda info: info.step)


def never_checkpointed(run_dir) -> bool:
    """Whether a run has no checkpoint at all, not even one set aside as damaged: it was stopped
    before it wrote its first. A folder that cannot be listed now is a CheckpointError, never
    taken for an empty one."""
    try:
        names = _names(run_dir, strict=True)
    except CheckpointError as e:
        raise _left_as_they_are(e, run_dir) from e.__cause__
    return not any(_NAME.fullmatch(name) or _DAMAGED.fullmatch(name) for name in names)


def list_damaged(run_dir) -> list[Path]:
    """The checkpoints set aside as damaged (`*.ckpt.damaged`)."""
    folder = checkpoint_dir(run_dir)
    return [folder / name for name in _names(run_dir, strict=False) if _DAMAGED.fullmatch(name)]


def _pieces(array: np.ndarray):
    flat = np.ascontiguousarray(array).reshape(-1)
    step = max(1, PIECE_BYTES // max(flat.itemsize, 1))
    for lo in range(0, max(len(flat), 1), step):
        yield flat[lo : lo + step]


def save_checkpoint(run_dir, step: int, meta: dict, arrays: dict[str, np.ndarray], keep: int = 3) -> Path:
    """Write a checkpoint for `step` and delete all but the newest `keep`.

    On any failure the partial file is removed and earlier checkpoints stay; a full disk is a
    DiskFullError naming the folder and the checkpoint's size.
    """
    folder = checkpoint_dir(run_dir)
    final = folder / f"step-{step:012d}.ckpt"
    blobs, manifest_arrays = [], []
    for name, array in arrays.items():
        array = np.asarray(array)
        sizes = []
        for piece in _pieces(array):
            blob = _CODEC.encode(piece) if piece.nbytes else b""
            blobs.append(blob)
            sizes.append(len(blob))
        manifest_arrays.append({"name": name, "dtype": array.dtype.str, "shape": list(array.shape), "pieces": sizes})
    manifest = json.dumps({"meta": meta, "arrays": manifest_arrays}).encode()
    size = len(MAGIC) + 8 + len(manifest) + sum(len(b) for b in blobs) + 32
    tmp = temporary_sibling(final)
    digest = hashlib.sha256()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            for part in (MAGIC, struct.pack("<Q", len(manifest)), manifest, *blobs):
                f.write(part)
                digest.update(part)
            f.write(digest.digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        fsync_dir(folder)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        if is_disk_full(e):
            raise DiskFullError(f"writing checkpoint {final} failed (No space left on {folder}: it needed "
                                f"{format_bytes(size)} more); the earlier checkpoints are intact", folder, size) from e
        raise OSError(e.errno, f"writing checkpoint {final} failed ({e.strerror or e}); "
                               "the earlier checkpoints are intact") from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    for old in list_checkpoints(run_dir)[:-keep] if keep > 0 else []:
        old.path.unlink(missing_ok=True)
    return final


# What a path that is not a regular file is, for the one line that refuses it.
_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
HASH_CHUNK_BYTES = 8 << 20  # the checksum is computed over the file this much at a time
MAX_MANIFEST_BYTES = 64 << 20  # a real manifest is kilobytes: a few numbers per array and the run's metadata
# Blosc's largest compressed frame of PIECE_BYTES (its header and a stored-uncompressed block's
# overhead): a piece declared larger is refused before it is read.
MAX_PIECE_OVERHEAD = 4096


def open_regular_file(path: Path):
    """`path` opened for binary reading if it is a regular file (a symlink is followed).
    CheckpointDamaged naming what it is otherwise: a FIFO would block a read forever and a device
    such as /dev/zero never ends, so neither is ever read. CheckpointError if it cannot be opened."""
    try:
        # O_NONBLOCK: a FIFO swapped in after a check must not block the open; fstat then refuses it
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise CheckpointError(f"{path} cannot be read ({e.strerror or e})") from e
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")
            target = f" ({path} -> {os.path.realpath(path)})" if os.path.islink(path) else ""
            raise CheckpointDamaged(f"{path}: {kind}{target}, not a checkpoint file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_exactly(f, n: int, path: Path) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise CheckpointDamaged(f"{path}: truncated while it was read (it changed under the reader)")
    return data


def _blosc_sizes(blob) -> tuple[int, int]:
    """(decompressed, compressed) bytes a Blosc frame declares in its 16-byte header."""
    if len(blob) < 16:
        raise ValueError("a piece shorter than a Blosc header")
    _version, _, _, _typesize, nbytes, _blocksize, cbytes = struct.unpack("<BBBBIII", bytes(blob[:16]))
    return nbytes, cbytes


def _manifest_arrays(manifest, data_bytes: int, piece_bytes: int) -> list[tuple[str, np.dtype, tuple, list[int]]]:
    """The arrays a manifest declares, checked: names, numeric dtypes, shapes and pieces whose
    sizes add up to the bytes that follow the manifest."""
    if not (isinstance(manifest, dict) and isinstance(manifest.get("meta"), dict)
            and isinstance(manifest.get("arrays"), list)):
        raise ValueError("a manifest without meta and arrays")
    out, total = [], 0
    for entry in manifest["arrays"]:
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("dtype"), str)
                and isinstance(entry.get("shape"), list) and isinstance(entry.get("pieces"), list)):
            raise ValueError("an array entry without name, dtype, shape and pieces")
        name = entry["name"]
        dtype = np.dtype(entry["dtype"])
        if dtype.kind not in "biuf" or dtype.itemsize > 16:
            raise ValueError(f"array {name} of dtype {dtype}")
        shape, pieces = entry["shape"], entry["pieces"]
        if not all(type(n) is int and n >= 0 for n in shape + pieces):
            raise ValueError(f"array {name}: shape or piece sizes that are not sizes")
        if len(pieces) != max(1, -(-math.prod(shape) // max(1, piece_bytes // dtype.itemsize))):
            raise ValueError(f"array {name}: {len(pieces)} pieces for shape {shape}")
        if any(size > max(piece_bytes, dtype.itemsize) + MAX_PIECE_OVERHEAD for size in pieces):
            raise ValueError(f"array {name}: a piece of {max(pieces):,} bytes, larger than a piece can be")
        total += sum(pieces)
        out.append((name, dtype, tuple(shape), pieces))
    if total != data_bytes:
        raise ValueError(f"the pieces declare {total} bytes, the file holds {data_bytes} (truncated or damaged)")
    if len({name for name, *_ in out}) != len(out):
        raise ValueError("an array declared twice")
    return out


def _array_limit(name: str, n: int, limits: dict[str, Limit], arrays: dict) -> str | None:
    """Why an array `name` of `n` elements cannot be this run's (limits), or None."""
    limit = limits.get(name)
    if limit is None:
        return f"an unexpected array {name}"
    try:
        most = int(limit(arrays) if callable(limit) else limit)
    except (ValueError, TypeError, IndexError, KeyError, OverflowError) as e:
        return f"array {name} cannot be sized ({e})"
    return f"array {name} declares {n:,} elements, at most {most:,} fit this run" if n > most else None


def read_checkpoint(path, limits: dict[str, Limit] | None = None) -> tuple[dict, dict[str, np.ndarray]]:
    """(meta, arrays) of one checkpoint file.

    The file is read piece by piece, and every size it declares is checked before it is read or
    allocated: it must be a regular file (never a FIFO or a device); its header, then its
    manifest (at most MAX_MANIFEST_BYTES; its arrays' dtypes, shapes and pieces adding up to the
    file's size), the arrays together against the memory available; then the checksum, computed
    over the file a chunk at a time; then each array's size against `limits` (array name -> most
    elements, or a function of the arrays read before it; with limits, an array not named in them
    is refused) and each piece's Blosc header against the bytes its place in the array holds; a
    piece is then read and decompressed into its place and nowhere else. CheckpointDamaged if the
    bytes are wrong, CheckpointError if the file cannot be read now.
    """
    path = Path(path)
    try:
        with open_regular_file(path) as f:
            return _read_open_checkpoint(f, path, limits)
    except OSError as e:
        raise CheckpointError(f"{path} cannot be read ({e.strerror or e})") from e


def _read_open_checkpoint(f, path: Path, limits) -> tuple[dict, dict[str, np.ndarray]]:
    size = os.fstat(f.fileno()).st_size
    head = f.read(len(MAGIC) + 8)
    if size < len(MAGIC) + 8 + 32 or len(head) < len(MAGIC) + 8 or not head.startswith(MAGIC):
        raise CheckpointDamaged(f"{path}: not a bigtopics checkpoint, or truncated")
    (manifest_len,) = struct.unpack("<Q", head[len(MAGIC):])
    offset = len(MAGIC) + 8
    if manifest_len > min(size - offset - 32, MAX_MANIFEST_BYTES):
        raise CheckpointDamaged(f"{path}: damaged header (a manifest of {manifest_len:,} bytes in a file of "
                                f"{size:,}; at most {MAX_MANIFEST_BYTES:,})")
    try:
        manifest = json.loads(_read_exactly(f, manifest_len, path))
        offset += manifest_len
        declared = _manifest_arrays(manifest, size - 32 - offset, PIECE_BYTES)
    except (ValueError, TypeError, RecursionError) as e:
        raise CheckpointDamaged(f"{path}: not a checkpoint of this format ({e})") from None
    needed = sum(math.prod(shape) * dtype.itemsize for _, dtype, shape, _ in declared)
    if needed > available_bytes():
        raise CheckpointError(f"{path}: its arrays take {format_bytes(needed)}, more memory than is available "
                              f"({format_bytes(available_bytes())})")
    _verify_checksum(f, path, size)
    arrays: dict[str, np.ndarray] = {}
    for name, dtype, shape, pieces in declared:
        n = math.prod(shape)
        problem = _array_limit(name, n, limits, arrays) if limits is not None else None
        if problem is None:
            problem = _check_pieces(f, offset, pieces, n * dtype.itemsize, dtype.itemsize)
        if problem:
            raise CheckpointDamaged(f"{path}: {problem}")
        if n * dtype.itemsize > available_bytes():
            raise CheckpointError(f"{path}: array {name} takes {format_bytes(n * dtype.itemsize)}, more memory than "
                                  f"is available ({format_bytes(available_bytes())})")
        out = np.empty(n, dtype)
        raw = out.view(np.uint8)
        at = 0
        f.seek(offset)
        for piece_size in pieces:
            if piece_size:
                blob = _read_exactly(f, piece_size, path)
                nbytes, _ = _blosc_sizes(blob)
                try:
                    _CODEC.decode(blob, out=raw[at : at + nbytes])
                except (ValueError, RuntimeError, TypeError) as e:
                    raise CheckpointDamaged(f"{path}: array {name} does not decompress ({e})") from None
                at += nbytes
            offset += piece_size
        arrays[name] = out.reshape(shape)
    return manifest["meta"], arrays


def _verify_checksum(f, path: Path, size: int) -> None:
    """CheckpointDamaged unless the file's last 32 bytes are the SHA-256 of the rest (read in chunks)."""
    digest = hashlib.sha256()
    f.seek(0)
    left = size - 32
    while left:
        chunk = _read_exactly(f, min(left, HASH_CHUNK_BYTES), path)
        digest.update(chunk)
        left -= len(chunk)
    if digest.digest() != _read_exactly(f, 32, path):
        raise CheckpointDamaged(f"{path}: checksum mismatch (the file is truncated or corrupted)")


def _check_pieces(f, offset: int, pieces: list[int], nbytes: int, itemsize: int) -> str | None:
    """Why the pieces at `offset` of the open file cannot be `nbytes` of an array, or None: every
    piece a Blosc frame of its declared compressed size, decompressing to whole elements, at most
    PIECE_BYTES, and together to exactly the array. Reads the pieces' 16-byte headers only."""
    total = 0
    for size in pieces:
        if size == 0:
            continue
        f.seek(offset)
        try:
            raw, compressed = _blosc_sizes(f.read(min(size, 16)))
        except ValueError as e:
            return str(e)
        if compressed != size:
            return f"a piece of {size:,} bytes whose header says {compressed:,}"
        if raw % itemsize or raw > max(PIECE_BYTES, itemsize) or raw == 0:
            return (f"a piece that declares {raw:,} bytes decompressed (whole {itemsize}-byte elements, at most "
                    f"{PIECE_BYTES:,})")
        total += raw
        offset += size
    if total != nbytes:
        return f"pieces that decompress to {total:,} bytes for an array of {nbytes:,}"
    return None


def read_checkpoint_meta(path) -> dict:
    """The metadata of a checkpoint, read from its manifest alone (no checksum verification)."""
    path = Path(path)
    try:
        with open_regular_file(path) as f:
            head = f.read(len(MAGIC) + 8)
            if len(head) < len(MAGIC) + 8 or not head.startswith(MAGIC):
                raise CheckpointDamaged(f"{path}: not a bigtopics checkpoint, or truncated")
            (manifest_len,) = struct.unpack("<Q", head[len(MAGIC):])
            if manifest_len > min(os.fstat(f.fileno()).st_size, MAX_MANIFEST_BYTES):
                raise CheckpointDamaged(f"{path}: damaged header")
            try:
                meta = json.loads(f.read(manifest_len))["meta"]
            except (ValueError, KeyError, TypeError) as e:
                raise CheckpointDamaged(f"{path}: damaged manifest") from e
    except OSError as e:
        raise CheckpointError(f"{path} cannot be read ({e.strerror or e})") from e
    if not isinstance(meta, dict):
        raise CheckpointDamaged(f"{path}: damaged manifest")
    return meta


def load_latest_checkpoint(run_dir, limits: dict[str, Limit] | None = None,
                           check: Callable[[dict, dict], None] | None = None
                           ) -> tuple[dict, dict[str, np.ndarray], CheckpointInfo]:
    """The newest good checkpoint (read with `limits`, see read_checkpoint, then given to
    `check(meta, arrays)`, which raises ValueError if they cannot be this run's).

    A newer checkpoint whose bytes are wrong is renamed `*.damaged` with a warning and the one
    before it tried. A checkpoint that cannot be read now (permissions, an I/O error: it may pass)
    stops the search with a CheckpointError and every file left as it is.
    """
    try:
        candidates = list_checkpoints(run_dir, strict=True)
    except CheckpointError as e:
        raise _left_as_they_are(e, run_dir) from e.__cause__
    if not candidates:
        raise CheckpointError(f"{run_dir} has no checkpoints to resume from")
    for i in range(len(candidates) - 1, -1, -1):
        info = candidates[i]
        try:
            meta, arrays = read_checkpoint(info.path, limits)
            if check is not None:
                try:
                    check(meta, arrays)
                except (ValueError, KeyError, TypeError) as e:
                    raise CheckpointDamaged(f"{info.path}: {e}") from None
            return meta, arrays, info
        except CheckpointDamaged as e:
            # renamed out of the way, so retention never counts it as the newest checkpoint
            quarantined = info.path.with_name(info.path.name + ".damaged")
            os.replace(info.path, quarantined)
            fallback = (f"falling back to the previous checkpoint, {candidates[i - 1].path.name}" if i
                        else "there is no earlier checkpoint")
            warnings.warn(f"{e}; kept as {quarantined.name}; {fallback}", stacklevel=2)
        except CheckpointError as e:
            raise _left_as_they_are(e, run_dir) from e.__cause__
    folder = checkpoint_dir(run_dir)
    raise CheckpointError(
        f"none of the {len(candidates)} checkpoints in {folder} is readable (set aside as *.damaged); to train "
        f"{run_dir} again from the start, remove them and resume: rm {folder}/*.damaged && "
        f"bigtopics train --resume {run_dir}")


def _left_as_they_are(error: CheckpointError, run_dir) -> CheckpointError:
    """A read error that may pass: say that nothing was set aside, and how to go on."""
    return CheckpointError(f"{error}; the checkpoints are left as they are: once that is fixed, resume again with "
                           f"bigtopics train --resume {run_dir}")
