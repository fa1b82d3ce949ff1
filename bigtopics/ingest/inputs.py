"""Input files -> work units -> records (one per source document).

The main process walks the inputs, decompresses them (gzip, bzip2 and xz are recognized by their
magic bytes, whatever the file is called) and cuts them into `Unit`s of a few MB of whole lines
(or one whole file for `txt`). Workers turn a unit into `Record`s with `parse_unit`.

Formats: `txt` is one document per file (its id the path relative to the input root); the
formats of one document a line each parse a line in their own module (input_formats/).
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import lzma
import os
import shutil
import sys
import tempfile
import unicodedata
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np

from ..input_formats import LINE_FORMATS, FormatOptions, InputError, Record
from ..memory import format_bytes
from .listing import input_files, overlapping_inputs, read_file_list

EXTENSION_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".tsv": "tsv"}
COMPRESSION_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz"}
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz")
BINARY_SNIFF_BYTES = 8192
READ_BLOCK_BYTES = 1 << 20
# A text file of a line format is binary only if this share of its first bytes is not text: binary
# files have over half, Latin-1 text read as UTF-8 under a fifth; one bad line has a few bytes.
BINARY_ODD_SHARE = 0.3
DECOMPRESSION_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error)


@dataclass
class Unit:
    """A piece of input a worker tokenizes on its own: whole lines of one file, or whole `txt`
    files (as many as make about a unit's bytes: a million small files are not a million units)."""

    seq: int
    path: str  # as shown in errors and ids: relative to the input root (txt: the first file's)
    format: str
    data: bytes
    first_line: int  # line number of data's first line (1-based)
    files: list[tuple[str, int, int]] | None = None  # txt: (name, start, stop) of each file in data


def compression_of(path: Path) -> str | None:
    with open(path, "rb") as f:
        head = f.read(6)
    return next((name for magic, name in COMPRESSION_MAGIC.items() if head.startswith(magic)), None)


def open_decompressed(path: Path) -> tuple[BinaryIO, BinaryIO]:
    """(decompressed stream, underlying file) for path; compression detected by magic bytes."""
    raw = open(path, "rb")
    kind = compression_of(path)
    opener = {"gzip": lambda f: gzip.GzipFile(fileobj=f), "bz2": bz2.BZ2File, "xz": lzma.LZMAFile}.get(kind)
    return (opener(raw) if opener else raw), raw


def format_of(path: Path, requested: str | None) -> str:
    if requested:
        return requested
    name = path.name
    for suffix in COMPRESSION_SUFFIXES:
        name = name.removesuffix(suffix)
    return EXTENSION_FORMATS.get(os.path.splitext(name)[1].lower(), "txt")


def looks_binary(head: bytes) -> bool:
    return b"\0" in head[:BINARY_SNIFF_BYTES]


def reads_as_text(text: str, odd_share: float = 0.01) -> bool:
    """Whether decoded text looks like text: at most `odd_share` (1%) replacement, private-use,
    unassigned or control characters (other than whitespace). A binary file that happens to start
    with a UTF-16 byte order mark decodes to mostly such characters."""
    odd = sum(1 for c in text if c == "\ufffd" or (unicodedata.category(c) in ("Co", "Cn", "Cc", "Cs")
                                                   and c not in "\t\n\r\f"))
    return odd <= odd_share * len(text)


def printable_name(name: str) -> str:
    """A file name as UTF-8 text: bytes that are not UTF-8 (kept by Python as surrogates) written
    as \\xNN, so that the name can be a document id, a line of a message or JSON."""
    return os.fsencode(name).decode("utf-8", "backslashreplace") if not name.isascii() else name


def read_at_most(stream: BinaryIO, limit: int) -> bytes:
    """The rest of stream, or its next limit + 1 bytes if it holds more: read a block at a time,
    so that a file that unpacks to gigabytes is never held whole."""
    blocks, size = [], 0
    while size <= limit and (block := stream.read(min(limit + 1 - size, READ_BLOCK_BYTES))):
        blocks.append(block)
        size += len(block)
    return b"".join(blocks)


class Utf16AsUtf8:
    """A binary stream of UTF-16 text (its first bytes, with the byte order mark, already read as
    `head`), read as UTF-8 bytes a block at a time; undecodable units become U+FFFD."""

    def __init__(self, head: bytes, stream: BinaryIO):
        self.decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")
        self.stream, self.pending, self.buffer = stream, head, b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self.buffer) < size:
            block, self.pending = self.pending or self.stream.read(size), b""
            self.buffer += self.decoder.decode(block, final=not block).encode("utf-8")
            if not block:
                break
        size = len(self.buffer) if size < 0 else size
        out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out


def _stdin_names():
    """stdin as text whose bytes that are not UTF-8 become surrogates, as in names Python reads."""
    if not hasattr(sys.stdin, "buffer"):  # (replaced by a text stream)
        return sys.stdin
    return io.TextIOWrapper(sys.stdin.buffer, "utf-8", "surrogateescape")


