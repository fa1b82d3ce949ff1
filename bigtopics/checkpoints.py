"""Compressed, checksummed, crash-safe checkpoints of a training run.

A checkpoint is one file `<run>/checkpoints/step-<minibatches, 12 digits>.ckpt`, so the files
sort by step:

    magic (16 bytes) | manifest length (8 bytes, little endian) | manifest (JSON, UTF-8)
    | compressed array pieces ... | SHA-256 of everything before it (32 bytes)

The manifest holds the run's metadata (JSON) and, per array, its dtype, shape and the sizes of
its compressed pieces (Blosc/zstd with bit shuffle, 64 MiB of raw data a piece, since Blosc
takes at most 2 GB a call). A file is written under a temporary name, fsynced and renamed;
a truncated or corrupted file fails its checksum and is passed over for the previous one.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numcodecs import Blosc

from .atomic import fsync_dir, temporary_sibling

MAGIC = b"BIGTOPICS-CKPT\x00\x01"
PIECE_BYTES = 64 << 20
CHECKPOINT_DIR = "checkpoints"
_CODEC = Blosc(cname="zstd", clevel=3, shuffle=Blosc.BITSHUFFLE)


class CheckpointError(Exception):
    """A checkpoint file is damaged, or none could be read."""


@dataclass
class CheckpointInfo:
    path: Path
    step: int
    size: int


def checkpoint_dir(run_dir) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def remove_temporaries(run_dir) -> None:
    """Delete what an interrupted checkpoint write left behind (hidden temporary files)."""
    folder = checkpoint_dir(run_dir)
    if folder.is_dir():
        for leftover in folder.glob(".step-*.ckpt.tmp-*"):
            leftover.unlink(missing_ok=True)


def list_checkpoints(run_dir) -> list[CheckpointInfo]:
    """The checkpoints of a run, oldest first."""
    folder = checkpoint_dir(run_dir)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("step-*.ckpt")):
        try:
            out.append(CheckpointInfo(path, int(path.stem.split("-")[1]), path.stat().st_size))
        except (ValueError, OSError):
            continue
    return out


def _pieces(array: np.ndarray):
    flat = np.ascontiguousarray(array).reshape(-1)
    step = max(1, PIECE_BYTES // max(flat.itemsize, 1))
    for lo in range(0, max(len(flat), 1), step):
        yield flat[lo : lo + step]


def save_checkpoint(run_dir, step: int, meta: dict, arrays: dict[str, np.ndarray], keep: int = 3) -> Path:
    """Write a checkpoint for `step` and delete all but the newest `keep`.

    On any failure (a full disk, say) the partial file is removed and earlier checkpoints stay.
    """
    folder = checkpoint_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
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
    tmp = temporary_sibling(final)
    digest = hashlib.sha256()
    try:
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
        raise OSError(e.errno, f"writing checkpoint {final} failed ({e.strerror or e}); "
                               "the earlier checkpoints are intact") from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    for old in list_checkpoints(run_dir)[:-keep] if keep > 0 else []:
        old.path.unlink(missing_ok=True)
    return final


def read_checkpoint(path) -> tuple[dict, dict[str, np.ndarray]]:
    """(meta, arrays) of one checkpoint file; CheckpointError if it is damaged."""
    path = Path(path)
    try:
        payload = path.read_bytes()
    except OSError as e:
        raise CheckpointError(f"{path}: cannot be read ({e})") from e
    if len(payload) < len(MAGIC) + 8 + 32 or not payload.startswith(MAGIC):
        raise CheckpointError(f"{path}: not a bigtopics checkpoint, or truncated")
    body = memoryview(payload)[:-32]  # views, not copies: a checkpoint can be gigabytes
    if hashlib.sha256(body).digest() != payload[-32:]:
        raise CheckpointError(f"{path}: checksum mismatch (the file is truncated or corrupted)")
    (manifest_len,) = struct.unpack("<Q", body[len(MAGIC) : len(MAGIC) + 8])
    offset = len(MAGIC) + 8
    try:
        manifest = json.loads(bytes(body[offset : offset + manifest_len]))
        offset += manifest_len
        arrays = {}
        for entry in manifest["arrays"]:
            dtype = np.dtype(entry["dtype"])
            parts = []
            for size in entry["pieces"]:
                blob = body[offset : offset + size]
                offset += size
                parts.append(np.frombuffer(_CODEC.decode(blob), dtype=dtype) if size else np.zeros(0, dtype))
            arrays[entry["name"]] = np.concatenate(parts).reshape(entry["shape"])
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise CheckpointError(f"{path}: unreadable content despite a good checksum ({e})") from e
    return manifest["meta"], arrays


def read_checkpoint_meta(path) -> dict:
    """The metadata of a checkpoint, read from its manifest alone (no checksum verification)."""
    with open(path, "rb") as f:
        head = f.read(len(MAGIC) + 8)
        if len(head) < len(MAGIC) + 8 or not head.startswith(MAGIC):
            raise CheckpointError(f"{path}: not a bigtopics checkpoint, or truncated")
        (manifest_len,) = struct.unpack("<Q", head[len(MAGIC):])
        if manifest_len > os.fstat(f.fileno()).st_size:
            raise CheckpointError(f"{path}: damaged header")
        try:
            return json.loads(f.read(manifest_len))["meta"]
        except ValueError as e:
            raise CheckpointError(f"{path}: damaged manifest") from e


def load_latest_checkpoint(run_dir) -> tuple[dict, dict[str, np.ndarray], CheckpointInfo]:
    """The newest readable checkpoint; damaged newer ones are reported with a warning."""
    candidates = list_checkpoints(run_dir)
    if not candidates:
        raise CheckpointError(f"{run_dir} has no checkpoints to resume from")
    for info in reversed(candidates):
        try:
            meta, arrays = read_checkpoint(info.path)
            return meta, arrays, info
        except CheckpointError as e:
            # renamed out of the way, so retention never counts it as the newest checkpoint
            quarantined = info.path.with_name(info.path.name + ".damaged")
            os.replace(info.path, quarantined)
            warnings.warn(f"{e}; kept as {quarantined.name}; falling back to the previous checkpoint",
                          stacklevel=2)
    raise CheckpointError(f"none of the {len(candidates)} checkpoints in {checkpoint_dir(run_dir)} is readable")
