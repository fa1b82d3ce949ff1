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
