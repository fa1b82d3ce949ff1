"""Parsing lines of three whole numbers ("docID wordID count", the UCI bag-of-words body).

A byte scan, since the files run to hundreds of millions of lines: fields are runs of ASCII
digits separated by spaces, tabs or carriage returns; blank lines are skipped; any other line is
malformed and stops the scan, so the caller can name it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

MAX_DIGITS = 18  # anything longer could overflow int64


@njit(cache=True)
def parse_triples(buf):
    """Parse buf (uint8) into (values, row_lines, bad_line).

    values[r] = the three numbers of the r-th non-blank line, row_lines[r] its line index within
    buf (0-based); bad_line is the index of the first malformed line (values then stop before
    it), or -1.
    """
    n_lines = 1
    for c in buf:
        if c == 10:
            n_lines += 1
    values = np.empty((n_lines, 3), np.int64)
    row_lines = np.empty(n_lines, np.int64)
    n_rows = line = field = digits = value = 0
    for p in range(buf.shape[0] + 1):
        c = buf[p] if p < buf.shape[0] else 10  # the end closes the last line
        if 48 <= c <= 57:
            if field == 3 or digits == MAX_DIGITS:
                return values[:n_rows], row_lines[:n_rows], line
            value = value * 10 + (c - 48)
            digits += 1
            continue
        if digits > 0:
            values[n_rows, field] = value
            field += 1
            digits = value = 0
        if c == 10:
            if field == 3:
                row_lines[n_rows] = line
                n_rows += 1
            elif field != 0:
                return values[:n_rows], row_lines[:n_rows], line
            field = 0
            line += 1
        elif c != 32 and c != 9 and c != 13:
            return values[:n_rows], row_lines[:n_rows], line
    return values[:n_rows], row_lines[:n_rows], -1
