"""Ingest at library scale (issue 24), whole files: --skip-bad skips a file or folder that cannot be
read (or not to the end), names it and counts it, in the summary and the store's settings;
symbolic links to folders are followed once; NUL bytes anywhere are caught; file lists."""

import bz2
import gzip
import lzma
import os
from pathlib import Path

import pytest
from test_ingest import store_docs

from bigtopics import open_store
from bigtopics.ingest import Pruning, ingest, inputs, listing
from bigtopics.ingest.inputs import InputReader
from bigtopics.input_formats import FormatOptions, InputError

NO_PRUNING = Pruning(min_df=1, max_df=1.0, max_vocab=None)
SKIP_BAD = FormatOptions(skip_bad=True)
LINES = b"".join(b'{"id": "n%d", "text": "whale ship number%s"}\n' % (i, b"x" * (i % 7)) for i in range(6000))


def run(inputs, out, **kw):
    kw.setdefault("pruning", NO_PRUNING)
    return ingest(inputs, out, quiet=True, workers=1, log=lambda m: None, **kw)


def test_truncated_compressed_files_keep_the_documents_before_the_damage(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "good.txt").write_text("whale ship")
    (tmp_path / "in" / "cut.jsonl.gz").write_bytes(gzip.compress(LINES)[:-400])
    (tmp_path / "in" / "cut.jsonl.xz").write_bytes(lzma.compress(LINES)[:-400])
    (tmp_path / "in" / "cut.jsonl.bz2").write_bytes(bz2.compress(LINES)[:-400])  # one bzip2 block: nothing decodes
    (tmp_path / "in" / "cut.txt.gz").write_bytes(gzip.compress(LINES)[:-400])  # one document: nothing kept
    with pytest.raises(InputError, match=r"cut.jsonl.bz2: cannot be read to the end.*use --skip-bad"):
        run(tmp_path / "in", tmp_path / "s.zarr")
    assert not (tmp_path / "s.zarr").exists() and not list(tmp_path.glob(".s.zarr*"))

    report = run(tmp_path / "in", tmp_path / "s.zarr", formats=SKIP_BAD, unit_bytes=1 << 16)
    docs = store_docs(tmp_path / "s.zarr")
    kept_gz = [d for d in docs if d.startswith("n")]  # from three files, under the same ids
    assert "good.txt" in docs and 1000 < len(kept_gz) < 6000 and "n0" in kept_gz
    assert all(docs[d] == {"whale": 1, "ship": 1, f"number{'x' * (int(d[1:]) % 7)}": 1} for d in kept_gz)
    skipped = open_store(tmp_path / "s.zarr").settings["skipped"]
    assert [s["name"] for s in skipped] == ["cut.jsonl.bz2", "cut.jsonl.gz", "cut.jsonl.xz", "cut.txt.gz"]
    assert all("documents before the damage are kept" in s["reason"] for s in skipped[1:3])  # gz, xz
    assert "nothing of it is kept" in skipped[3]["reason"] and "cut.txt.gz" not in docs
    assert "skipped 4 files or folders that could not be read whole: cut.jsonl.bz2" in report.summary()


def test_unreadable_and_vanished_files_are_skipped_and_named(tmp_path, monkeypatch):
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text(f"whale {name[0]}ship")
    real_open = inputs.open_decompressed

    def open_decompressed(path):  # (tests run as root, whom file permissions do not stop)
        if path.name == "b.txt":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path)

    monkeypatch.setattr(inputs, "open_decompressed", open_decompressed)
    with pytest.raises(InputError, match="b.txt: cannot be read .Permission denied. .use --skip-bad"):
        run(tmp_path, tmp_path / "s.zarr")
    report = run(tmp_path, tmp_path / "s.zarr", formats=SKIP_BAD)
    assert set(store_docs(tmp_path / "s.zarr")) == {"a.txt", "c.txt"}
    assert report.bad_files == [("b.txt", "cannot be read (Permission denied)")]

    monkeypatch.setattr(inputs, "open_decompressed", real_open)
    reader = InputReader([tmp_path / "a.txt", tmp_path / "c.txt"], SKIP_BAD, unit_bytes=1 << 20,
                         warn=lambda m: None)
    (tmp_path / "c.txt").unlink()  # between the listing and the reading
    assert [u.path for u in reader.units()] == ["a.txt"]
    assert reader.bad_files == [("c.txt", "cannot be read (No such file or directory)")]