class InputReader:
    """Cuts the input files into units of about `unit_bytes` decompressed bytes, in order.

    The files are listed as a stream (listing.py), twice: once here to count them and their bytes
    (`n_files`, `total_bytes`), and again as they are read. `bytes_read` (compressed bytes
    consumed) drives progress. `skipped_binary` lists files skipped because they look binary;
    `bad_files` the files and folders that could not be read, or only in part, with the reason
    (an error unless `options.skip_bad`); `notes` folders skipped because they were reached twice.
    `files_from` is a file listing input paths, one a line ("-": stdin), read instead of `inputs`.
    A document (a line, or a `txt` file) longer than `max_document_bytes` is refused, or skipped
    with `options.skip_bad` (`overlong_skipped` counts those lines), read in pieces of a unit's
    bytes: never held whole, be it a line of gigabytes or a small gzip file that unpacks to them.
    """

    def __init__(self, inputs: list[str | os.PathLike], options: FormatOptions, unit_bytes: int, warn=print,
                 files_from: str | os.PathLike | None = None, max_document_bytes: int | None = None):
        self.inputs, self.files_from = list(inputs), files_from
        if self.inputs and files_from is not None:
            raise InputError("give either input paths or --files-from, not both")
        if str(files_from) == "-":  # stdin is read once; the list is read twice
            self.files_from = tempfile.TemporaryFile("w+", encoding="utf-8", errors="surrogateescape")
            shutil.copyfileobj(stdin := _stdin_names(), self.files_from)
            if stdin is not sys.stdin:
                stdin.detach()  # (closing it would close stdin)
        if (overlap := overlapping_inputs(self.inputs)) is not None:
            raise InputError(f"{overlap[0]} is among the inputs twice (also as {overlap[1]}, or inside it)")
        self.options = options
        self.unit_bytes = unit_bytes
        self.warn = warn
        self.bad_files: list[tuple[str, str]] = []
        self.notes: list[tuple[str, str]] = []
        self.n_files = self.total_bytes = 0
        for path, name in self._listing(self._problem):
            try:
                self.total_bytes += path.stat().st_size
            except OSError as e:
                self._problem(name, f"cannot be read ({e.strerror or e})", True)
            self.n_files += 1
        if not self.n_files:
            raise InputError(f"no input files in {', '.join(map(str, self.inputs)) or files_from}")
        self.bytes_read = 0
        self.skipped_binary: list[str] = []
        self.max_document_bytes = max_document_bytes or sys.maxsize
        self.overlong_skipped = 0

    def _listing(self, problem):
        if self.files_from is not None:
            listing = input_files(read_file_list(self.files_from), problem, full_names=True)
        else:
            listing = input_files(self.inputs, problem)
        return ((path, printable_name(name)) for path, name in listing)

    def _problem(self, name: str, reason: str, error: bool) -> None:
        """A file or folder not read (or not whole): an error without --skip-bad, else recorded."""
        name = printable_name(name)
        if error and not self.options.skip_bad:
            raise InputError(f"{name}: {reason} (use --skip-bad to skip such files)")
        (self.bad_files if error else self.notes).append((name, reason))
        self.warn(f"warning: {'skipping ' if error else ''}{name}: {reason}")

    def units(self) -> Iterator[Unit]:
        seq = 0
        reported = {name for name, _ in self.bad_files + self.notes}  # by the first listing

        def problem(name: str, reason: str, error: bool) -> None:  # one new since: a file gone, say
            if printable_name(name) not in reported:
                self._problem(name, reason, error)

        files, files_bytes = [], 0  # txt files waiting to fill a unit
        for path, name in self._listing(problem):
            fmt = format_of(path, self.options.format)
            done_before = self.bytes_read
            try:
                stream, raw = open_decompressed(path)
                size = os.fstat(raw.fileno()).st_size
            except OSError as e:
                self._problem(name, f"cannot be read ({e.strerror or e})", True)
                continue
            n_units = 0
            try:
                with stream:
                    for data, first_line in self._pieces(stream, raw, fmt, name, done_before):
                        n_units += 1
                        if fmt == "txt":
                            files.append((name, data))
                            files_bytes += len(data)
                            if files_bytes < self.unit_bytes:
                                continue
                        if files:
                            yield _txt_unit(seq, files)
                            seq += 1
                            files, files_bytes = [], 0
                        if fmt != "txt":
                            yield Unit(seq, name, fmt, data, first_line)
                            seq += 1
            except DECOMPRESSION_ERRORS as e:
                kept = "the documents before the damage are kept" if n_units else "nothing of it is kept"
                self._problem(name, f"cannot be read to the end, truncated or corrupt ({e}); {kept}", True)
            self.bytes_read = done_before + size
        if files:
            yield _txt_unit(seq, files)

    def _pieces(self, stream, raw, fmt: str, name: str, done_before: int) -> Iterator[tuple[bytes, int]]:
        head = stream.read(BINARY_SNIFF_BYTES)
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):  # Windows' "Unicode" text
            stream = Utf16AsUtf8(head, stream)
            head = stream.read(BINARY_SNIFF_BYTES)
            binary = not reads_as_text(head.decode("utf-8", errors="replace"))
        else:
            head = head.removeprefix(codecs.BOM_UTF8)  # as Windows tools write
            # A line format's NUL is a bad line (parse_unit), unless most of the file is not text.
            binary = looks_binary(head) and (fmt == "txt" or not reads_as_text(head.decode("utf-8", errors="replace"),
                                                                               BINARY_ODD_SHARE))
        if binary and fmt != "txt":  # asked for (or named) as text of a line format: not to be passed over
            self._problem(name, f"looks binary, not {fmt} text (its first {BINARY_SNIFF_BYTES:,} bytes are mostly "
                                "not text: compressed other than by gzip, bzip2 or xz?)", True)
            return
        if binary:
            self.skipped_binary.append(name)
            self.warn(f"warning: skipping {name}: looks binary (NUL bytes)")
            return
        if fmt == "txt":
            data = head + read_at_most(stream, self.max_document_bytes - len(head))
            if len(data) > self.max_document_bytes:
                self._problem(name, self._overlong(), True)
                return
            if b"\0" in data:  # binary data past the first bytes looked at
                self.skipped_binary.append(name)
                self.warn(f"warning: skipping {name}: looks binary (NUL bytes past the first {BINARY_SNIFF_BYTES:,})")
                return
            yield data, 1
            return
        pending, line = head, 1
        overlong = None  # bytes so far of an overlong line being skipped (which is line `line`)
        while True:
            try:
                block = stream.read(self.unit_bytes)
            except DECOMPRESSION_ERRORS:  # the whole lines read before the damage are kept
                if cut := pending.rfind(b"\n") + 1:
                    yield pending[:cut], line
                raise
            self.bytes_read = done_before + raw.tell()
            eof = not block
            if overlong is not None:
                end = block.find(b"\n") + 1
                if not end and not eof:
                    overlong += len(block)
                    continue
                self.overlong_skipped += 1
                self.warn(f"warning: skipping {name}:{line}: {self._overlong(overlong + end)}")
                overlong, line, block = None, line + 1, block[end:]
            pending += block
            cut = len(pending) if eof else pending.rfind(b"\n") + 1
            if cut and (len(pending) >= self.unit_bytes or eof):
                piece, pending = pending[:cut], pending[cut:]
                yield piece, line
                line += piece.count(b"\n")
            if eof:
                return
            open_line = pending.rfind(b"\n") + 1  # where the line still without its end starts
            if len(pending) - open_line > self.max_document_bytes:
                if open_line:
                    yield pending[:open_line], line
                    line += pending.count(b"\n", 0, open_line)
                if not self.options.skip_bad:
                    raise InputError(f"{name}:{line}: {self._overlong()} (use --skip-bad to skip such lines)")
                overlong, pending = len(pending) - open_line, b""

    def _overlong(self, size: int | None = None) -> str:
        """Why a document is refused for its size (`size`, if known)."""
        return (f"a document {f'of {format_bytes(size)}, ' if size else ''}longer than "
                f"{format_bytes(self.max_document_bytes)}, the most one may be with this memory budget (1/32 of "
                "--memory-limit): raise --memory-limit, or cut it into smaller documents")


