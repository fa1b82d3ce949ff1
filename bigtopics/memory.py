"""Memory sizing and reporting (psutil), so buffers follow what the machine has, and the C
allocator setting that keeps freed minibatch arrays from staying resident."""

from __future__ import annotations

import ctypes
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


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
MMAP_THRESHOLD_BYTES = 128 << 10  # glibc's own starting value


def _glibc_function(name: str):
    """A function of glibc's malloc by name, or None off glibc (another OS, or musl without it)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None


def return_large_frees_to_os() -> bool:
    """Have glibc's malloc serve every allocation of 128 KiB or more from its own memory map, which
    goes back to the OS when freed. Returns whether the C library accepted the setting (False off
    glibc; an allocator preloaded in its place may accept it and ignore it).

    Why: glibc raises that threshold each time a mapped block is freed (up to 32 MiB), after which
    the minibatch arrays of a few MiB (frozen rows, statistics) come from the heaps of the sampler
    threads, and memory freed there stays resident. Setting the threshold fixes it at the same
    speed (benchmarks/RESULTS.md, "Side by side with the peers"). Process-wide and for good, so
    only the trainer calls it (see Trainer).
    """
    mallopt = _glibc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1


BYTE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_bytes(text: str) -> int:
    """"1.5G", "800M", "64MiB", "2000000" -> bytes (units are powers of 1024)."""
    number = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = number[-1:] if number[-1:] in BYTE_UNITS else ""
    try:
        return int(float(number.removesuffix(unit)) * BYTE_UNITS[unit])
    except ValueError:
        raise ValueError(f"{text!r} is not a size (such as 800M or 1.5G)") from None


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
