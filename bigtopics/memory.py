"""Memory sizing and reporting (psutil), so buffers follow what the machine has."""

from __future__ import annotations

import resource
import sys

import psutil


def available_bytes() -> int:
    """Memory the OS could give us now without swapping."""
    return int(psutil.virtual_memory().available)


def budget_bytes(fraction: float = 0.25, floor: int = 64 << 20, ceiling: int = 4 << 30) -> int:
    """A buffer budget: a fraction of available memory, clamped to [floor, ceiling]."""
    return int(min(max(available_bytes() * fraction, floor), ceiling))


def rss_bytes() -> int:
    """Current resident set size of this process."""
    return int(psutil.Process().memory_info().rss)


def peak_rss_bytes(include_children: bool = True) -> int:
    """Peak resident set size of this process (and, optionally, of its finished children)."""
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is KiB on Linux, bytes on macOS
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    if include_children:
        peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale)
    return int(peak)


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
