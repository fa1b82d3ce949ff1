"""The vocabulary every layer checks options and values with: OptionError, the bounds of the numeric
options, and the checks that raise one line naming the option. The ground floor: it imports nothing of
bigtopics, so kernels' callers, local steps, engines and commands all check values the same way."""

from __future__ import annotations

import math
import numbers

# Bounds of the numeric options, checked by `validate` (settings.py, each local step, infer.py and
# evaluate.py) before any work: wide enough for any real run, narrow enough that no value reaches
# the kernels as inf, NaN, an int64 that overflows or a prior whose products underflow to 0 (a
# zero total mass is a draw out of bounds in the sampler).
MIN_PRIOR, MAX_PRIOR = 1e-10, 1e6
# e^psi(eta) ~ e^(-1/eta) underflows for small eta: the geometric estimate of beta (gibbs
# --beta-estimate geometric, vb, lsparse) needs eta at least this (e^psi(0.005) ~ 1e-87).
MIN_GEOMETRIC_ETA = 0.005
MAX_TOPICS = 1_000_000
MAX_EPOCHS = 1_000_000
MAX_WORKERS = 4096
MAX_SWEEPS = 10_000  # burnin, samples, iterations, MH steps, particles per document
MAX_COUNT = 1 << 50  # documents, minibatches and the like: beyond any corpus, far inside int64
MAX_TAU0 = 1e9
MIN_RESET_BELOW = 1e-100  # pi below this would take the stored values M = N / pi towards overflow
MAX_INTERVAL_SECONDS = 10 * 365 * 86400.0
SEED_LIMIT = 2**63


class OptionError(ValueError):
    """An option's value out of its range or of the wrong kind: a usage error (the CLI exits with
    status 2 for it, 1 for failures at run time)."""


def shown(value) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def is_real_number(value) -> bool:
    """A real number, not a bool: what a default may be computed from before validate() runs."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_integer(value, flag: str, low: int, high: int | None = None, what: str = "") -> None:
    """Raise OptionError (one line naming `flag`, and `what` it is) unless `value` is an integer
    in [low, high]."""
    prefix = f"{flag}: {what}" if what else flag
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise OptionError(f"{prefix} must be a whole number (got {shown(value)})")
    if value < low:
        raise OptionError(f"{prefix} must be at least {low:,} (got {value})")
    if high is not None and value > high:
        raise OptionError(f"{prefix} must be at most {high:,} (got {value})")


def check_real(value, flag: str, low: float, high: float | None = None, *, low_open: bool = False,
               high_open: bool = False, text: str | None = None) -> None:
    """Raise OptionError (one line naming `flag`) unless `value` is a finite number in the range
    from low to high (each end open or closed); `text` words the range instead."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise OptionError(f"{flag} must be a number (got {shown(value)})")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int beyond any float
        finite = False
    if not finite:
        raise OptionError(f"{flag} must be a finite number (got {value:g})" if isinstance(value, float)
                         else f"{flag} must be a finite number (got an integer of {len(str(value))} digits)")
    below = value <= low if low_open else value < low
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        if text is None:
            first = ("positive" if low == 0 else f"above {low:g}") if low_open else (
                "non-negative" if low == 0 else f"at least {low:g}")
            text = first + ("" if high is None else f" and {'below' if high_open else 'at most'} {high:g}")
        raise OptionError(f"{flag} must be {text} (got {value:g})")


def check_applies(given: list[str], needed: str) -> None:
    """OptionError naming the options `given` (as typed, with their values), which apply only with
    the option `needed`, not given: an option that does nothing is refused, not silently ignored."""
    if given:
        raise OptionError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} only with {needed}, "
                          "which was not given")


def check_seed(value, flag: str = "--seed") -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value < SEED_LIMIT:
        raise OptionError(f"{flag} must be a whole number in [0, 2**63) (got {shown(value)})")


def parse_interval(text: str, what: str = "checkpoint interval",
                   flag: str | None = None) -> tuple[int | None, float | None]:
    """'200' -> (200 minibatches, None); '30m', '2h', '90s' -> (None, seconds). A count is at most
    MAX_COUNT and a duration finite and at most MAX_INTERVAL_SECONDS (ten years)."""
    text = str(text).strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if text and text[-1] in units:
            seconds = float(text[:-1]) * units[text[-1]]
            if 0 < seconds <= MAX_INTERVAL_SECONDS:  # False for NaN and inf
                return None, seconds
        elif 0 < int(text) <= MAX_COUNT:
            return int(text), None
    except ValueError:
        pass
    raise OptionError(f"{flag + ': ' if flag else ''}{what} {text!r}: give a number of minibatches (200) or a "
                     "duration (30m, 2h) up to ten years")
