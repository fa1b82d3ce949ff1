"""The contract of a location (locations.Location, outputs.NewGroup), one case per kind: a path, a file://
URL, memory:// and s3:// on a real S3 server (moto, tests/s3server.py). On each, nothing is there
at first; a new group is not taken for finished until it is published; once published its
attributes read back and its bytes count; --overwrite is needed to replace it; and it can be
deleted. The same writing code runs on every kind."""

import uuid

import numpy as np
import pytest
import zarr
from s3server import s3_fixture, s3_server_fixture  # noqa: F401 (the fixtures `s3` and `s3_server`)

from bigtopics.locations import locate
from bigtopics.outputs import UNFINISHED, NewGroup, check_output

KINDS = ["path", "file", "memory", "s3"]
FINAL = {"format_version": 1, "created_by": "bigtopics", "written_by": "test_locations"}  # a store's marks


@pytest.fixture(params=KINDS)
def where(request, tmp_path):
    """A location of the kind where nothing is yet."""
    name = f"group-{uuid.uuid4().hex[:8]}.zarr"
    if request.param == "path":
        return str(tmp_path / name)
    if request.param == "file":
        return f"file://{tmp_path / name}"
    if request.param == "memory":
        pytest.importorskip("fsspec")
        return f"memory://bigtopics-test/{name}"
    return request.getfixturevalue("s3").url(name)


def _write(where, overwrite=False) -> NewGroup:
    group = NewGroup(where, overwrite=overwrite, kind="store")
    with group.errors():
        group.group.create_array("values", data=np.arange(1000, dtype=np.int64))
    return group


def test_nothing_is_there_at_first(where):
    assert locate(where).inspect() == (None, False)


def test_a_new_group_is_not_finished_until_published(where):
    group = _write(where)
    attributes, occupied = locate(where).inspect()
    assert attributes is None or attributes == UNFINISHED  # (a path: built under a temporary name)
    group.publish(FINAL)
    attributes, occupied = locate(where).inspect()
    assert attributes == FINAL and occupied
    assert locate(where).stored_bytes() > 0
    assert locate(where).stored_bytes("values") > 0


def test_a_published_group_is_replaced_only_with_overwrite(where):
    _write(where).publish(FINAL)
    with pytest.raises(FileExistsError, match="--overwrite"):
        _write(where)
    _write(where, overwrite=True).publish({**FINAL, "written_by": "again"})
    assert locate(where).inspect()[0]["written_by"] == "again"


def test_an_aborted_group_leaves_nothing(where):
    _write(where).abort()
    assert locate(where).inspect() == (None, False)


def test_delete_removes_everything(where):
    _write(where).publish(FINAL)
    location = locate(where)
    location.delete()
    assert location.inspect() == (None, False)


def test_a_group_bigtopics_did_not_write_is_never_replaced(where):
    location = locate(where)
    zarr.open_group(location.zarr_store(read_only=False), mode="w", attributes={"format_version": 1})
    with pytest.raises(FileExistsError, match="not bigtopics"):
        check_output(location, overwrite=True, kind="store")
    assert location.inspect()[0] == {"format_version": 1}
