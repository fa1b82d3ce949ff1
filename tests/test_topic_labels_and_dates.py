"""Topic labels files (topic_labels.py) and dates binned by their span (date_bins.py)."""

import os

import pytest

from bigtopics.date_bins import Date, DateRange, parse_date
from bigtopics.options import OptionError
from bigtopics.topic_labels import read_labels


def test_labels_one_a_line_or_tsv(tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_text("money\n\ngrain & <b>crops</b>\n")
    assert read_labels(lines, 3) == {0: "money", 2: "grain & <b>crops</b>"}
    tsv = tmp_path / "labels.tsv"
    tsv.write_text("topic\tlabel\n2\toil\n0\tmoney\n")
    assert read_labels(tsv, 5) == {2: "oil", 0: "money"}


@pytest.mark.parametrize("text, says", [
    ("a\nb\n", "2 lines for 3 topics"),
    ("0\tx\n3\ty\n", "topic 3 is not one of the model's topics 0 to 2"),
    ("0\tx\n0\ty\n", "topic 0 is labelled twice"),
    ("zero\tx\n1\ty\n", "'zero' is not a topic number"),
    ("0\tx\nno tab\n", "line 2 has no TAB"),
])
def test_a_bad_labels_file_is_refused_in_one_line(tmp_path, text, says):
    path = tmp_path / "labels.txt"
    path.write_text(text)
    with pytest.raises(OptionError, match=says) as error:
        read_labels(path, 3)
    assert "\n" not in str(error.value) and str(path) in str(error.value)


def test_a_labels_path_that_is_no_file_is_never_read(tmp_path):
    fifo = tmp_path / "labels.fifo"
    os.mkfifo(fifo)
    with pytest.raises(OptionError, match="named pipe"):
        read_labels(fifo, 3)  # (a read would block forever)
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    with pytest.raises(OptionError, match="character device"):
        read_labels(zero, 3)
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.truncate(1 << 30)
    with pytest.raises(OptionError, match="bytes, more than labels"):
        read_labels(huge, 3)


def test_dates_are_read_in_the_forms_archives_write():
    assert parse_date("26-FEB-1987 15:01:01.79") == Date(1987, 2, 26, "day")
    assert parse_date(" 5-MAR-1987 08:45:34.42C G T M") == Date(1987, 3, 5, "day")
    assert (parse_date("1994-08-01").day, parse_date("1994-08").precision) == (1, "month")
    assert parse_date("March 5, 1987").day == 5
    assert parse_date(1987).precision == "year" and parse_date("circa 1850").year == 1850
    assert parse_date("31-FEB-1987") is None  # no such day
    assert parse_date("no date") is None and parse_date(float("nan")) is None


@pytest.mark.parametrize("dates, unit, width", [
    (["26-FEB-1987", "19-OCT-1987"], "month", 1),          # Reuters: by month
    (["1987-02-01", "1987-02-12"], "day", 1),
    (["1987-02-01", "1987-04-20"], "day", 7),              # 11 weeks
    (["1987-02-01", "1989-06-20"], "month", 2),            # 29 months
    (["1950-03-01", "1989-06-20"], "year", 2),
    (["1987-02-01", "1989"], "year", 1),                   # a year alone: by years
])
def test_dates_are_binned_by_the_span_they_cover(dates, unit, width):
    found = DateRange()
    for d in dates:
        found.add(parse_date(d))
    bins = found.bins()
    assert (bins.unit, bins.width) == (unit, width) and bins.count(found.last) <= 20


def test_dates_in_one_bin_are_not_charted():
    found = DateRange()
    for d in ("1987-02-01", "1987-02-01"):
        found.add(parse_date(d))
    assert found.bins() is None
