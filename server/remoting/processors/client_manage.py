"""Client bookkeeping the broker answers but this read-only server has no use for.

Java clients heartbeat every broker in their routes, unregister on shutdown, and ``mqadmin
queryMsgById`` asks who consumes the topic. The answers mirror the 4.9.7 broker's: SUCCESS for a
well-formed heartbeat (whose body must be HeartbeatData JSON, as the broker decodes it, within the
bounds of ``protocol.heartbeat``; the bodies of UNREGISTER_CLIENT and GET_CONSUMER_LIST_BY_GROUP are
never read, as the broker never reads them), SUCCESS with
an empty header map for UNREGISTER_CLIENT, and an empty ``groupList`` for QUERY_TOPIC_CONSUME_BY_WHO,
which ends mqadmin's message-track step. ``clientID`` and ``topic`` are ``@CFNotNull``, but the 4.9.7
broker's header decoder only logs a missing one and carries on with null, so both answer SUCCESS
without them too (checked against the real broker, over JSON and ROCKETMQ: RELIABILITY.md).
"""

from __future__ import annotations

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.heartbeat import AnyObject, HeartbeatBodyError, decode_heartbeat
from server.remoting.reply import system_error

#: ``GroupList`` with no groups, as fastjson writes it.
EMPTY_GROUP_LIST = b'{"groupList":[]}'


def heart_beat(request: RemotingCommand) -> RemotingCommand:
    """SUCCESS for a HeartbeatData JSON object, SYSTEM_ERROR (as the broker's failed decode) else.

    Nothing in the body is kept, so it is decoded as ``AnyObject``: its contents are skipped, not
    built, and ``protocol.heartbeat`` refuses an oversized body before parsing it.
    """
    try:
        decode_heartbeat(request.body, AnyObject)
    except HeartbeatBodyError as exc:
        return system_error(request, str(exc))
    return request.make_response(ResponseCode.SUCCESS)


def unregister_client(request: RemotingCommand) -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, ext_fields={})


def query_topic_consume_by_who(request: RemotingCommand) -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, body=EMPTY_GROUP_LIST)
