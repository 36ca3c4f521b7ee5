"""The SQL92 selector against 4.9.7's rules (``SelectorParser.jj``, ``ComparisonExpression``,
``LogicExpression``, ``UnaryExpression``, ``ExpressionMessageFilter``).

Every expected value below was worked out by hand from the Java sources, not by running our code:
properties are strings; a string compared with an ``Integer`` literal is read by
``Integer.valueOf`` (a ``NumberFormatException`` fails the whole evaluation, so the message does
not match even when an ``OR`` would have been true later); two strings under ``> >= < <=`` are read
as doubles; null is "unknown", and only ``True`` delivers.
"""

from __future__ import annotations

import pytest

from server.broker.selector import SelectorSyntaxError, compile_selector, matches
from server.broker.selector.parser import MAX_EXPRESSION_LENGTH

A10_BX = {"a": "10", "b": "x"}


@pytest.mark.parametrize(
    ("expression", "properties", "expected"),
    [
        # the brief's example and the three-valued logic around a missing property
        ("a > 5 AND b = 'x'", A10_BX, True),
        ("a > 5 AND b = 'x'", {"a": "3", "b": "x"}, False),
        ("a > 5 AND b = 'x'", {"b": "x"}, False),  # null AND true = null
        ("a > 5 OR b = 'x'", {"b": "x"}, True),  # null OR true = true
        ("a > 5 OR b = 'y'", {"b": "x"}, False),  # null OR false = null
        ("NOT (a > 5)", {}, False),  # NOT null = null
        ("NOT (a > 5)", {"a": "3"}, True),
        ("a <> 'x'", {}, False),
        ("a <> 'x'", {"a": "y"}, True),
        ("a <> 'x'", {"a": "x"}, False),
        # keywords in any case; property names as written
        ("a > 5 and b = 'x'", A10_BX, True),
        ("A > 5", A10_BX, False),
        # string against Integer literal: Integer.valueOf(property)
        ("a = 5", {"a": "5"}, True),
        ("a = 5", {"a": "05"}, True),
        ("a = 5", {"a": "+5"}, True),
        ("a = 5", {"a": "5.0"}, False),  # NumberFormatException
        ("a = 5", {"a": " 5"}, False),  # no trimming for Integer.valueOf
        ("a > 5", {"a": "5.5"}, False),  # NumberFormatException, not 5.5 > 5
        ("a > 5", {"a": "3000000000"}, False),  # past Integer's range
        ("a > 3000000000", {"a": "3000000001"}, True),  # a Long literal: Long.valueOf
        ("a > 5.0", {"a": "5.5"}, True),  # a Double literal: Double.valueOf
        ("a > 5.0", {"a": " 7 "}, True),  # Double.valueOf trims
        ("a > 5.0", {"a": "1_000"}, False),  # not Java's syntax
        ("a > 5.0", {"a": "Infinity"}, True),
        ("a > 5.0", {"a": "inf"}, False),
        ("a = 1.0", {"a": "1"}, True),
        ("a >= 1e1", {"a": "10"}, True),
        ("a = 10L", {"a": "10"}, True),
        ("a > -5", {"a": "-3"}, True),
        ("a < -5", {"a": "-3"}, False),
        # an error anywhere fails the message, unless AND/OR stopped before reaching it
        ("a = 5 OR b = 'x'", {"a": "abc", "b": "x"}, False),
        ("b = 'x' OR a = 5", {"a": "abc", "b": "x"}, True),
        ("b = 'y' AND a = 5", {"a": "abc", "b": "x"}, False),
        # two properties under an ordering compare as numbers, never as text
        ("a > b", {"a": "10", "b": "9"}, True),
        ("a > b", {"a": "x", "b": "9"}, False),
        ("a = b", {"a": "x", "b": "x"}, True),
        # strings
        ("b = 'x'", A10_BX, True),
        ("b = 5", A10_BX, False),
        ("a = 'it''s'", {"a": "it's"}, True),
        ("TAGS = 'TagA'", {"TAGS": "TagA"}, True),
        # IN / NOT IN: strings only, null for a missing property
        ("a IN ('x', 'y')", {"a": "y"}, True),
        ("a IN ('x', 'y')", {"a": "z"}, False),
        ("a IN ('x', 'y')", {}, False),
        ("a NOT IN ('x', 'y')", {"a": "z"}, True),
        ("a NOT IN ('x', 'y')", {"a": "x"}, False),
        ("a NOT IN ('x', 'y')", {}, False),
        # BETWEEN is >= AND <=, NOT BETWEEN is < OR >
        ("a BETWEEN 1 AND 10", {"a": "10"}, True),
        ("a BETWEEN 1 AND 10", {"a": "1"}, True),
        ("a BETWEEN 1 AND 10", {"a": "11"}, False),
        ("a NOT BETWEEN 1 AND 10", {"a": "11"}, True),
        ("a NOT BETWEEN 1 AND 10", {"a": "5"}, False),
        ("a NOT BETWEEN 1 AND 10", {}, False),
        ("a BETWEEN 1 AND 10 AND b = 'x'", A10_BX, True),
        # IS NULL / IS NOT NULL
        ("a IS NULL", {}, True),
        ("a IS NULL", {"a": "1"}, False),
        ("a IS NOT NULL", {"a": "1"}, True),
        ("a IS NOT NULL", {}, False),
        # literals and bare properties as conditions
        ("TRUE", {}, True),
        ("FALSE", {}, False),
        ("NULL", {}, False),
        ("a", {"a": "true"}, False),  # a property is a string, never a boolean
        ("NOT a", {"a": "true"}, True),
        ("NOT a", {}, False),
        ("a = TRUE", {"a": "TRUE"}, True),  # Boolean.valueOf(property)
        ("a = FALSE", {"a": "yes"}, True),
        # precedence: AND before OR, parentheses first
        ("a = 1 OR b = 2 AND c = 3", {"a": "1"}, True),
        ("(a = 1 OR b = 2) AND c = 3", {"a": "1"}, False),
        ("a = 1 OR b = 2 AND c = 3", {"b": "2", "c": "3"}, True),
        ("a = 1 OR b = 2 AND c = 3", {"c": "3"}, False),
        # the parser stops at the first token that cannot continue, and ignores the rest
        ("a = 1 b c", {"a": "1"}, True),
        ("a = 1 /* c */ AND b = 2 -- tail\n", {"a": "1", "b": "2"}, True),
    ],
)
def test_evaluation(expression: str, properties: dict[str, str], expected: bool) -> None:
    assert matches(compile_selector(expression), properties) is expected


