"""The `bigtopics` command line: a thin layer over the Python API.

Each command parses options, calls one API function, and turns the errors users can cause
(bad input, missing files, wrong settings) into a one-line message and exit status 2, never a
traceback.
"""

from __future__ import annotations

import functools
import sys

import click

from .store import StoreError


def user_errors(fn):
    """Report anticipated errors as `error: ...` on stderr with exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (StoreError, FileExistsError, FileNotFoundError, ValueError, OSError) as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)

    return wrapper


@click.group()
@click.version_option(package_name="bigtopics")
def main():
    """Topic models for very large text collections on one machine."""


# -- ingest and info ------------------------------------------------------------------------


# -- train and topics -----------------------------------------------------------------------


if __name__ == "__main__":
    main()
