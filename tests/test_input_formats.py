"""The contract of the input formats (input_formats/): every registered format of one document a
line reads its sample line as the document it holds, and any line at all either as a record, as
no document, or as one InputError, never another exception; the CLI offers exactly the
registered formats."""

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bigtopics.cli import main
from bigtopics.input_formats import FORMATS, LINE_FORMATS, FormatOptions, InputError, Record

OPTIONS = FormatOptions()
# format -> (a line, the record it holds)
SAMPLES = {
    "lines": ("the whale and the sea", Record("f.txt:3", text="the whale and the sea")),
    "tsv": ("moby\tfiction\tcall me ishmael", Record("moby", text="call me ishmael", meta={"label": "fiction"})),
    "jsonl": ('{"id": 7, "text": "call me ishmael", "year": 1851, "tags": ["sea"]}',
              Record("7", text="call me ishmael", meta={"year": 1851, "tags": '["sea"]'})),
    "bow-jsonl": ('{"id": "m", "counts": {"whale": 3, "sea": 1}, "year": 1851}',
                  Record("m", counts={"whale": 3, "sea": 1}, meta={"year": 1851})),
}


def test_every_registered_format_has_a_case_and_the_cli_offers_exactly_them():
    assert set(SAMPLES) == set(LINE_FORMATS)
    assert FORMATS == ("txt", *LINE_FORMATS)
    option = next(p for p in main.commands["ingest"].params if p.name == "fmt")
    assert isinstance(option.type, click.Choice) and tuple(option.type.choices) == FORMATS


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_a_format_reads_its_sample_line_as_the_document_it_holds(fmt):
    line, expected = SAMPLES[fmt]
    assert LINE_FORMATS[fmt](line, "f.txt:3", OPTIONS) == expected


@pytest.mark.parametrize("fmt", sorted(set(LINE_FORMATS) - {"lines"}))
def test_a_malformed_line_is_an_input_error(fmt):
    with pytest.raises(InputError):
        LINE_FORMATS[fmt]("{not json\tnor three fields", "f.txt:3", OPTIONS)


@pytest.mark.parametrize("fmt", sorted(LINE_FORMATS))
@settings(max_examples=200, deadline=None)
@given(line=st.one_of(st.text(max_size=200), st.from_regex(r'\{"id": ?[0-9]{1,30}, ?"(text|counts)": .{0,40}\}'),
                      st.from_regex(r"[^\t\n]{0,10}\t[^\t\n]{0,10}(\t.{0,20})?")))
def test_any_line_is_a_record_no_document_or_one_input_error(fmt, line):
    try:
        record = LINE_FORMATS[fmt](line, "f.txt:3", OPTIONS)
    except InputError:
        return
    assert record is None or (isinstance(record, Record) and isinstance(record.doc_id, str))
