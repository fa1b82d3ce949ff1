"""Dates of documents' metadata, read from the forms libraries and news archives write, and binned
by the span they cover: days (or weeks) for a few weeks, months for a few years, years (or
decades...) beyond, in at most MAX_BINS bins.

A value is a date when it holds, anywhere in its text: an ISO date "1994-08-01" (or "1994-08"),
a day-month-year "26-FEB-1987 15:01:01.79" / "5 March 1987", a month-day-year "March 5, 1987",
or only a year "1987" (a number is a year). A field's dates are binned no finer than its
coarsest value: one value with only a year bins the field by years.
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass

MAX_BINS = 20
# (unit, width) from finest to coarsest: the first with at most MAX_BINS bins over the span is used
BIN_WIDTHS = (("day", 1), ("day", 7), ("month", 1), ("month", 2), ("month", 3), ("month", 6),
              *(("year", n) for n in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)))
PRECISION = {"year": 0, "month": 1, "day": 2}
MONTHS = {name: number for number, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
ISO = re.compile(r"(?<!\d)(\d{4})-(\d{1,2})(?:-(\d{1,2}))?(?!\d)")
DAY_MONTH_YEAR = re.compile(r"(?<!\d)(\d{1,2})[-\s/.]([A-Za-z]{3})[A-Za-z]*\.?[-\s/.,]+(\d{4})(?!\d)")
MONTH_DAY_YEAR = re.compile(r"\b([A-Za-z]{3})[A-Za-z]*\.?\s+(\d{1,2}),?\s+(\d{4})(?!\d)")
YEAR = re.compile(r"(?<!\d)(\d{4})(?!\d)")


@dataclass(frozen=True)
class Date:
    """A date known to a year, a month or a day (`precision`, a key of PRECISION)."""
    year: int
    month: int = 1
    day: int = 1
    precision: str = "year"


def parse_date(value, at_start: bool = False) -> Date | None:
    """The date `value` holds (module docstring), or None. `at_start`: only a text that begins
    with its date (after spaces) is one, as where any field may turn out to be dates (the site's
    charts), and "Chapter 1851" must not make a field of titles a field of dates."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _date(math.floor(value), 1, 1, "year") if math.isfinite(value) else None
    text = str(value)
    find = (lambda pattern: pattern.match(text.lstrip())) if at_start else (lambda pattern: pattern.search(text))
    found = find(ISO)
    if found:
        year, month, day = found.groups()
        return _date(int(year), int(month), int(day or 1), "day" if day else "month")
    found = find(DAY_MONTH_YEAR)
    if found and found.group(2).lower() in MONTHS:
        return _date(int(found.group(3)), MONTHS[found.group(2).lower()], int(found.group(1)), "day")
    found = find(MONTH_DAY_YEAR)
    if found and found.group(1).lower() in MONTHS:
        return _date(int(found.group(3)), MONTHS[found.group(1).lower()], int(found.group(2)), "day")
    found = find(YEAR)
    return _date(int(found.group(1)), 1, 1, "year") if found else None


def _date(year: int, month: int, day: int, precision: str) -> Date | None:
    try:
        datetime.date(year, month, day)  # a real day of the calendar (years 1 to 9999)
    except (ValueError, OverflowError):
        return None
    return Date(year, month, day, precision)


class DateRange:
    """The extent and coarsest precision of a field's dates, accumulated value by value."""

    def __init__(self):
        self.first: Date | None = None
        self.last: Date | None = None
        self.precision = "day"

    def add(self, date: Date) -> None:
        key = (date.year, date.month, date.day)
        if self.first is None or key < (self.first.year, self.first.month, self.first.day):
            self.first = date
        if self.last is None or key > (self.last.year, self.last.month, self.last.day):
            self.last = date
        if PRECISION[date.precision] < PRECISION[self.precision]:
            self.precision = date.precision

    def bins(self) -> DateBins | None:
        """The finest bins of BIN_WIDTHS the precision allows with at most MAX_BINS over the range;
        None when every date falls in one bin of the finest unit allowed (nothing to chart)."""
        if self.first is None:
            return None
        for unit, width in BIN_WIDTHS:
            if PRECISION[unit] > PRECISION[self.precision]:
                continue
            lo, hi = position(self.first, unit), position(self.last, unit)
            if hi == lo and width == 1:
                return None
            if (hi - lo) // width + 1 <= MAX_BINS:
                return DateBins(unit, width, lo)
        return None


def position(date: Date, unit: str) -> int:
    """The date's place in a count of units: years, months since year 0, or days (ordinal)."""
    if unit == "year":
        return date.year
    if unit == "month":
        return date.year * 12 + date.month - 1
    return datetime.date(date.year, date.month, date.day).toordinal()


@dataclass(frozen=True)
class DateBins:
    """Bins `width` `unit`s wide, the first starting at `origin` (a position in that unit)."""
    unit: str
    width: int
    origin: int

    def start(self, date: Date) -> str:
        """The first day of the bin holding `date`, "YYYY-MM-DD"."""
        p = position(date, self.unit)
        p -= (p - self.origin) % self.width
        if self.unit == "year":
            return f"{p:04d}-01-01"
        if self.unit == "month":
            return f"{p // 12:04d}-{p % 12 + 1:02d}-01"
        return datetime.date.fromordinal(p).isoformat()

    def count(self, last: Date) -> int:
        """Bins from the first to the one holding `last`."""
        return (position(last, self.unit) - self.origin) // self.width + 1

    def describe(self) -> str:
        """"by month", "by 2 months", "by week" (7 days), "by 5 years"."""
        if self.unit == "day" and self.width == 7:
            return "by week"
        return f"by {self.unit}" if self.width == 1 else f"by {self.width} {self.unit}s"
