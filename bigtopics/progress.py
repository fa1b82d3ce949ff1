"""Progress reporting: a tqdm bar on a terminal, a plain log line every few minutes otherwise.

Long jobs run under nohup or a batch scheduler, where a redrawn bar would fill the log with
carriage returns; there we print one self-contained line per interval instead.
"""

from __future__ import annotations

import sys
import time
from typing import Callable

from tqdm import tqdm

LOG_INTERVAL_SECONDS = 180.0


class Progress:
    """Counts units of work (documents, bytes) and shows them.

    `postfix` is a callable returning extra fields (tokens/s, memory, held-out score) to show.
    """

    def __init__(
        self,
        desc: str,
        total: float | None = None,
        unit: str = "docs",
        quiet: bool = False,
        stream=None,
        log_interval: float = LOG_INTERVAL_SECONDS,
        postfix: Callable[[], dict] | None = None,
        unit_scale: bool = True,
    ):
        self.desc, self.total, self.unit = desc, total, unit
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.log_interval = log_interval
        self.postfix = postfix
        self.count = 0.0
        self.start = time.monotonic()
        self._last_log = self.start
        self._bar = None
        if not quiet and self.stream.isatty():
            self._bar = tqdm(
                total=total, desc=desc, unit=unit, unit_scale=unit_scale, file=self.stream,
                dynamic_ncols=True, smoothing=0.05,
            )

    def update(self, n: float = 1) -> None:
        self.count += n
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(n)
            if self.postfix is not None:
                self._bar.set_postfix(self.postfix(), refresh=False)
            return
        now = time.monotonic()
        if now - self._last_log >= self.log_interval:
            self._last_log = now
            print(self.line(), file=self.stream, flush=True)

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        rate = self.count / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.desc}: {self.count:,.0f}"]
        if self.total:
            parts[0] += f"/{self.total:,.0f} {self.unit} ({100 * self.count / self.total:.1f}%)"
            if rate > 0:
                parts.append(f"ETA {format_duration((self.total - self.count) / rate)}")
        else:
            parts[0] += f" {self.unit}"
        parts.append(f"{rate:,.1f} {self.unit}/s")
        parts.append(f"elapsed {format_duration(elapsed)}")
        if self.postfix is not None:
            parts.extend(f"{k}={v}" for k, v in self.postfix().items())
        return ", ".join(parts)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def format_duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"
