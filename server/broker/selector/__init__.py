"""RocketMQ's SQL92 message selector (4.9.7 ``org.apache.rocketmq.filter``): grammar, evaluation.

``compile_selector(text)`` gives an ``Expression`` (or raises ``SelectorSyntaxError``) and
``matches(expression, properties)`` says whether a message with those properties is delivered.
Sans-IO: the broker's filter (``server.broker.message_filter``) feeds it the properties of stored
records.
"""

from server.broker.selector.expressions import Expression, matches
from server.broker.selector.lexer import SelectorSyntaxError
from server.broker.selector.parser import compile_selector

__all__ = ["Expression", "SelectorSyntaxError", "compile_selector", "matches"]
