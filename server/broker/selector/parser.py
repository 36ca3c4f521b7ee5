"""``SelectorParser``: a message selector's text to its expression tree, or a syntax error.

The grammar is 4.9.7's ``SelectorParser.jj``, rule for rule (a hand-written recursive descent: the
JavaCC parser stops at the first token that cannot continue the expression and ignores the rest,
and reads tokens only as it goes, which a grammar library's parse of the whole text would not
reproduce)::

    selector    := or                                  (must be a condition)
    or          := and (OR and)*
    and         := equality (AND equality)*
    equality    := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
    comparison  := unary ( ('>'|'>='|'<'|'<=') unary | BETWEEN unary AND unary
                         | NOT BETWEEN unary AND unary | IN '(' string (',' string)* ')'
                         | NOT IN '(' string (',' string)* ')'
                         | [NOT] (CONTAINS|STARTSWITH|ENDSWITH) string )*      (5.x only)
    unary       := '+' unary | '-' unary | NOT unary | primary
    primary     := literal | identifier | '(' or ')'

So ``NOT`` binds tighter than any comparison (``NOT a > 5`` compares ``NOT a`` and is refused; write
``NOT (a > 5)``), ``AND`` tighter than ``OR``. The checks the broker makes while building the tree
are made here too, each a syntax error: an operand of ``> >= < <=`` (and so of ``BETWEEN``) may not
be a string, boolean or null literal nor a condition; ``= NULL`` and ``<> NULL`` are refused (``IS
NULL`` is the way); ``TRUE = 1`` (a boolean literal against another literal) is refused; ``BETWEEN``
two literals needs the low one not above the high one; ``IN`` needs a property on its left; a
decimal literal must fit a ``long``, a floating point one must be finite and not zero (Java's
``value < Double.MIN_VALUE`` check); the whole must be a condition (a comparison, a logical
operator, ``TRUE``/``FALSE``/``NULL`` or a bare property).

Bounds (ours): nesting of parentheses and unary operators at most ``MAX_NESTING`` deep, the tree at
most ``MAX_DEPTH`` deep, so neither parsing nor evaluating can exhaust the stack (the broker's
``StackOverflowError`` would fail the compile the same way); an expression at most
``MAX_EXPRESSION_LENGTH`` characters, so one compile costs at most some tens of milliseconds on the
event loop and the cache of compiled expressions stays small (no selector a person writes comes
near it; the broker has no such bound).
"""

from __future__ import annotations

from functools import lru_cache

from server.broker.selector.expressions import (
    And,
    BooleanCast,
    BooleanConstant,
    Constant,
    Equal,
    Expression,
    In,
    Negate,
    Not,
    Or,
    Ordering,
    Property,
    StringMatch,
)
from server.broker.selector.java_values import EvaluationError, JavaLong, java_compare
from server.broker.selector.lexer import KEYWORDS, KEYWORDS_5, Lexer, SelectorSyntaxError, Token

__all__ = ["MAX_DEPTH", "MAX_EXPRESSION_LENGTH", "MAX_NESTING", "compile_selector"]

#: Deepest nesting of parentheses and unary operators the parser follows.
MAX_NESTING = 64
#: Deepest expression tree kept (AND/OR chains are flat, so this is about nesting).
MAX_DEPTH = 128
#: Longest expression compiled (characters).
MAX_EXPRESSION_LENGTH = 8192

_TRUE = BooleanConstant(True)
_FALSE = BooleanConstant(False)
_NULL = BooleanConstant(None)
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_DOUBLE_MIN_VALUE = 5e-324
_ORDERINGS = (">", ">=", "<", "<=")


def _describe(expression: Expression) -> str:
    if isinstance(expression, Constant):
        value = expression.value
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return repr(value) if isinstance(value, float) else str(int(value))  # type: ignore[call-overload]
    if isinstance(expression, Property):
        return expression.name
    return "(condition)"


def _checked(expression: Expression) -> Expression:
    if expression.depth > MAX_DEPTH:
        raise SelectorSyntaxError(f"the expression is nested more than {MAX_DEPTH} deep")
    return expression


def _check_ordering_operand(expression: Expression) -> None:
    """``checkLessThanOperand``: only numbers, properties and non-condition expressions."""
    if isinstance(expression, Constant):
        value = expression.value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return
        raise SelectorSyntaxError(f"Value '{_describe(expression)}' cannot be compared.")
    if expression.boolean:
        raise SelectorSyntaxError(f"Value '{_describe(expression)}' cannot be compared.")


