"""SYSTEM_ERROR, the broker's catch-all answer, shared by the dispatcher and the processors.

``RemotingCommand.make_response`` (protocol) already answers as the Java broker does (same opaque,
request's serialization, the broker's version and language); this only names the one error answer
several places give, and its form for a request the broker failed on with an exception.
"""

from __future__ import annotations

from protocol.codes import ResponseCode, SerializeType
from protocol.command import RemotingCommand


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
