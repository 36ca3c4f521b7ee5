"""The tokens of a message selector, read one at a time as the parser asks for them.

``SelectorParser.jj``'s token rules (4.9.7): blanks `` \\t\\n\\r\\f``, ``-- ...`` comments ended by a
line break and ``/* ... */`` comments are skipped; the keywords ``NOT AND OR BETWEEN IN TRUE FALSE
NULL IS``, decimal literals (``0`` or ``[1-9][0-9]*`` with an optional ``L``), floating point
literals (``5.5``, ``5.``, ``.5``, ``5E10``...), string literals in single quotes (``''`` is a
quote), identifiers ``[a-z_$][a-z0-9_$]*`` - all of these in any case - and the operators
``= <> > >= < <= ( , ) + -`` (the 5.x grammar also reserves ``CONTAINS STARTSWITH ENDSWITH``).
As in JavaCC the longest match wins and, between matches of one
length, the rule declared first (so ``and`` is the keyword, ``andy`` an identifier).

The reading is lazy because JavaCC's is: the parser stops at the first token that cannot continue
the expression, and nothing after that token is ever read - so ``a > 5 b c`` is accepted (as
``a > 5``) while a character no rule matches is an error only where the parser reaches it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KEYWORDS", "KEYWORDS_5", "Lexer", "SelectorSyntaxError", "Token"]


class SelectorSyntaxError(ValueError):
    """The selector does not compile (the broker's ``MQFilterException``)."""


#: Reserved words, in their declaration order.
KEYWORDS = ("NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS")
#: The 5.x grammar's reserved words (``CONTAINS``, ``STARTSWITH``, ``ENDSWITH`` added in 5.1).
KEYWORDS_5 = (*KEYWORDS, "CONTAINS", "STARTSWITH", "ENDSWITH")

_SKIPPED = re.compile(r"[ \t\n\r\f]+|--[^\n\r]*(?:\r\n|\n|\r)|/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")

#: (kind, pattern) in declaration order; keywords are found through the identifier rule.
_RULES = (
    ("DECIMAL", re.compile(r"0|[1-9][0-9]*[lL]?")),
    (
        "FLOAT",
        re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"),
    ),
    ("STRING", re.compile(r"'(?:''|[^'])*'")),
    ("ID", re.compile(r"[a-zA-Z_$][a-zA-Z0-9_$]*")),
    ("OP", re.compile(r"<>|>=|<=|[=><(),+-]")),
)


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its kind (a keyword, ``DECIMAL``, ``FLOAT``, ``STRING``, ``ID``, the operator
    itself, or ``EOF``), its text, and its column (1-based) for error messages."""

    kind: str
    image: str
    column: int


class Lexer:
    """Tokens of ``text`` from the start, on demand; ``keywords``: the grammar's reserved words."""

    __slots__ = ("_keywords", "_pos", "_text")

    def __init__(self, text: str, keywords: tuple[str, ...] = KEYWORDS) -> None:
        self._text = text
        self._pos = 0
        self._keywords = keywords

    def next_token(self) -> Token:
        text = self._text
        while (skipped := _SKIPPED.match(text, self._pos)) is not None:
            self._pos = skipped.end()
        start = self._pos
        if start >= len(text):
            return Token("EOF", "<EOF>", start + 1)
        best_kind, best_end = "", start
        for kind, pattern in _RULES:
            found = pattern.match(text, start)
            if found is not None and found.end() > best_end:
                best_kind, best_end = kind, found.end()
        if not best_kind:
            raise SelectorSyntaxError(
                f'Lexical error at line 1, column {start + 1}.  Encountered: "{text[start]}"'
            )
        image = text[start:best_end]
        self._pos = best_end
        if best_kind == "ID" and image.upper() in self._keywords:
            best_kind = image.upper()
        elif best_kind == "OP":
            best_kind = image
        return Token(best_kind, image, start + 1)
