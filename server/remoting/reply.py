"""SYSTEM_ERROR, the broker's catch-all answer, shared by the dispatcher and the processors, and
the request the compiled request path answers for (``compiled_request``).

``RemotingCommand.make_response`` (protocol) already answers as the Java broker does (same opaque,
request's serialization, the broker's version and language); this only names the one error answer
several places give, and its form for a request the broker failed on with an exception.
"""

from __future__ import annotations

from typing import NamedTuple

from protocol.codes import LanguageCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand


class Answered(NamedTuple):
    """What a request's coroutine returns when its answer was already written on its connection by
    someone else (a held pull answered by the SEND that woke it: ``server.store_changes``): the
    answer's code, for the request counts; the connection writes nothing more for it."""

    code: int


def compiled_request(code: int, opaque: int) -> RemotingCommand:
    """The request an answer of the compiled request path is made for, when the C side read only
    its code and opaque: a Java client's, JSON (all ``make_response`` and a failure's answer take
    from a request)."""
    return RemotingCommand(code, LanguageCode.JAVA, 0, opaque, 0, None, None, None, SerializeType.JSON)


def system_error(request: RemotingCommand, remark: str) -> RemotingCommand:
    """SYSTEM_ERROR (1) with ``remark``: the broker's answer to a request it could not process."""
    return request.make_response(ResponseCode.SYSTEM_ERROR, remark=remark)


def exception_answer(request: RemotingCommand, remark: str) -> RemotingCommand:
    """SYSTEM_ERROR for a request the broker answers from an exception its processor threw.

    ``NettyRemotingAbstract`` builds that answer with ``createResponseCommand``, which never copies
    the request's serialization: it is JSON whatever the client used (golden: every NPE, fastjson
    and ``checkFields`` answer of the ROCKETMQ run in ``consume_side_broker_4.9.7.json``).
    """
    answer = request.make_response(ResponseCode.SYSTEM_ERROR, remark=remark)
    answer.serialize_type = SerializeType.JSON
    return answer
