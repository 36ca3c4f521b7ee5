"""The broker's filter by expression (``ExpressionMessageFilter``, ``FilterFactory``,
``ConsumerFilterManager.build``): which expression types compile, and a stored record's match.

A subscription's ``expressionType`` is a tag type when it is null, empty or ``TAG`` (then the
consume queue's tags codes filter, ``store.consumequeue.get_message``); the one other type a broker
knows is ``SQL92``, compiled by ``server.broker.selector``. Any other type does not compile (the
broker's ``FilterFactory`` has no filter for it). An SQL92 subscription looks at the record itself:
its properties as the broker's ``MessageDecoder.decodeProperties`` reads them - every property
stored with the message, user properties and system ones alike (``TAGS``, ``KEYS``, ``UNIQ_KEY``,
``DELAY``, ...) - evaluated by the selector; it matches only when the expression answers true.
"""

from __future__ import annotations

from protocol.errors import ProtocolError
from protocol.message import raw_properties
from protocol.message_properties import string_to_properties
from server.broker.selector import Expression, SelectorSyntaxError, compile_selector, matches

__all__ = [
    "SQL92",
    "TAG",
    "FilterCompileError",
    "SqlRecordFilter",
    "compile_filter",
    "is_tag_type",
]

#: ``ExpressionType.TAG`` and ``ExpressionType.SQL92``.
TAG = "TAG"
SQL92 = "SQL92"


class FilterCompileError(ValueError):
    """The expression does not compile for its type (the broker's ``MQFilterException``, or no
    filter at all for an unknown type)."""


def is_tag_type(expression_type: str | None) -> bool:
    """``ExpressionType.isTagType``."""
    return expression_type is None or expression_type == "" or expression_type == TAG


def compile_filter(expression_type: str, expression: str | None, *, v5: bool = False) -> Expression:
    """``FilterFactory.INSTANCE.get(type).compile(expression)``; ``FilterCompileError`` when it fails.
    ``v5``: a 5.x broker's grammar (the gRPC door's)."""
    if expression_type != SQL92:
        raise FilterCompileError(f"no filter for expression type {expression_type}")
    if expression is None:
        raise FilterCompileError("Expression can't be null!")
    try:
        return compile_selector(expression, v5=v5)
    except SelectorSyntaxError as exc:
        raise FilterCompileError(f"Invalid MessageSelector. {exc}") from None


class SqlRecordFilter:
    """``isMatchedByCommitLog`` of an SQL92 subscription: the record's properties, evaluated."""

    __slots__ = ("expression",)

    def __init__(self, expression: Expression) -> None:
        self.expression = expression

    def __call__(self, record: memoryview) -> bool:
        try:
            raw = raw_properties(record)
        except ProtocolError:
            # ``decodeProperties`` answers null for a record it cannot read: every property missing.
            return matches(self.expression, {})
        return matches(self.expression, string_to_properties(raw.decode("utf-8", "replace")))
