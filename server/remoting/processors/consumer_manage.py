"""ConsumerManageProcessor: consumer offsets and group members.

``ConsumerOffsetProcessor`` serves ``serve --writable``, which keeps groups and offsets as the broker
does. Read-only, ``ConsumerManageProcessor`` answers as a broker that knows no consumer group: this
server then keeps no consumer offsets and registers no consumers (it is read-only), so:
QUERY_CONSUMER_OFFSET (14) takes the broker's path for a group with nothing committed - SUCCESS with
offset 0 when the queue starts at 0 and its first message is still "in memory" (its CommitLog
offset is within ``accessMessageInMemoryMaxRatio`` % (the store's broker.conf, 40 by default) of
physical memory of the CommitLog's end, ``checkInDiskByConsumeOffset``), else QUERY_NOT_FOUND
with the broker's remark; and GET_CONSUMER_LIST_BY_GROUP (38) is SYSTEM_ERROR ``no consumer for
this group, G``. Both answers carry the empty response header the broker's ``createResponseCommand``
gives them.
"""

from __future__ import annotations

import msgspec

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    offset_response_fields,
    required_string,
)
from protocol.record_layout import PHYSICAL_OFFSET_AT, PHYSICAL_OFFSET_WIDTH
from server.broker.controller import BrokerController
from server.remoting.channel import CURRENT_CHANNEL
from server.store_api import StoreWithCommitLog, total_physical_memory

QUERY_OFFSET_NOT_FOUND_REMARK = "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


def no_consumer_remark(group: str) -> str:
    return f"no consumer for this group, {group}"


class ConsumerManageProcessor:
    """QUERY_CONSUMER_OFFSET and GET_CONSUMER_LIST_BY_GROUP with no groups known."""

    __slots__ = ("_in_memory", "_memory", "_store")

    def __init__(self, store: StoreWithCommitLog, physical_memory: int | None = None) -> None:
        self._store = store
        self._memory = total_physical_memory() if physical_memory is None else physical_memory
        #: CommitLog bytes behind its end still "in memory", read at the first query (the server is
        #: built over stores, some of them wrappers, before anything asks).
        self._in_memory: int | None = None

    def _in_memory_bytes(self) -> int:
        """``checkInDiskByCommitOffset``'s span: the store's ``accessMessageInMemoryMaxRatio`` (as its
        pulls use) of physical memory, ``(long) (TOTAL * (ratio / 100.0))``."""
        if self._in_memory is None:
            ratio = self._store.config.access_message_in_memory_max_ratio
            self._in_memory = int(self._memory * (ratio / 100.0))
        return self._in_memory

    def _first_entry_in_disk(self, topic: str, queue_id: int) -> bool:
        """``checkInDiskByConsumeOffset(topic, queueId, 0)``: false when there is no entry at 0."""
        result = self._store.get_message(topic, queue_id, 0, 1)
        if result.status.name != "FOUND" or not result.buffers:
            return False
        record = result.buffers[0]
        physical = int.from_bytes(
            record[PHYSICAL_OFFSET_AT : PHYSICAL_OFFSET_AT + PHYSICAL_OFFSET_WIDTH], "big"
        )
        return self._store.commitlog.max_offset - physical > self._in_memory_bytes()

    def query_consumer_offset(self, request: RemotingCommand) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        min_offset = self._store.min_offset(header.topic, header.queue_id)
        if min_offset <= 0 and not self._first_entry_in_disk(header.topic, header.queue_id):
            return request.make_response(ResponseCode.SUCCESS, ext_fields=offset_response_fields(0))
        return request.make_response(
            ResponseCode.QUERY_NOT_FOUND, remark=QUERY_OFFSET_NOT_FOUND_REMARK, ext_fields={}
        )

    def get_consumer_list_by_group(self, request: RemotingCommand) -> RemotingCommand:
        group = required_string(request.ext_fields, "consumerGroup")
        return request.make_response(
            ResponseCode.SYSTEM_ERROR, remark=no_consumer_remark(group), ext_fields={}
        )


class ConsumerOffsetProcessor(ConsumerManageProcessor):
    """``ConsumerManageProcessor`` for a broker that knows its groups (``serve --writable``).

    QUERY_CONSUMER_OFFSET answers the group's committed offset when it has one, else the broker's
    fallback above; UPDATE_CONSUMER_OFFSET commits (saved with the others every few seconds);
    GET_CONSUMER_LIST_BY_GROUP lists the client ids of the group's live members.
    """

    __slots__ = ("_broker",)

    def __init__(self, broker: BrokerController, physical_memory: int | None = None) -> None:
        super().__init__(broker.store.reader, physical_memory)
        self._broker = broker

    def query_consumer_offset(self, request: RemotingCommand) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self._broker.query_offset(header.consumer_group, header.topic, header.queue_id)
        if offset >= 0:
            return request.make_response(ResponseCode.SUCCESS, ext_fields=offset_response_fields(offset))
        return super().query_consumer_offset(request)

    def update_consumer_offset(self, request: RemotingCommand) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        channel = CURRENT_CHANNEL.get(None)
        if not self._broker.may_commit(header.consumer_group, None if channel is None else channel.id):
            # 5.x's answer to an offset of a group it does not know (4.9.7 keeps any): without
            # autoCreateSubscriptionGroup, or past ``creation_limits``, a group is never made here
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                remark=f"Group {header.consumer_group} not exist!",
                ext_fields={},
            )
        self._broker.commit_offset(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        return request.make_response(ResponseCode.SUCCESS, ext_fields={})

    def get_consumer_list_by_group(self, request: RemotingCommand) -> RemotingCommand:
        group = required_string(request.ext_fields, "consumerGroup")
        consumer_group = self._broker.consumers.get(group)
        if consumer_group is not None and consumer_group.members:
            body = msgspec.json.encode({"consumerIdList": consumer_group.client_ids()})
            return request.make_response(ResponseCode.SUCCESS, body=body, ext_fields={})
        return request.make_response(
            ResponseCode.SYSTEM_ERROR, remark=no_consumer_remark(group), ext_fields={}
        )
