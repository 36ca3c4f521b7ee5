"""A compiled message selector: the expression tree and how each node evaluates.

The nodes and their answers are those of 4.9.7's ``org.apache.rocketmq.filter.expression``, a
three-valued logic where null means "unknown":

- a property is the message's property of that name, or null when it has none;
- ``=`` is null when only its left side is null, false when only its right side is, true when both
  are; otherwise true for ``equals``, else ``java_compare`` decides; ``<>`` is NOT of ``=``;
  ``IS NULL`` is ``=`` with a null constant (true exactly when the value is missing);
- ``> >= < <=`` are null when either side is null (the right side is not evaluated when the left
  is null); two strings are both read as doubles (``Double.valueOf``, an error when one does not
  parse), anything else goes through ``java_compare``;
- ``IN`` / ``NOT IN`` are null for a null or non-string value, else membership (negated);
- ``AND`` is false as soon as one side is false (the right side is not evaluated when the left is),
  null when a side is null, else true; ``OR`` the same with true; ``NOT`` of null is null;
- a property used as a condition (``WHERE a``) is null when missing and false unless it is a
  boolean - which a property value, a string, never is;
- ``-x`` negates a number, anything else is null;
- 5.x only: ``x CONTAINS 's'``, ``STARTSWITH``, ``ENDSWITH`` (and ``NOT ...``) are false, not null,
  for a missing or non-string value and for an empty search string.

A message matches only when the whole expression is ``True``; an ``EvaluationError`` anywhere (a
string that does not parse as the number it is compared with) makes it not match, whatever the rest
of the expression would have said. ``AND`` and ``OR`` chains are kept as one node with a list of
operands, evaluated left to right exactly as the broker's left-nested pairs are, so a long chain
costs no recursion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from server.broker.selector.java_values import (
    EvaluationError,
    JavaLong,
    java_compare,
    java_equals,
    parse_double,
)

__all__ = [
    "And",
    "BooleanCast",
    "BooleanConstant",
    "Constant",
    "Equal",
    "Expression",
    "In",
    "Negate",
    "Not",
    "Or",
    "Ordering",
    "Property",
    "StringMatch",
    "matches",
]

#: The properties an expression is evaluated over (a message's, all strings).
Properties = Mapping[str, str]


class Expression:
    """A node. ``boolean``: it is a Java ``BooleanExpression`` (a condition the grammar accepts
    where one is needed); ``depth``: the longest path below it, bounded by the parser."""

    __slots__ = ("depth",)

    boolean = False

    def __init__(self, *children: Expression) -> None:
        self.depth = 1 + max((child.depth for child in children), default=0)

    def evaluate(self, properties: Properties) -> object:
        raise NotImplementedError


class Constant(Expression):
    """A literal: a string, an ``Integer``, a ``Long`` or a ``Double``."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        super().__init__()
        self.value = value

    def evaluate(self, properties: Properties) -> object:
        return self.value


class BooleanConstant(Constant):
    """``TRUE``, ``FALSE`` or ``NULL`` (the grammar's ``BooleanConstantExpression``)."""

    __slots__ = ()

    boolean = True


