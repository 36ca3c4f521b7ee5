"""Argument types for the store commands and ``serve``: a value that would be ignored or misread is a
usage error (exit 2, argparse's message naming the flag), never silently accepted.

``float("nan")`` and ``float("inf")`` parse, and negative counts parse as ints: without these checks
``--range-mib -3`` or ``--refresh-interval nan`` would run with a meaning nobody asked for.
"""

from __future__ import annotations

import argparse
import math


def positive_int(value: str) -> int:
    """An integer of at least 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def port_number(value: str) -> int:
    """A TCP port: 0 (any free port) to 65535."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {value!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {value!r}")
    return number


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
