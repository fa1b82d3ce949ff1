"""Checkpoint files: round trip, retention, damage detection and fallback."""

import numpy as np
import pytest

from bigtopics import checkpoints
from bigtopics.checkpoints import (
    CheckpointError,
    list_checkpoints,
    load_latest_checkpoint,
    read_checkpoint,
    save_checkpoint,
)


def arrays(seed):
    rng = np.random.default_rng(seed)
    return {"values": rng.random(5000), "topics": rng.integers(0, 100, 5000).astype(np.int32),
            "empty": np.zeros(0, np.int64), "matrix": rng.random((3, 4))}


def test_round_trip_is_exact(tmp_path):
    path = save_checkpoint(tmp_path, 7, {"step": 7, "pi": 0.25}, arrays(0))
    assert path.name == "step-000000000007.ckpt"
    meta, got = read_checkpoint(path)
    assert meta == {"step": 7, "pi": 0.25}
    for name, value in arrays(0).items():
        assert got[name].dtype == value.dtype
        np.testing.assert_array_equal(got[name], value)


def test_large_arrays_are_split_into_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "PIECE_BYTES", 1000)
    meta, got = read_checkpoint(save_checkpoint(tmp_path, 1, {}, arrays(1)))
    np.testing.assert_array_equal(got["values"], arrays(1)["values"])


def test_only_the_newest_are_kept_and_they_sort_by_step(tmp_path):
    for step in (5, 100, 20, 3000):
        save_checkpoint(tmp_path, step, {"step": step}, arrays(step), keep=2)
    assert [c.step for c in list_checkpoints(tmp_path)] == [100, 3000]


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_newest_checkpoint_falls_back_with_a_warning(tmp_path, damage):
    save_checkpoint(tmp_path, 1, {"step": 1}, arrays(1))
    newest = save_checkpoint(tmp_path, 2, {"step": 2}, arrays(2))
    payload = bytearray(newest.read_bytes())
    if damage == "truncate":
        payload = payload[: len(payload) // 2]
    else:
        payload[len(payload) // 2] ^= 0xFF
    newest.write_bytes(bytes(payload))
    with pytest.raises(CheckpointError, match="checksum|truncated"):
        read_checkpoint(newest)
    with pytest.warns(UserWarning, match="falling back"):
        meta, got, info = load_latest_checkpoint(tmp_path)
    assert meta["step"] == 1 and info.step == 1
    np.testing.assert_array_equal(got["values"], arrays(1)["values"])
    # the damaged file is kept aside, so retention never mistakes it for the newest checkpoint
    assert (tmp_path / "checkpoints" / "step-000000000002.ckpt.damaged").exists()
    save_checkpoint(tmp_path, 3, {"step": 3}, arrays(3), keep=1)
    assert [c.step for c in list_checkpoints(tmp_path)] == [3]


def test_no_readable_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoints"):
        load_latest_checkpoint(tmp_path)
    save_checkpoint(tmp_path, 1, {}, arrays(0)).write_bytes(b"garbage")
    with pytest.warns(UserWarning), pytest.raises(CheckpointError, match="none of the 1"):
        load_latest_checkpoint(tmp_path)


def test_a_failed_write_leaves_earlier_checkpoints_and_no_partial_file(tmp_path, monkeypatch):
    save_checkpoint(tmp_path, 1, {"step": 1}, arrays(1))

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoints.os, "fsync", full_disk)
    with pytest.raises(OSError, match="writing checkpoint .* failed .*No space.* earlier checkpoints are intact"):
        save_checkpoint(tmp_path, 2, {"step": 2}, arrays(2))
    monkeypatch.undo()
    assert [c.step for c in list_checkpoints(tmp_path)] == [1]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-000000000001.ckpt"]
