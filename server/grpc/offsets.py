"""The offset calls of ``MessagingService``: UpdateOffset, GetOffset and QueryOffset.

The 5.x clients' pull-style consumers keep their progress on the server with these; the Proxy 5.1.4
has no activity for them (they came with the later protocol), so each answers as the broker
request it stands for, with the Proxy's input checks (``validation``) and its mapping of the
broker's codes (TOPIC_NOT_EXIST is TOPIC_NOT_FOUND):

- UpdateOffset is UPDATE_CONSUMER_OFFSET (``ConsumerManageProcessor.updateConsumerOffset``): the
  topic must exist ("Topic <t> not exist!"); the offset is committed to the group's table
  (``BrokerController.offsets``, persisted in ``consumerOffset.json`` and read by the remoting
  side). A negative offset, which no queue has, is ILLEGAL_OFFSET.
- GetOffset is QUERY_CONSUMER_OFFSET: the committed offset; none committed, 0 when the queue still
  holds its first message (``minOffset <= 0`` and a message at 0), else OFFSET_NOT_FOUND with the
  broker's remark (its QUERY_NOT_FOUND).
- QueryOffset is GET_MIN_OFFSET (BEGINNING), GET_MAX_OFFSET (END) or SEARCH_OFFSET_BY_TIMESTAMP
  (TIMESTAMP, the request's timestamp in ms) on the store.

A queue is named by ``message_queue`` (topic and id); an id outside the topic's queues is BAD_REQUEST.
"""

from __future__ import annotations

from server.broker.controller import BrokerController
from server.grpc.conversion import timestamp_ms
from server.grpc.topics import GrpcTopics
from server.grpc.v2 import Code, definition, service
from server.grpc.validation import GrpcStatusError, validate_consumer_group, validate_topic

NOT_FOUND_REMARK = "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


def _ok() -> definition.Status:
    return definition.Status(code=Code.OK, message="OK")


class GrpcOffsets:
    """The offset calls over the broker's offset table and store."""

    def __init__(self, broker: BrokerController, topics: GrpcTopics) -> None:
        self.broker = broker
        self.topics = topics

    def _queue(self, queue: definition.MessageQueue) -> tuple[str, int]:
        topic = queue.topic.name
        validate_topic(topic)
        config = self.topics.get(topic)
        if config is None:
            raise GrpcStatusError(Code.TOPIC_NOT_FOUND, f"Topic {topic} not exist!")
        queues = max(config.read_queue_nums, config.write_queue_nums)
        if not 0 <= queue.id < queues:
            raise GrpcStatusError(Code.BAD_REQUEST, f"queue id {queue.id} is invalid for topic {topic}")
        return topic, queue.id

    def update(self, request: service.UpdateOffsetRequest) -> service.UpdateOffsetResponse:
        validate_consumer_group(request.group.name)
        topic, queue_id = self._queue(request.message_queue)
        if request.offset < 0:
            raise GrpcStatusError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
        self.broker.commit_offset(request.group.name, topic, queue_id, request.offset)
        return service.UpdateOffsetResponse(status=_ok())

    def get(self, request: service.GetOffsetRequest) -> service.GetOffsetResponse:
        validate_consumer_group(request.group.name)
        topic, queue_id = self._queue(request.message_queue)
        offset = self.broker.query_offset(request.group.name, topic, queue_id)
        if offset < 0:
            reader = self.broker.store.reader
            # ``checkInMemByConsumeOffset(topic, queue, 0, 1)``: the queue still has its message 0
            if reader.min_offset(topic, queue_id) <= 0 and reader.max_offset(topic, queue_id) > 0:
                offset = 0
            else:
                raise GrpcStatusError(Code.OFFSET_NOT_FOUND, NOT_FOUND_REMARK)
        return service.GetOffsetResponse(status=_ok(), offset=offset)

    def query(self, request: service.QueryOffsetRequest) -> service.QueryOffsetResponse:
        topic, queue_id = self._queue(request.message_queue)
        reader = self.broker.store.reader
        policy = request.query_offset_policy
        if policy == definition.QueryOffsetPolicy.BEGINNING:
            offset = reader.min_offset(topic, queue_id)
        elif policy == definition.QueryOffsetPolicy.END:
            offset = reader.max_offset(topic, queue_id)
        else:
            if not request.HasField("timestamp"):
                raise GrpcStatusError(Code.BAD_REQUEST, "timestamp is required by the TIMESTAMP policy")
            offset = reader.offset_by_time(topic, queue_id, timestamp_ms(request.timestamp))
        return service.QueryOffsetResponse(status=_ok(), offset=offset)
