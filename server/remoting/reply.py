"""SYSTEM_ERROR, the broker's catch-all answer, shared by the dispatcher and the processors.

``RemotingCommand.make_response`` (protocol) already answers as the Java broker does (same opaque,
request's serialization, the broker's version and language); this only names the one error answer
several places give.
"""

from __future__ import annotations

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand


def system_error(request: RemotingCommand, remark: str) -> RemotingCommand:
    """SYSTEM_ERROR (1) with ``remark``: the broker's answer to a request it could not process."""
    return request.make_response(ResponseCode.SYSTEM_ERROR, remark=remark)
