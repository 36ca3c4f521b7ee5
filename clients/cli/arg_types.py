"""Argument types for the store commands and ``serve``: a value that would be ignored or misread is a
usage error (exit 2, argparse's message naming the flag), never silently accepted.

``float("nan")`` and ``float("inf")`` parse, and negative counts parse as ints: without these checks
``--range-mib -3`` or ``--refresh-interval nan`` would run with a meaning nobody asked for.
"""

from __future__ import annotations

import argparse
import math


def _integer_in(value: str, low: int, high: int | None, expected: str) -> int:
    """``int(value)`` within ``[low, high]`` (no upper bound when ``high`` is None), else the usage
    error ``expected <expected>, got '<value>'``."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value!r}") from None
    if number < low or (high is not None and number > high):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value!r}")
    return number


def positive_int(value: str) -> int:
    """An integer of at least 1."""
    return _integer_in(value, 1, None, "a positive integer")


def port_number(value: str) -> int:
    """A TCP port: 0 (any free port) to 65535."""
    return _integer_in(value, 0, 65535, "a port number 0..65535")


def _finite(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds, got {value!r}")
    return number


def seconds_or_off(value: str) -> float:
    """A finite number of seconds, 0 meaning off."""
    number = _finite(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected 0 (off) or a positive number of seconds, got {value!r}")
    return number


def positive_seconds(value: str) -> float:
    """A finite number of seconds above 0."""
    number = _finite(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return number
