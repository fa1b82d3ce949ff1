import bz2
import codecs
import gzip
import lzma
from collections import Counter

import numpy as np
import pytest

from bigtopics.ingest.inputs import (
    FormatOptions,
    InputError,
    InputReader,
    Unit,
    format_of,
    open_decompressed,
    parse_unit,
)
from bigtopics.ingest.listing import input_files

LINES = b"".join(b'{"id": %d, "text": "line %d"}\n' % (i, i) for i in range(1, 2001))


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress, lambda b: b])
def test_compression_is_detected_by_magic_bytes_not_name(tmp_path, compress):
    path = tmp_path / "misleading.txt"  # no .gz/.bz2/.xz suffix
    path.write_bytes(compress(LINES))
    stream, _ = open_decompressed(path)
    with stream:
        assert stream.read() == LINES


def test_format_by_extension_ignores_compression_suffix(tmp_path):
    assert format_of(tmp_path / "a.jsonl.gz", None) == "jsonl"
    assert format_of(tmp_path / "a.TSV.xz", None) == "tsv"
    assert format_of(tmp_path / "README", None) == "txt"
    assert format_of(tmp_path / "a.jsonl", "lines") == "lines"


def test_units_are_whole_lines_with_their_line_numbers(tmp_path):
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(LINES))
    reader = InputReader([tmp_path], FormatOptions(), unit_bytes=5000)
    units = list(reader.units())
    assert len(units) > 3 and b"".join(u.data for u in units) == LINES
    for u in units:
        assert u.data.endswith(b"\n") and u.data.startswith(b'{"id": %d,' % u.first_line)
    assert reader.bytes_read == reader.total_bytes


def test_binary_files_are_skipped_with_a_warning(tmp_path):
    (tmp_path / "ok.txt").write_text("fine text")
    (tmp_path / "img.txt").write_bytes(b"\x89PNG\0\0\0binary")
    warnings = []
    reader = InputReader([tmp_path], FormatOptions(), unit_bytes=1 << 20, warn=warnings.append)
    assert [u.path for u in reader.units()] == ["ok.txt"]
    assert reader.skipped_binary == ["img.txt"] and "img.txt" in warnings[0]


def test_bigtopics_output_inside_an_input_folder_is_not_input(tmp_path):
    (tmp_path / "a.txt").write_text("whale")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "settings.json").write_text('{"settings": {}, "store_fingerprint": {}}')
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 1}\n')
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "zarr.json").write_text('{"text": "a file that only shares the name"}')
    assert [name for _, name in input_files([tmp_path], problem=None)] == ["a.txt", "notes/zarr.json"]


def test_a_file_given_twice_is_an_error(tmp_path):
    (tmp_path / "a.txt").write_text("whale")
    with pytest.raises(InputError, match="among the inputs twice"):
        InputReader([tmp_path, tmp_path / "a.txt"], FormatOptions(), unit_bytes=1 << 20)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_text_with_a_byte_order_mark_is_read(tmp_path, encoding):
    lines = ['{"id": "a", "text": "Straße whale"}', '{"id": "b", "text": "ship"}'] * 3000
    bom = {"utf-16": b"", "utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE}[encoding]
    (tmp_path / "u.jsonl").write_bytes(bom + "\n".join(lines).encode(encoding))
    units = list(InputReader([tmp_path], FormatOptions(), unit_bytes=5000).units())
    records = [r for u in units for r in parse_unit(u, FormatOptions(), Counter())]
    assert len(units) > 3 and [(r.doc_id, r.text) for r in records[:2]] == [("a", "Straße whale"), ("b", "ship")]
    assert len(records) == 6000


def test_a_binary_file_that_starts_like_utf16_is_still_skipped(tmp_path):
    (tmp_path / "ok.txt").write_text("fine text")
    (tmp_path / "frame.txt").write_bytes(codecs.BOM_UTF16_LE + np.random.default_rng(0).bytes(20000))
    reader = InputReader([tmp_path], FormatOptions(), unit_bytes=1 << 20, warn=lambda m: None)
    assert [u.path for u in reader.units()] == ["ok.txt"] and reader.skipped_binary == ["frame.txt"]


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_record(tmp_path):
    (tmp_path / "bom.jsonl").write_bytes(b'\xef\xbb\xbf{"id": "a", "text": "whale"}\n')
    (unit,) = InputReader([tmp_path], FormatOptions(), unit_bytes=1 << 20).units()
    (record,) = parse_unit(unit, FormatOptions(), Counter())
    assert (record.doc_id, record.text) == ("a", "whale")


def test_truncated_compressed_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(gzip.compress(LINES)[:-200])
    with pytest.raises(InputError, match="cut.jsonl.gz.*truncated"):
        list(InputReader([path], FormatOptions(), unit_bytes=1 << 20).units())


def parse(fmt, data: bytes, **options):
    stats = Counter()
    return parse_unit(Unit(0, "f", fmt, data, 7), FormatOptions(format=fmt, **options), stats), stats


def test_jsonl_fields_and_metadata():
    (rec,), _ = parse("jsonl", b'{"name": "d1", "body": "words here", "year": 1900, "tags": ["a", "b"], "x": null}\n',
                      text_field="body", id_field="name")
    assert (rec.doc_id, rec.text) == ("d1", "words here")
    assert rec.meta == {"year": 1900, "tags": '["a", "b"]', "x": None}


def test_jsonl_missing_id_falls_back_to_file_and_line():
    (rec,), _ = parse("jsonl", b'\n{"text": "t"}\n')
    assert rec.doc_id == "f:8"


def test_malformed_json_names_file_and_line_or_is_skipped_and_counted():
    data = b'{"id": 1, "text": "a"}\n{"id": 2, "text": \n{"id": 3, "text": "c"}\n'
    with pytest.raises(InputError, match=r"^f:8: malformed JSON"):
        parse("jsonl", data)
    records, stats = parse("jsonl", data, skip_bad=True)
    assert [r.doc_id for r in records] == ["1", "3"] and stats["bad_lines_skipped"] == 1


def test_lines_tsv_and_bow_formats():
    recs, _ = parse("lines", b"first doc\n\nthird\n")
    assert [(r.doc_id, r.text) for r in recs] == [("f:7", b"first doc"), ("f:8", b""), ("f:9", b"third")]
    recs, _ = parse("tsv", b"d1\tsports\tthe game\nd2\tnews\ttext\twith tab\n")
    assert [(r.doc_id, r.meta["label"], r.text) for r in recs] == [("d1", "sports", "the game"),
                                                                    ("d2", "news", "text\twith tab")]
    with pytest.raises(InputError, match="f:7: expected id<TAB>label<TAB>text"):
        parse("tsv", b"only one field\n")
    (rec,), _ = parse("bow-jsonl", b'{"id": "b", "counts": {"apple": 2, "pear": 1}, "vol": 3}\n')
    assert rec.counts == {"apple": 2, "pear": 1} and rec.meta == {"vol": 3}
    with pytest.raises(InputError, match="must map words to counts"):
        parse("bow-jsonl", b'{"id": "b", "counts": {"apple": -1}}\n')


def test_invalid_utf8_is_replaced_and_counted():
    recs, stats = parse("lines", b"caf\xe9 ok\nfine\xc3\xa9\n")
    assert recs[0].text == "caf\ufffd ok" and recs[1].text == "fineé"
    assert stats["invalid_utf8_docs"] == 1
