"""Stopping a run cleanly on Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import sys
import threading


class StopOnSignal:
    """First Ctrl-C or SIGTERM: finish the minibatch, checkpoint, stop. A second: exit at once."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.previous = {}

    def _handle(self, signum, frame):
        self.trainer.stop_signal = signum
        signal.signal(signum, signal.SIG_DFL)  # the next one terminates the process immediately
        if not self.trainer.quiet:
            print(f"\n{signal.Signals(signum).name}: finishing this minibatch and writing a checkpoint "
                  "(send it again to exit at once; the last checkpoint stands)", file=sys.stderr, flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


class InterruptsThatStick:
    """Ctrl-C (SIGINT) that a callback cannot swallow: numba's compiler calls back into Python
    through ctypes, which prints and drops an exception raised there, so a KeyboardInterrupt
    that lands during a first compile would be lost and the command would run on to exit 0. The
    handler raises as Python's does and also remembers; `check()` raises again at the next safe
    point, and the traceback ctypes would print for the dropped one is left out (the user is told
    once, when it stops). Outside the main thread it does nothing (signals reach that one only)."""

    def __init__(self):
        self.pending = False
        self.previous = None
        self.previous_hook = None

    def _unraisable(self, unraisable):
        if not (self.pending and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            self.previous_hook(unraisable)

    def _handle(self, signum, frame):
        self.pending = True
        raise KeyboardInterrupt

    def check(self) -> None:
        if self.pending:
            raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)
            self.previous_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            sys.unraisablehook = self.previous_hook
