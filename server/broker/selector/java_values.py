"""The values a message selector computes with, and Java's rules for comparing them.

RocketMQ's SQL92 filter (``org.apache.rocketmq.filter``, from ActiveMQ's selector) evaluates over
Java objects: ``Integer`` and ``Long`` literals, ``Double`` literals, ``String`` literals and
property values (a message's properties are all strings), ``Boolean`` and ``null``. The answer of a
comparison depends on those classes, so they are kept apart here: a Java ``Integer`` is a Python
``int``, a ``Long`` a ``JavaLong`` (an ``int`` subclass), a ``Double`` a ``float``, a ``Boolean`` a
``bool``, a ``String`` a ``str`` and ``null`` is None.

``java_compare`` is ``ComparisonExpression.__compare`` with string conversion on (the only way the
4.9.7 parser builds comparisons): two different classes are brought to one - a string is parsed as
the other side's number (``Integer.valueOf``, ``Long.valueOf``, ``Double.valueOf``) or boolean
(``Boolean.valueOf``), a narrower number widened - and anything else compares as "less" (-1). A
string that does not parse is Java's ``NumberFormatException``; a boolean compared with a string is
a ``ClassCastException`` (the broker casts the boolean to a string). Both are ``EvaluationError``:
the broker catches them around the whole evaluation and the message does not match.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "EvaluationError",
    "JavaLong",
    "double_compare",
    "java_compare",
    "java_equals",
    "parse_boolean",
    "parse_double",
    "parse_int",
    "parse_long",
]


class JavaLong(int):
    """A Java ``Long``: an integer literal outside ``Integer``'s range (or a negated one)."""

    __slots__ = ()


class EvaluationError(Exception):
    """A Java exception thrown while a selector is evaluated: the message does not match."""


_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1

#: ``Integer.parseInt`` / ``Long.parseLong``: a sign, then digits (``Character.digit`` takes any
#: Unicode decimal digit, as Python's ``\d`` and ``int`` do); no blanks, no underscores.
_INTEGER = re.compile(r"[+-]?\d+")

#: ``Double.valueOf`` after ``trim()``: NaN, Infinity, decimal or hexadecimal forms (ASCII digits
#: only), with an optional ``f``/``d`` suffix.
_DOUBLE = re.compile(
    r"(?P<sign>[+-]?)(?:(?P<nan>NaN)|(?P<inf>Infinity)"
    r"|(?P<dec>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFdD]?"
    r"|(?P<hex>0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)[fFdD]?)",
    re.ASCII,
)


def _number_format(text: str) -> EvaluationError:
    return EvaluationError(f'java.lang.NumberFormatException: For input string: "{text}"')


def _parse_integer(text: str, low: int, high: int) -> int:
    if _INTEGER.fullmatch(text) is None:
        raise _number_format(text)
    value = int(text)
    if not low <= value <= high:
        raise _number_format(text)
    return value


def parse_int(text: str) -> int:
    """``Integer.valueOf(String)``."""
    return _parse_integer(text, _INT_MIN, _INT_MAX)


def parse_long(text: str) -> JavaLong:
    """``Long.valueOf(String)``."""
    return JavaLong(_parse_integer(text, _LONG_MIN, _LONG_MAX))


def _java_trim(text: str) -> str:
    """``String.trim()``: strips characters up to U+0020 at both ends, nothing else."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def parse_double(text: str) -> float:
    """``Double.valueOf(String)``: Java's grammar, not Python's (no ``inf``, no ``1_0``)."""
    match = _DOUBLE.fullmatch(_java_trim(text))
    if match is None:
        raise _number_format(text)
    negative = match["sign"] == "-"
    if match["nan"]:
        return math.nan
    if match["inf"]:
        return -math.inf if negative else math.inf
    value = float(match["dec"]) if match["dec"] is not None else float.fromhex(match["hex"])
    return -value if negative else value


def parse_boolean(text: str) -> bool:
    """``Boolean.valueOf(String)``: true for ``true`` in any case, false for anything else."""
    return len(text) == 4 and text.lower() == "true"


def double_compare(a: float, b: float) -> int:
    """``Double.compare``: -0.0 below 0.0, NaN above everything and equal to itself."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = a != a, b != b
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    sign_a, sign_b = math.copysign(1.0, a), math.copysign(1.0, b)
    return (sign_a > sign_b) - (sign_a < sign_b)


_BOOLEAN, _INTEGER_KIND, _LONG, _DOUBLE_KIND, _STRING = range(5)
_KINDS = {bool: _BOOLEAN, int: _INTEGER_KIND, JavaLong: _LONG, float: _DOUBLE_KIND, str: _STRING}


def _kind(value: object) -> int:
    kind = _KINDS.get(type(value))
    if kind is None:
        raise TypeError(f"not a selector value: {value!r}")
    return kind


def java_equals(left: object, right: object) -> bool:
    """``left.equals(right)`` for two non-null values: same class and same value (``Double``'s by
    its bits: NaN equals NaN, 0.0 is not -0.0)."""
    kind = _kind(left)
    if kind != _kind(right):
        return False
    if kind == _DOUBLE_KIND:
        return double_compare(left, right) == 0  # type: ignore[arg-type]
    return left == right


def _compare_same(left: object, right: object) -> int:
    """``left.compareTo(right)`` once both are of one class (or both integral)."""
    if isinstance(left, float) or isinstance(right, float):
        return double_compare(float(left), float(right))  # type: ignore[arg-type]
    if isinstance(left, str):
        # String.compareTo orders UTF-16 code units; big-endian UTF-16 bytes order the same way.
        a = left.encode("utf-16-be", "surrogatepass")
        b = right.encode("utf-16-be", "surrogatepass")  # type: ignore[union-attr]
        return (a > b) - (a < b)
    return (left > right) - (left < right)  # type: ignore[operator]


def java_compare(left: object, right: object) -> int:
    """``ComparisonExpression.__compare(left, right, true)`` for two non-null values."""
    lk, rk = _kind(left), _kind(right)
    if lk != rk:
        if lk == _BOOLEAN:
            if rk == _STRING:
                raise EvaluationError("java.lang.ClassCastException: Boolean cannot be cast to String")
            return -1
        if lk == _INTEGER_KIND:
            if rk == _DOUBLE_KIND:
                left = float(left)  # type: ignore[arg-type]
            elif rk == _STRING:
                right = parse_int(right)  # type: ignore[arg-type]
            elif rk != _LONG:
                return -1
        elif lk == _LONG:
            if rk == _DOUBLE_KIND:
                left = float(left)  # type: ignore[arg-type]
            elif rk == _STRING:
                right = parse_long(right)  # type: ignore[arg-type]
            elif rk != _INTEGER_KIND:
                return -1
        elif lk == _DOUBLE_KIND:
            if rk in (_INTEGER_KIND, _LONG):
                right = float(right)  # type: ignore[arg-type]
            elif rk == _STRING:
                right = parse_double(right)  # type: ignore[arg-type]
            else:
                return -1
        else:  # a String on the left
            if rk == _BOOLEAN:
                left = parse_boolean(left)  # type: ignore[arg-type]
            elif rk == _INTEGER_KIND:
                left = parse_int(left)  # type: ignore[arg-type]
            elif rk == _LONG:
                left = parse_long(left)  # type: ignore[arg-type]
            else:
                left = parse_double(left)  # type: ignore[arg-type]
    return _compare_same(left, right)