def test_unreadable_folders_are_reported_and_linked_folders_read_once(tmp_path, monkeypatch):
    root = tmp_path / "in"
    for folder in ("books", "locked", "more"):
        (root / folder).mkdir(parents=True)
        (root / folder / "a.txt").write_text(f"whale {folder}")
    (root / "more" / "up").symlink_to(root)  # a loop
    (root / "zz-alias").symlink_to(root / "books")  # the same folder again
    (root / "gone").symlink_to(tmp_path / "nowhere")  # broken
    real_scandir = os.scandir

    def scandir(path):
        if isinstance(path, (str, os.PathLike)) and Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(listing.os, "scandir", scandir)
    with pytest.raises(InputError, match="gone: a broken symbolic link .use --skip-bad"):
        run(root, tmp_path / "s.zarr")
    report = run(root, tmp_path / "s.zarr", formats=SKIP_BAD)
    assert set(store_docs(tmp_path / "s.zarr")) == {"books/a.txt", "more/a.txt"}
    assert report.bad_files == [("gone", "a broken symbolic link"),
                                ("locked", "a folder that cannot be read (Permission denied)")]
    assert [name for name, _ in report.notes] == ["more/up", "zz-alias"]
    settings = open_store(tmp_path / "s.zarr").settings
    assert [s["name"] for s in settings["skipped"]] == ["gone", "locked"]
    assert [s["name"] for s in settings["read_once"]] == ["more/up", "zz-alias"]


def test_nul_bytes_past_the_first_8_kib_are_caught(tmp_path):
    (tmp_path / "ok.txt").write_text("whale")
    (tmp_path / "late.txt").write_bytes(b"whale ship " * 2000 + b"\0\x01\x02 ship")
    (tmp_path / "late.jsonl").write_bytes(LINES[:LINES.index(b"\n", 12000) + 1] + b'{"id": "bad", "text": "whale\0"}\n')
    with pytest.raises(InputError, match=r"late.jsonl:\d+: a NUL byte"):
        run(tmp_path, tmp_path / "s.zarr")
    report = run(tmp_path, tmp_path / "s.zarr", formats=SKIP_BAD)
    docs = store_docs(tmp_path / "s.zarr")
    assert "late.txt" not in docs and "bad" not in docs and "ok.txt" in docs
    assert report.stats["binary_files_skipped"] == 1 and report.stats["bad_lines_skipped"] == 1


def test_a_file_list_names_documents_by_their_listed_paths(tmp_path, monkeypatch):
    for folder in ("x", "y"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "same.txt").write_text(f"whale {folder}ship")
    (tmp_path / "list.txt").write_text("x/same.txt\n\ny/same.txt\n")
    monkeypatch.chdir(tmp_path)
    run([], tmp_path / "s.zarr", files_from="list.txt")
    assert store_docs(tmp_path / "s.zarr") == {"x/same.txt": {"whale": 1, "xship": 1},
                                               "y/same.txt": {"whale": 1, "yship": 1}}
    assert open_store(tmp_path / "s.zarr").settings["files_from"] == "list.txt"
    with pytest.raises(InputError, match="either input paths or --files-from"):
        run([tmp_path / "x"], tmp_path / "t.zarr", files_from="list.txt")


def test_small_files_share_work_units_and_keep_their_ids(tmp_path):
    names = [f"{i // 100:02d}/{i % 100 // 10}/doc-{i}.txt" for i in range(300)]
    for i, name in enumerate(names):
        (tmp_path / "in" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "in" / name).write_text(f"whale w{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}x")
    units = list(InputReader([tmp_path / "in"], FormatOptions(), unit_bytes=1 << 10).units())
    assert 1 < len(units) < 30 and [f for u in units for f, _, _ in u.files] == sorted(names)
    run(tmp_path / "in", tmp_path / "s.zarr")
    assert list(open_store(tmp_path / "s.zarr").doc_ids()) == sorted(names)
