"""The answer to every request code the query server does not implement, worded as the broker's."""

from __future__ import annotations

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand


def not_supported_remark(code: int) -> str:
    """``NettyRemotingAbstract``'s remark for an unknown code (the leading space is the broker's)."""
    return f" request type {code} not supported"


def not_supported(request: RemotingCommand) -> RemotingCommand:
    """REQUEST_CODE_NOT_SUPPORTED (3) for ``request``."""
    return request.make_response(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=not_supported_remark(request.code)
    )
