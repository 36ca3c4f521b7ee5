"""Every command-line argument type of ``rmq-query``: a value that would be ignored or misread is a
usage error (exit 2, argparse's message naming the flag), never silently accepted.

Two families, each worded as its commands always answered: the store commands and ``serve``
(``positive_int``, ``port_number``, ``*_seconds``: "expected ..."), and the query commands, which
read numbers as mqadmin does, Java ``long`` after ``trim()`` (``int_arg``, ``positive_int_arg``,
``timeout_arg``, the address lists, ``boolean_arg``, ``charset_arg``).

``float("nan")`` and ``float("inf")`` parse, and negative counts parse as ints: without these checks
``--range-mib -3`` or ``--refresh-interval nan`` would run with a meaning nobody asked for.
"""

from __future__ import annotations

import argparse
import codecs
import math

from clients.errors import ConnectError
from protocol.custom_headers import java_parse_boolean
from server.http.host_check import host_name


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


def non_negative_int(value: str) -> int:
    """An integer of at least 0 (and below 2**62, so it is any clock's offset)."""
    return _integer_in(value, 0, (1 << 62) - 1, "a non-negative integer")


def port_number(value: str) -> int:
    """A TCP port: 0 (any free port) to 65535."""
    return _integer_in(value, 0, 65535, "a port number 0..65535")


#: What ``port_or_off`` returns for "off".
PORT_OFF = -1


def port_or_off(value: str) -> int:
    """A TCP port 0..65535, or ``off`` (``PORT_OFF``): for a port that is on by default."""
    if value.strip().lower() == "off":
        return PORT_OFF
    return _integer_in(value, 0, 65535, "a port number 0..65535 or off")


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


#: The longest request timeout accepted: long enough for any real query, short enough never to hang.
MAX_TIMEOUT = 3600.0


def timeout_arg(text: str) -> float:
    """A request timeout in seconds: finite and in (0, MAX_TIMEOUT], so a request always ends.

    ``nan`` or ``inf`` would make the timer never fire (or the event loop refuse it), a zero or
    negative one fails every request before it is sent: each is a usage error, not a timeout.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT):
        raise argparse.ArgumentTypeError(f"must be a number of seconds in (0, {MAX_TIMEOUT:g}]: {text!r}")
    return value


def addr_arg(text: str) -> str:
    """One ``host:port`` (IPv6 as ``[v6]:port``), checked now so a typo is a usage error (exit 2)."""
    # Imported here: the client (asyncio and the codecs) costs ~80 ms of start-up that the store-side
    # commands (``rebuild-index``, ``fsck``) which also use this module never need.
    from clients.client import parse_addr

    try:
        parse_addr(text)
    except ConnectError as exc:
        raise argparse.ArgumentTypeError(f"{exc.reason}: {text!r}") from None
    return text.strip()


def first_addr_arg(text: str) -> str:
    """The first address of a name server list (``bench`` drives one server), the list checked whole."""
    namesrv_arg(text)
    return next(a.strip() for a in text.split(";") if a.strip())


def namesrv_arg(text: str) -> str:
    """A name server list ``h:p;h:p`` (Java's separator), every address checked like ``addr_arg``."""
    addrs = [a for a in text.split(";") if a.strip()]
    if not addrs:
        raise argparse.ArgumentTypeError(f"no address in {text!r} (expected host:port[;host:port...])")
    for addr in addrs:
        addr_arg(addr)
    return text


def int_arg(text: str) -> int:
    """A Java ``long`` given on the command line (surrounding blanks allowed, as after ``trim()``)."""
    try:
        value = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not -(1 << 63) <= value < (1 << 63):
        raise argparse.ArgumentTypeError(f"out of the 64-bit range: {text!r}")
    return value


def positive_int_arg(text: str) -> int:
    """A positive Java ``int``."""
    value = int_arg(text)
    if not 0 < value < (1 << 31):
        raise argparse.ArgumentTypeError(f"must be between 1 and 2147483647: {text!r}")
    return value


def boolean_arg(text: str) -> bool:
    """A ``true``/``false`` flag value as mqadmin reads it, ``Boolean.parseBoolean(value.trim())``:
    anything but ``true`` (any case) is false, never an error."""
    return java_parse_boolean(text.strip())


def charset_arg(text: str) -> str:
    """A charset name Python knows (``UTF-8``, ``GBK``, ...); an unknown one is a usage error here,
    where Java would only fail on each message."""
    name = text.strip()
    try:
        codecs.lookup(name)
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown charset: {text!r}") from None
    return name


def duration_arg(text: str) -> float:
    """``bench --seconds``: a finite run length in (0, MAX_SECONDS]."""
    from clients.load import MAX_SECONDS  # imported here for the same reason as in ``addr_arg``

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be in (0, {MAX_SECONDS:g}]: {text!r}")
    return value


def http_host_name(value: str) -> str:
    """``--http-allow-host``: a host name or address a browser may name in ``Host`` (no port, no
    scheme): what ``server.http.host_check`` compares, so a value it could never match is refused."""
    name = host_name(value)
    if name is None or name != value.strip().lower().rstrip(".").strip("[]") or "*" in name:
        raise argparse.ArgumentTypeError(f"expected a host name or address without port, got {value!r}")
    return name


def host_port(value: str) -> str:
    """``--advertise``: a ``host:port`` clients can dial (the port is the listen port, not the fast one)."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return value