def _txt_unit(seq: int, files: list[tuple[str, bytes]]) -> Unit:
    stops = np.cumsum([len(data) for _, data in files]).tolist()
    bounds = [(name, stop - len(data), stop) for (name, data), stop in zip(files, stops)]
    return Unit(seq, files[0][0], "txt", b"".join(data for _, data in files), 1, bounds)


# -- parsing (in the workers) -------------------------------------------------------------
def decode(data: bytes, stats: Counter, what: str) -> str | bytes:
    """ASCII stays bytes (the tokenizer's fast path); invalid UTF-8 is replaced and counted."""
    if data.isascii():
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        stats[what] += 1
        return data.decode("utf-8", errors="replace")


def parse_unit(unit: Unit, options: FormatOptions, stats: Counter) -> list[Record]:
    """The records in a unit; counts problems in stats, raises InputError on a bad line
    unless options.skip_bad."""
    if unit.format == "txt":
        return [Record(name, text=decode(unit.data[a:b], stats, "invalid_utf8_docs")) for name, a, b in unit.files]
    lines = unit.data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    records = []
    for offset, raw_line in enumerate(lines):
        line_no = unit.first_line + offset
        line = decode(raw_line.rstrip(b"\r"), stats, "invalid_utf8_docs")
        try:
            if b"\0" in raw_line:
                raise InputError("a NUL byte (binary data?)")
            record = LINE_FORMATS[unit.format](line, f"{unit.path}:{line_no}", options)
        except InputError as e:
            if not options.skip_bad:
                raise InputError(f"{unit.path}:{line_no}: {e} (use --skip-bad to skip such lines)") from None
            stats["bad_lines_skipped"] += 1
            continue
        if record is not None:
            records.append(record)
    return records