class Property(Expression):
    """A message property by name (case-sensitive), null when the message has none."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def evaluate(self, properties: Properties) -> object:
        return properties.get(self.name)


def _wrap(value: int, bits: int) -> int:
    """Java's two's complement overflow of a negation."""
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half


class Negate(Expression):
    """Unary minus: a number negated, null for anything else."""

    __slots__ = ("operand",)

    def __init__(self, operand: Expression) -> None:
        super().__init__(operand)
        self.operand = operand

    def evaluate(self, properties: Properties) -> object:
        value = self.operand.evaluate(properties)
        kind = type(value)
        if kind is int:
            return _wrap(-value, 32)  # type: ignore[operator]
        if kind is JavaLong:
            return JavaLong(_wrap(-value, 64))  # type: ignore[operator]
        if kind is float:
            return -value  # type: ignore[operator]
        return None


class BooleanCast(Expression):
    """A property used as a condition."""

    __slots__ = ("operand",)

    boolean = True

    def __init__(self, operand: Expression) -> None:
        super().__init__(operand)
        self.operand = operand

    def evaluate(self, properties: Properties) -> object:
        value = self.operand.evaluate(properties)
        if value is None:
            return None
        return value if type(value) is bool else False


class Not(Expression):
    """``NOT``: null stays null."""

    __slots__ = ("operand",)

    boolean = True

    def __init__(self, operand: Expression) -> None:
        super().__init__(operand)
        self.operand = operand

    def evaluate(self, properties: Properties) -> object:
        value = self.operand.evaluate(properties)
        if value is None:
            return None
        return not value


class _Chain(Expression):
    """``AND`` / ``OR`` over operands in order: ``decisive`` (False for AND, True for OR) ends it."""

    __slots__ = ("operands",)

    boolean = True
    decisive = False

    def __init__(self, operands: Sequence[Expression]) -> None:
        super().__init__(*operands)
        self.operands = tuple(operands)

    @classmethod
    def of_all(cls, operands: Sequence[Expression]) -> Expression:
        """``((a op b) op c) ...`` as one chain, operands that are such chains themselves flattened
        into it (same answers, same order of evaluation)."""
        items: list[Expression] = []
        for side in operands:
            items.extend(side.operands if type(side) is cls else (side,))  # type: ignore[attr-defined]
        return cls(items)

    @classmethod
    def of(cls, left: Expression, right: Expression) -> Expression:
        """The pair ``left op right`` (``of_all`` of two)."""
        return cls.of_all((left, right))

    def evaluate(self, properties: Properties) -> object:
        decisive = self.decisive
        unknown = False
        for operand in self.operands:
            value = operand.evaluate(properties)
            if value is None:
                unknown = True
            elif value is decisive:
                return decisive
        return None if unknown else not decisive


class And(_Chain):
    __slots__ = ()

    decisive = False


class Or(_Chain):
    __slots__ = ()

    decisive = True


class Equal(Expression):
    """``=`` (and ``IS NULL``, which is ``=`` with a null constant)."""

    __slots__ = ("left", "right")

    boolean = True

    def __init__(self, left: Expression, right: Expression) -> None:
        super().__init__(left, right)
        self.left, self.right = left, right

    def evaluate(self, properties: Properties) -> object:
        left = self.left.evaluate(properties)
        right = self.right.evaluate(properties)
        if left is None or right is None:
            if left is None and right is None:
                return True
            return None if left is None else False
        if java_equals(left, right):
            return True
        return java_compare(left, right) == 0


class Ordering(Expression):
    """``>``, ``>=``, ``<`` or ``<=``."""

    __slots__ = ("left", "op", "right")

    boolean = True

    def __init__(self, left: Expression, op: str, right: Expression) -> None:
        super().__init__(left, right)
        self.left, self.op, self.right = left, op, right

    def evaluate(self, properties: Properties) -> object:
        left = self.left.evaluate(properties)
        if left is None:
            return None
        right = self.right.evaluate(properties)
        if right is None:
            return None
        if type(left) is str and type(right) is str:
            try:
                answer = java_compare(parse_double(left), parse_double(right))
            except EvaluationError as exc:
                raise EvaluationError(
                    f"It's illegal to compare string by '>=', '>', '<', '<='. lv={left}, rv={right}"
                ) from exc
        else:
            answer = java_compare(left, right)
        op = self.op
        if op == ">":
            return answer > 0
        if op == ">=":
            return answer >= 0
        if op == "<":
            return answer < 0
        return answer <= 0


class In(Expression):
    """``IN`` / ``NOT IN`` a list of string literals."""

    __slots__ = ("negated", "operand", "values")

    boolean = True

    def __init__(self, operand: Property, values: Sequence[str], negated: bool) -> None:
        super().__init__(operand)
        self.operand = operand
        self.values = frozenset(values)
        self.negated = negated

    def evaluate(self, properties: Properties) -> object:
        value = self.operand.evaluate(properties)
        if type(value) is not str:
            return None
        return (value in self.values) != self.negated


class StringMatch(Expression):
    """5.x's ``CONTAINS``, ``STARTSWITH``, ``ENDSWITH`` and their ``NOT`` forms: false - not null -
    for an empty search, a missing value or one that is not a string."""

    __slots__ = ("how", "negated", "operand", "search")

    boolean = True

    def __init__(self, operand: Expression, how: str, search: str, negated: bool) -> None:
        super().__init__(operand)
        self.operand, self.how, self.search, self.negated = operand, how, search, negated

    def evaluate(self, properties: Properties) -> object:
        if not self.search:
            return False
        value = self.operand.evaluate(properties)
        if type(value) is not str:
            return False
        how = self.how
        if how == "CONTAINS":
            found = self.search in value
        elif how == "STARTSWITH":
            found = value.startswith(self.search)
        else:
            found = value.endswith(self.search)
        return found != self.negated


def matches(expression: Expression, properties: Properties) -> bool:
    """Whether a message with these properties is delivered (``isMatchedByCommitLog``): only a
    ``True`` answer matches; null, false or an error in the evaluation do not."""
    try:
        return expression.evaluate(properties) is True
    except EvaluationError:
        return False