def _ordering(left: Expression, op: str, right: Expression) -> Expression:
    _check_ordering_operand(left)
    _check_ordering_operand(right)
    return _checked(Ordering(left, op, right))


def _equal(left: Expression, right: Expression) -> Expression:
    """``createEqual``: no null literal on either side, no boolean literal against another literal."""
    for side in (left, right):
        if isinstance(side, Constant) and side.value is None:
            raise SelectorSyntaxError(f"'{_describe(side)}' cannot be compared.")
    if isinstance(left, Constant) and isinstance(right, Constant):
        if left.boolean and not right.boolean:
            raise SelectorSyntaxError(f"'{_describe(left)}' cannot be compared with '{_describe(right)}'")
    return _checked(Equal(left, right))


def _between(value: Expression, low: Expression, high: Expression) -> Expression:
    if isinstance(low, Constant) and isinstance(high, Constant):
        if low.value is None or high.value is None:
            raise SelectorSyntaxError("Illegal values of between, values can not be null!")
        try:
            order = java_compare(high.value, low.value)
        except EvaluationError as exc:
            raise SelectorSyntaxError(str(exc)) from None
        if order < 0:
            raise SelectorSyntaxError(
                f"Illegal values of between, left value({_describe(low)}) must less than or equal to "
                f"right value({_describe(high)})"
            )
    return _checked(And.of(_ordering(value, ">=", low), _ordering(value, "<=", high)))


def _decimal(image: str) -> Constant:
    """``createFromDecimal``: an ``Integer`` when it fits one, else a ``Long``."""
    digits = image[:-1] if image[-1] in "lL" else image
    value = int(digits)
    if value > _LONG_MAX:
        raise SelectorSyntaxError(f'java.lang.NumberFormatException: For input string: "{digits}"')
    return Constant(value if value <= (1 << 31) - 1 else JavaLong(value))


def _float(image: str) -> Constant:
    """``createFloat``: a ``Double``, refused when infinite or below ``Double.MIN_VALUE``."""
    value = float(image)
    if value == float("inf"):
        raise SelectorSyntaxError(f"{image} is greater than 1.7976931348623157E308")
    if value < _DOUBLE_MIN_VALUE:
        raise SelectorSyntaxError(f"{image} is less than 4.9E-324")
    return Constant(value)


def _string(image: str) -> str:
    return image[1:-1].replace("''", "'")


_STRING_MATCHES = ("CONTAINS", "STARTSWITH", "ENDSWITH")


