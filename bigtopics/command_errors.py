"""How every `bigtopics` command ends when it cannot finish: the errors users can cause as one
line on stderr (exit status 2 for a usage error, 1 for a failure at run time), Ctrl-C (130) and
SIGTERM (143) with a line saying what is left, and warnings as plain `warning: ...` lines."""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
import traceback
import warnings

import click

from .checkpoints import CheckpointError
from .options import OptionError
from .startup import commands_take_interrupts
from .store import StoreError

# What Ctrl-C leaves, per command (train stops at a minibatch and says so itself).
INTERRUPTED = {"infer": "the parts inferred so far are kept; the same command continues from them"}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so that it unwinds as after Ctrl-C (train handles
    both itself, finishing its minibatch)."""


def _terminate(signum, frame):
    raise Terminated()


def _interrupt_again_if_dropped(unraisable) -> None:
    """sys.unraisablehook: Python prints and drops an exception raised in a callback from C, and
    numba's compiler calls back into Python (through ctypes), so Ctrl-C or SIGTERM landing there
    would be lost and the command would go on to exit 0. The signal is sent again a moment later,
    when the program is back in its own code; other exceptions go to Python's hook."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)
        return
    signum = signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else signal.SIGINT
    again = threading.Timer(0.05, os.kill, (os.getpid(), signum))
    again.daemon = True
    again.start()


def _only_critical(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.CRITICAL


def user_errors(fn):
    """Report anticipated errors as `error: ...` on stderr: exit status 2 for a usage error, 1 for
    a failure at run time, 130 after Ctrl-C, 143 after SIGTERM; with --debug, the traceback too."""

    @functools.wraps(fn)
    def wrapper(*args, debug=False, **kwargs):
        try:
            commands_take_interrupts()  # (until here, Ctrl-C ends the command quietly: startup.py)
            # a client whose scheduler stopped answering logs that it gave up, and that its batched
            # comm closed mid-send: more lines beside cluster.ClusterLost's one, which says it (muted
            # here, in the command, not in a program using bigtopics; a filter, since importing
            # distributed sets its loggers' levels from Dask's config)
            for name in ("distributed.client", "distributed.batched"):
                logging.getLogger(name).addFilter(_only_critical)
            return fn(*args, **kwargs)
        except KeyboardInterrupt as e:
            note = INTERRUPTED.get(fn.__name__, "nothing half-written is left behind")
            click.echo(f"{'terminated' if isinstance(e, Terminated) else 'interrupted'}: {note}", err=True)
            sys.exit(143 if isinstance(e, Terminated) else 130)
        except BrokenPipeError:  # `bigtopics topics run/ | head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        except (StoreError, CheckpointError, FileExistsError, FileNotFoundError, ValueError, OSError, ImportError) as e:
            if debug:
                traceback.print_exc()
            click.echo(f"error: {e}", err=True)
            sys.exit(2 if isinstance(e, OptionError) else 1)

    return click.option("--debug", is_flag=True, help="On an error, print the traceback too.")(wrapper)


def _plain_warning(message, category, filename, lineno, line=None) -> str:
    # a user needs what happened, not the line of bigtopics that noticed it; other kinds keep their name
    kind = "" if category is UserWarning else f" ({category.__name__})"
    return f"warning{kind}: {message}\n"


def take_signals_and_warnings() -> None:
    """Set up a command's process: warnings as plain lines, SIGTERM as Terminated, and an
    interrupt dropped in a callback from C sent again."""
    warnings.formatwarning = _plain_warning
    if threading.current_thread() is threading.main_thread():  # (signal handlers are set there only)
        signal.signal(signal.SIGTERM, _terminate)
        sys.unraisablehook = _interrupt_again_if_dropped