@pytest.mark.parametrize(
    "expression",
    [
        "",
        "a >",
        "a > 'x'",  # strings cannot be ordered
        "a > TRUE",
        "NOT a > 5",  # NOT takes 'a' only, and a condition cannot be ordered
        "a = NULL",
        "TRUE = 1",
        "5",
        "'x'",
        "a BETWEEN 5 AND 1",
        "a BETWEEN 'a' AND 'b'",
        "a IN (1, 2)",
        "a IN ()",
        "(a > 1) IN ('x')",
        "a > 0.0",  # below Double.MIN_VALUE
        "a > 9223372036854775808",
        "a > 5 #",  # the token after the expression is read, and '#' is none
        "a = 'unterminated",
        "a > 5 NOT",
        "a IS 5",
        "(a > 1",
        "(" * 100 + "a" + ")" * 100,  # our nesting bound
    ],
)
def test_syntax_errors(expression: str) -> None:
    with pytest.raises(SelectorSyntaxError):
        compile_selector(expression)


def test_long_chains_cost_no_recursion() -> None:
    terms = 560  # 8,175 characters, just under the length bound
    expression = compile_selector(" AND ".join(f"p{i} = {i}" for i in range(terms)))
    assert matches(expression, {f"p{i}": str(i) for i in range(terms)}) is True
    assert matches(expression, {f"p{i}": str(i) for i in range(terms - 1)}) is False


def test_expressions_past_the_length_bound_are_refused() -> None:
    compile_selector("a = '" + "x" * (MAX_EXPRESSION_LENGTH - 6) + "'")
    with pytest.raises(SelectorSyntaxError):
        compile_selector("a = '" + "x" * (MAX_EXPRESSION_LENGTH - 5) + "'")


@pytest.mark.parametrize(
    ("expression", "properties", "expected"),
    [
        ("a CONTAINS 'bc'", {"a": "abcd"}, True),
        ("a CONTAINS 'x'", {"a": "abcd"}, False),
        ("a CONTAINS 'x'", {}, False),
        ("a NOT CONTAINS 'x'", {"a": "abcd"}, True),
        ("a NOT CONTAINS 'x'", {}, False),  # false, not null, for a missing value
        ("NOT (a CONTAINS 'x')", {}, True),  # so NOT of it is true
        ("a CONTAINS ''", {"a": "abcd"}, False),  # an empty search never matches
        ("a NOT CONTAINS ''", {"a": "abcd"}, False),
        ("a STARTSWITH 'ab'", {"a": "abcd"}, True),
        ("a NOT STARTSWITH 'ab'", {"a": "abcd"}, False),
        ("a ENDSWITH 'cd' AND b startswith 'x'", {"a": "abcd", "b": "xy"}, True),
        ("a NOT ENDSWITH 'cd'", {"a": "abce"}, True),
    ],
)
def test_the_5x_string_operators(expression: str, properties: dict[str, str], expected: bool) -> None:
    assert matches(compile_selector(expression, v5=True), properties) is expected


def test_the_5x_words_are_reserved_there_only() -> None:
    # 4.9.7: 'contains' is a property name; the 5.x grammar reserves it
    assert matches(compile_selector("contains = 1"), {"contains": "1"}) is True
    with pytest.raises(SelectorSyntaxError):
        compile_selector("contains = 1", v5=True)
    # 4.9.7 stops before the unknown word and takes 'a' alone, a string and so never true
    assert matches(compile_selector("a CONTAINS 'b'"), {"a": "abc"}) is False
    with pytest.raises(SelectorSyntaxError):
        compile_selector("a CONTAINS 5", v5=True)
