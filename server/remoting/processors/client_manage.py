"""Client bookkeeping the broker answers but this read-only server has no use for.

Java clients heartbeat every broker in their routes, unregister on shutdown, and ``mqadmin
queryMsgById`` asks who consumes the topic. The answers mirror the 4.9.7 broker's: SUCCESS for a
well-formed heartbeat (whose body must be HeartbeatData JSON, as the broker decodes it), SUCCESS with
an empty header map for UNREGISTER_CLIENT, and an empty ``groupList`` for QUERY_TOPIC_CONSUME_BY_WHO,
which ends mqadmin's message-track step. ``clientID`` and ``topic`` are ``@CFNotNull``, but the 4.9.7
broker's header decoder only logs a missing one and carries on with null, so both answer SUCCESS
without them too (checked against the real broker, over JSON and ROCKETMQ: RELIABILITY.md).
"""

from __future__ import annotations

import msgspec

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from server.remoting.reply import system_error

#: ``GroupList`` with no groups, as fastjson writes it.
EMPTY_GROUP_LIST = b'{"groupList":[]}'

_decode_json = msgspec.json.Decoder().decode


def heart_beat(request: RemotingCommand) -> RemotingCommand:
    body = request.body
    try:
        decoded = _decode_json(bytes(body)) if body else None
    except (msgspec.DecodeError, RecursionError):  # RecursionError: JSON nested ~1000 levels deep
        decoded = None
    if not isinstance(decoded, dict):
        return system_error(request, "HeartbeatData: the request body is missing or is not a JSON object")
    return request.make_response(ResponseCode.SUCCESS)


def unregister_client(request: RemotingCommand) -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, ext_fields={})


def query_topic_consume_by_who(request: RemotingCommand) -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, body=EMPTY_GROUP_LIST)
