"""GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204) and GET_CONSUME_STATS (208)
for ``serve --writable``: who is online in a group, and where a group stands in its queues.

``mqadmin consumerConnection``, ``producerConnection`` and ``consumerProgress`` read these (bodies:
``protocol.admin_bodies``; the consume-stats rule: ``server.broker.consume_stats``). A consumer group
with no member online is CONSUMER_NOT_ONLINE ``the consumer group[G] not online``; a producer group
with none is SYSTEM_ERROR ``the producer group[G] not exist``, as the broker answers. A missing group
name is SYSTEM_ERROR (the broker's tables refuse a null key). ``consumeTps`` is 0.0: this server
keeps no per-group rate statistics (the broker's ``BrokerStatsManager``); mqadmin prints it only.
"""

from __future__ import annotations

from protocol.admin_bodies import (
    Connection,
    encode_consume_stats,
    encode_consumer_connection,
    encode_producer_connection,
)
from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    java_string,
)
from server.broker.client_channel import ClientChannelInfo
from server.broker.consume_stats import consume_stats
from server.broker.controller import BrokerController
from server.remoting.reply import exception_answer, system_error


def consumer_not_online_remark(group: str) -> str:
    return f"the consumer group[{group}] not online"


def producer_not_exist_remark(group: str) -> str:
    return f"the producer group[{group}] not exist"


def null_field_remark(name: str) -> str:
    return f"the custom field <{name}> is null"


def connection(info: ClientChannelInfo) -> Connection:
    return Connection(info.client_id, info.channel.client_address, info.language, info.version)


class ConsumeStatsProcessor:
    """Group membership and progress, from the broker's registries and offsets."""

    def __init__(self, broker: BrokerController) -> None:
        self._broker = broker
        self._broker_name = broker.store.config.broker_name

    def get_consumer_connection_list(self, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        if header.consumer_group is None:
            return exception_answer(request, null_field_remark("consumerGroup"))
        group = self._broker.consumers.get(header.consumer_group)
        if group is None:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE, remark=consumer_not_online_remark(header.consumer_group)
            )
        body = encode_consumer_connection(
            [connection(info) for info in group.members.values()],
            dict(group.subscriptions),
            group.consume_type,
            group.message_model,
            group.consume_from_where,
        )
        return request.make_response(ResponseCode.SUCCESS, body=body)

    def get_producer_connection_list(self, request: RemotingCommand) -> RemotingCommand:
        header = GetProducerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        if header.producer_group is None:
            return exception_answer(request, null_field_remark("producerGroup"))
        members = self._broker.producers.members(header.producer_group)
        if not members:
            return system_error(request, producer_not_exist_remark(header.producer_group))
        body = encode_producer_connection([connection(info) for info in members])
        return request.make_response(ResponseCode.SUCCESS, body=body)

    def get_consume_stats(self, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        # A null group matches no offsets in the broker (no failure): an empty table.
        group = java_string(header.consumer_group) if header.consumer_group is not None else "\0"
        rows = consume_stats(self._broker, group, header.topic, self._broker_name)
        return request.make_response(ResponseCode.SUCCESS, body=encode_consume_stats(rows, 0.0))
