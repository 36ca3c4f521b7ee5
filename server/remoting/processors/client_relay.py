"""The admin requests the broker passes on to consumers: INVOKE_BROKER_TO_RESET_OFFSET (222), which
it turns into RESET_CONSUMER_CLIENT_OFFSET (220) to each online member of the group
(``Broker2Client.resetOffset``), and GET_CONSUMER_RUNNING_INFO (307) / CONSUME_MESSAGE_DIRECTLY (309),
relayed to the one client named and its answer relayed back (``AdminBrokerProcessor.callConsumer``).

``mqadmin resetOffsetByTime``, ``consumerProgress`` (which asks each client's running info),
``consumerStatus`` and ``consumeMessage`` use them. As the broker: a client not online, or too old,
is SYSTEM_ERROR with its remark; the client's answer not coming within 10 s is CONSUME_MSG_TIMEOUT;
a connection failing on the way is SYSTEM_ERROR. CONSUME_MESSAGE_DIRECTLY carries the message: the
broker adds its name and the record the message id points at before passing it on. The reset's
offsets are computed by ``server.broker.offset_reset`` and only sent: each client moves and commits
its own offsets.
"""

from __future__ import annotations

import logging
import struct

from protocol.admin_bodies import QueueKey, encode_reset_offset_body
from protocol.codes import LanguageCode, RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    ResetOffsetRequestHeader,
    java_string,
)
from protocol.errors import MessageIdError
from protocol.java_hashmap import JavaHashMap, hashmap_order_by_hash
from protocol.message_id import decode_offset_msg_id
from server.broker.controller import BrokerController
from server.broker.offset_reset import V3_0_7_SNAPSHOT, ResetRefused, not_online_remark, reset_offsets
from server.remoting.channel import RemotingChannel
from server.remoting.processors.topic_admin import NOT_SET_REMARK
from server.remoting.reply import system_error

log = logging.getLogger(__name__)

#: ``Broker2Client.callClient``'s wait for the client's answer (s).
CALL_CLIENT_TIMEOUT_S = 10.0
#: ``MQVersion.Version.V3_1_8_SNAPSHOT.ordinal()``: older clients cannot be called.
V3_1_8_SNAPSHOT = 62


def not_online_consumer_remark(group: str, client_id: str) -> str:
    return f"The Consumer <{group}> <{client_id}> not online"


def too_old_remark(client_id: str, version: int) -> str:
    return (
        f"The Consumer <{client_id}> Version <{version}> too low to finish, "
        "please upgrade it to V3_1_8_SNAPSHOT"
    )


def reset_offset_body_for_c(offsets: list[tuple[QueueKey, int]]) -> bytes:
    """``ResetOffsetBodyForC``: the same table as a list of ``MessageQueueForC`` (C++ clients)."""
    ordered = hashmap_order_by_hash(offsets, lambda entry: entry[0].java_hash())
    rows = [
        key.json()[:-1].replace('"queueId"', f'"offset":{offset},"queueId"', 1) + "}"
        for key, offset in ordered
    ]
    return ('{"offsetTable":[' + ",".join(rows) + "]}").encode()


class ClientRelayProcessor:
    """Requests the broker answers by asking the group's clients."""

    def __init__(self, broker: BrokerController, *, call_timeout: float = CALL_CLIENT_TIMEOUT_S) -> None:
        self._broker = broker
        self._broker_name = broker.store.config.broker_name
        self._call_timeout = call_timeout

    # -- reset offsets ---------------------------------------------------------------------------

    def invoke_broker_to_reset_offset(self, request: RemotingCommand) -> RemotingCommand:
        header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        topic, group = java_string(header.topic), java_string(header.group)
        table = reset_offsets(
            self._broker, topic, group, header.timestamp, header.is_force, self._broker_name
        )
        if isinstance(table, ResetRefused):
            return request.make_response(table.code, remark=table.remark)
        is_c = request.language == LanguageCode.CPP
        body = reset_offset_body_for_c(table) if is_c else encode_reset_offset_body(table)
        fields = ResetOffsetRequestHeader(
            topic=topic, group=group, timestamp=header.timestamp
        ).to_ext_fields()
        consumer_group = self._broker.consumers.get(group)
        if consumer_group is None or not consumer_group.members:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE, remark=not_online_remark(group, topic, header.timestamp)
            )
        for info in list(consumer_group.members.values()):
            if info.version < V3_0_7_SNAPSHOT:
                return system_error(
                    request, f"the client does not support this feature. version={info.version}"
                )
            info.channel.send_oneway(
                RemotingChannel.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, fields, body)
            )
            log.info("[reset-offset] topic=%s group=%s sent to client %s", topic, group, info.client_id)
        # ``Broker2Client`` sets only the code and body on its default response, whose remark stays.
        return request.make_response(
            ResponseCode.SUCCESS, remark=NOT_SET_REMARK, body=encode_reset_offset_body(table)
        )

    # -- calls to one client ---------------------------------------------------------------------

    async def get_consumer_running_info(self, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        return await self._call_consumer(
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            request,
            java_string(header.consumer_group),
            java_string(header.client_id),
            request.body,
        )

    async def consume_message_directly(self, request: RemotingCommand) -> RemotingCommand:
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        ext_fields = dict(request.ext_fields or {})
        ext_fields["brokerName"] = self._broker_name
        try:
            offset = decode_offset_msg_id(java_string(header.msg_id)).offset
        except (MessageIdError, ValueError, struct.error) as exc:
            return system_error(request, f"CONSUME_MESSAGE_DIRECTLY: {exc}")
        record = self._broker.store.reader.view_message(offset)
        if record is None:
            return system_error(request, f"CONSUME_MESSAGE_DIRECTLY: no message at offset {offset}")
        return await self._call_consumer(
            RequestCode.CONSUME_MESSAGE_DIRECTLY,
            request,
            java_string(header.consumer_group),
            java_string(header.client_id),
            bytes(record),
            ext_fields,
        )

    async def _call_consumer(
        self,
        code: int,
        request: RemotingCommand,
        group: str,
        client_id: str,
        body: bytes | bytearray | memoryview | None,
        ext_fields: dict[str, str] | None = None,
    ) -> RemotingCommand:
        info = self._broker.consumers.find_member(group, client_id)
        if info is None:
            return system_error(request, not_online_consumer_remark(group, client_id))
        if info.version < V3_1_8_SNAPSHOT:
            return system_error(request, too_old_remark(client_id, info.version))
        # ``callConsumer`` hands the client the request's own ext-field map, a ``java.util.HashMap``
        # (brokerName put into it), so the client sees its fields in HashMap order, not the
        # caller's (golden: the relayed requests of ``consume_side_broker_4.9.7.json``).
        fields = JavaHashMap((request.ext_fields or {}) if ext_fields is None else ext_fields)
        call = RemotingChannel.request(code, fields.ordered(), bytes(body) if body else None)
        try:
            answer = await info.channel.invoke(call, self._call_timeout)
        except TimeoutError as exc:
            return request.make_response(
                ResponseCode.CONSUME_MSG_TIMEOUT, remark=f"consumer <{group}> <{client_id}> Timeout: {exc!r}"
            )
        except (ConnectionError, OSError) as exc:
            return system_error(request, f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
        return request.make_response(
            answer.code,
            remark=answer.remark,
            ext_fields=answer.ext_fields,
            body=answer.body,
            version=answer.version,
        )