class _Parser:
    __slots__ = ("_lexer", "_nesting", "_tokens", "_v5")

    def __init__(self, text: str, v5: bool) -> None:
        self._lexer = Lexer(text, KEYWORDS_5 if v5 else KEYWORDS)
        self._tokens: list[Token] = []
        self._nesting = 0
        self._v5 = v5

    # -- tokens ------------------------------------------------------------------------------

    def _peek(self, ahead: int = 0) -> Token:
        while len(self._tokens) <= ahead:
            self._tokens.append(self._lexer.next_token())
        return self._tokens[ahead]

    def _take(self, kind: str | None = None) -> Token:
        token = self._peek()
        if kind is not None and token.kind != kind:
            raise self._unexpected(token, kind)
        self._tokens.pop(0)
        return token

    @staticmethod
    def _unexpected(token: Token, expected: str | None = None) -> SelectorSyntaxError:
        wanted = f' Was expecting: "{expected}"' if expected else ""
        return SelectorSyntaxError(f'Encountered "{token.image}" at line 1, column {token.column}.{wanted}')

    # -- grammar -----------------------------------------------------------------------------

    def selector(self) -> Expression:
        return self._as_condition(self._or())

    def _as_condition(self, expression: Expression) -> Expression:
        """``asBooleanExpression``: a condition as it is, a property cast, anything else refused."""
        if expression.boolean:
            return expression
        if isinstance(expression, Property):
            return _checked(BooleanCast(expression))
        raise SelectorSyntaxError(f"Expression will not result in a boolean value: {_describe(expression)}")

    def _or(self) -> Expression:
        left = self._and()
        if self._peek().kind != "OR":
            return left
        operands = [self._as_condition(left)]
        while self._peek().kind == "OR":
            self._take()
            operands.append(self._as_condition(self._and()))
        # one chain for the whole run: the broker's left-nested pairs, evaluated alike
        return _checked(Or.of_all(operands))

    def _and(self) -> Expression:
        left = self._equality()
        if self._peek().kind != "AND":
            return left
        operands = [self._as_condition(left)]
        while self._peek().kind == "AND":
            self._take()
            operands.append(self._as_condition(self._equality()))
        return _checked(And.of_all(operands))

    def _equality(self) -> Expression:
        left = self._comparison()
        while True:
            kind = self._peek().kind
            if kind == "=":
                self._take()
                left = _equal(left, self._comparison())
            elif kind == "<>":
                self._take()
                left = _checked(Not(_equal(left, self._comparison())))
            elif kind == "IS":
                if self._peek(1).kind == "NULL":
                    self._take()
                    self._take()
                    left = _checked(Equal(left, _NULL))
                else:
                    self._take()
                    self._take("NOT")
                    self._take("NULL")
                    left = _checked(Not(_checked(Equal(left, _NULL))))
            else:
                return left

    def _comparison(self) -> Expression:
        left = self._unary()
        while True:
            kind = self._peek().kind
            if kind in _ORDERINGS:
                self._take()
                left = _ordering(left, kind, self._unary())
            elif kind == "BETWEEN":
                self._take()
                low = self._unary()
                self._take("AND")
                left = _between(left, low, self._unary())
            elif kind == "IN":
                self._take()
                left = self._in(left, negated=False)
            elif kind in _STRING_MATCHES and self._v5:
                self._take()
                left = _checked(StringMatch(left, kind, _string(self._take("STRING").image), False))
            elif kind == "NOT":
                following = self._peek(1).kind
                if following in _STRING_MATCHES and self._v5:
                    self._take()
                    self._take()
                    left = _checked(StringMatch(left, following, _string(self._take("STRING").image), True))
                elif following == "BETWEEN":
                    self._take()
                    self._take()
                    low = self._unary()
                    self._take("AND")
                    high = self._unary()
                    left = _checked(Or.of(_ordering(left, "<", low), _ordering(left, ">", high)))
                elif following == "IN":
                    self._take()
                    self._take()
                    left = self._in(left, negated=True)
                else:
                    raise self._unexpected(self._peek(1))
            else:
                return left

    def _in(self, left: Expression, *, negated: bool) -> Expression:
        self._take("(")
        values = [_string(self._take("STRING").image)]
        while self._peek().kind == ",":
            self._take()
            values.append(_string(self._take("STRING").image))
        self._take(")")
        if not isinstance(left, Property):
            raise SelectorSyntaxError(f"Expected a property for In expression, got: {_describe(left)}")
        return _checked(In(left, values, negated))

    def _unary(self) -> Expression:
        self._nesting += 1
        if self._nesting > MAX_NESTING:
            raise SelectorSyntaxError(f"the expression is nested more than {MAX_NESTING} deep")
        try:
            kind = self._peek().kind
            if kind == "+":
                self._take()
                return self._unary()
            if kind == "-":
                self._take()
                return _checked(Negate(self._unary()))
            if kind == "NOT":
                self._take()
                return _checked(Not(self._as_condition(self._unary())))
            return self._primary()
        finally:
            self._nesting -= 1

    def _primary(self) -> Expression:
        token = self._take()
        kind = token.kind
        if kind == "STRING":
            return Constant(_string(token.image))
        if kind == "DECIMAL":
            return _decimal(token.image)
        if kind == "FLOAT":
            return _float(token.image)
        if kind == "TRUE":
            return _TRUE
        if kind == "FALSE":
            return _FALSE
        if kind == "NULL":
            return _NULL
        if kind == "ID":
            return Property(token.image)
        if kind == "(":
            inner = self._or()
            self._take(")")
            return inner
        raise self._unexpected(token)


@lru_cache(maxsize=128)
def _compile(text: str, v5: bool) -> Expression | SelectorSyntaxError:
    if len(text) > MAX_EXPRESSION_LENGTH:
        return SelectorSyntaxError(f"the expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        return _Parser(text, v5).selector()
    except SelectorSyntaxError as exc:
        return exc


def compile_selector(text: str, *, v5: bool = False) -> Expression:
    """``SelectorParser.parse``: the expression of ``text``; ``SelectorSyntaxError`` when it does not
    compile. ``v5``: the 5.x grammar (a 5.x broker's, behind the gRPC Proxy), which adds ``CONTAINS``,
    ``STARTSWITH`` and ``ENDSWITH``. Results (failures too) are kept for the last 128 texts, as the
    broker keeps 100."""
    result = _compile(text, v5)
    if isinstance(result, SelectorSyntaxError):
        raise SelectorSyntaxError(*result.args)
    return result
