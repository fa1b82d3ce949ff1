"""Ctrl-C while the `bigtopics` command is still starting (importing numpy, numba, zarr: a second
or more) ends it with one line and exit status 130, as Ctrl-C does once a command runs, instead
of a traceback of whichever import it fell in.

bigtopics/__init__.py calls `quiet_interrupts_while_starting()` first thing; it acts only in the
command (the `bigtopics` script, or `python -m bigtopics.cli`), never in a program that imports
bigtopics, and each command calls `commands_take_interrupts()` as it starts (cli.user_errors),
from when on Ctrl-C is a KeyboardInterrupt that the command handles. Standard library only: this
runs before anything else is imported.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

CLI_MODULE = "bigtopics.cli"


def started_as_command() -> bool:
    """Whether this process is the `bigtopics` command (and not a program importing bigtopics, a
    worker process or a test)."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    for k, arg in enumerate(argv[1:], 1):
        if arg == "-m":
            return argv[k + 1:k + 2] == [CLI_MODULE]
        if arg.startswith("-m"):
            return arg[2:] == CLI_MODULE
        if not arg.startswith("-"):  # the script: the `bigtopics` entry point
            break
    return os.path.splitext(os.path.basename(sys.argv[0]))[0] == "bigtopics"


def _interrupted_while_starting(signum, frame) -> None:
    os.write(2, b"interrupted: the command had not started; nothing was done\n")
    os._exit(130)


def quiet_interrupts_while_starting() -> None:
    if started_as_command() and threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_while_starting)


def commands_take_interrupts() -> None:
    """From now on Ctrl-C raises KeyboardInterrupt (the command's own handling)."""
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)
