"""AdminBrokerProcessor's consume-queue reads: GET_MIN_OFFSET (31), GET_MAX_OFFSET (30),
GET_EARLIEST_MSG_STORETIME (32), SEARCH_OFFSET_BY_TIMESTAMP (29) and GET_TOPIC_STATS_INFO (202).

The broker answers the four offset requests straight from its store, without looking at its topic
table: an unknown topic or queue id is an empty queue (offset 0, earliest time -1), answered SUCCESS.
GET_TOPIC_STATS_INFO does look the topic up (TOPIC_NOT_EXIST, ``topic[X] not exist``) and reports
every queue with min and max clamped at 0 and the store time of the last entry (0 for an empty
queue), in the body ``protocol.topic_stats`` writes.
"""

from __future__ import annotations

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import (
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    offset_response_fields,
    required_string,
    timestamp_response_fields,
)
from protocol.topic_stats import TopicOffset, encode_topic_stats
from server.store_api import ConsumeQueueStore


def topic_not_exist_in_broker_remark(topic: str) -> str:
    """GET_TOPIC_STATS_INFO's remark for a topic the broker has no config for."""
    return f"topic[{topic}] not exist"


class QueueOffsetProcessor:
    """Offsets and stats per consume queue, read from the store on every request."""

    __slots__ = ("_broker_name", "_store")

    def __init__(self, store: ConsumeQueueStore, broker_name: str) -> None:
        self._store = store
        self._broker_name = broker_name

    def get_min_offset(self, request: RemotingCommand) -> RemotingCommand:
        header = QueueRequestHeader.from_ext_fields(request.ext_fields)
        offset = self._store.min_offset(header.topic, header.queue_id)
        return request.make_response(ResponseCode.SUCCESS, ext_fields=offset_response_fields(offset))

    def get_max_offset(self, request: RemotingCommand) -> RemotingCommand:
        header = QueueRequestHeader.from_ext_fields(request.ext_fields)
        offset = self._store.max_offset(header.topic, header.queue_id)
        return request.make_response(ResponseCode.SUCCESS, ext_fields=offset_response_fields(offset))

    def get_earliest_msg_storetime(self, request: RemotingCommand) -> RemotingCommand:
        header = QueueRequestHeader.from_ext_fields(request.ext_fields)
        timestamp = self._store.earliest_message_time(header.topic, header.queue_id)
        return request.make_response(ResponseCode.SUCCESS, ext_fields=timestamp_response_fields(timestamp))

    def search_offset_by_timestamp(self, request: RemotingCommand) -> RemotingCommand:
        header = SearchOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self._store.offset_by_time(header.topic, header.queue_id, header.timestamp)
        return request.make_response(ResponseCode.SUCCESS, ext_fields=offset_response_fields(offset))

    def get_topic_stats_info(self, request: RemotingCommand) -> RemotingCommand:
        topic = required_string(request.ext_fields, "topic")
        if topic not in self._store.queue_nums():
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, remark=topic_not_exist_in_broker_remark(topic)
            )
        rows = [
            TopicOffset(
                broker_name=self._broker_name,
                queue_id=queue_id,
                topic=topic,
                min_offset=max(min_offset, 0),
                max_offset=max(max_offset, 0),
                last_update_timestamp=last_update if max_offset > 0 else 0,
            )
            for queue_id, min_offset, max_offset, last_update in self._store.topic_stats(topic)
        ]
        return request.make_response(ResponseCode.SUCCESS, body=encode_topic_stats(rows))
