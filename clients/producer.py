"""A minimal RocketMQ producer: SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE the way the Java client sends them.

For tests and tools that write into ``serve --writable`` (or a real broker): the route comes from the
name server, falling back to ``TBW102``'s route for a topic that does not exist yet (the broker then
creates it), queues are taken round-robin unless one is given, every message gets a ``UNIQ_KEY``
made like the Java client's and ``WAIT=true``, and the properties travel in Java ``HashMap`` order.
No retries, no compression, no transactions: a failed send raises the ``MQBrokerError`` of the
broker's code (``clients.response_errors``: ``NoPermissionError``, ``MessageIllegalError``, ...)
with its remark.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clients.client import RemotingClient
from clients.errors import UsageError
from clients.namesrv import NamesrvClient
from clients.response_errors import expect_success
from protocol.codes import RequestCode
from protocol.command import RemotingCommand
from protocol.message_id import UniqueIdGenerator
from protocol.send_message import (
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    client_properties,
    encode_batch_body,
)

AUTO_CREATE_TOPIC = "TBW102"
#: ``DefaultMQProducer.defaultTopicQueueNums``.
DEFAULT_TOPIC_QUEUE_NUMS = 4


@dataclass(frozen=True, slots=True)
class SendResult:
    """What the Java client's ``SendResult`` holds: ids, the queue and the queue offset."""

    msg_id: str
    offset_msg_id: str
    broker_addr: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """One message of a batch."""

    body: bytes
    keys: str | Sequence[str] | None = None
    tags: str | None = None
    properties: Mapping[str, str] | None = None
    flag: int = 0


class Producer(NamesrvClient):
    """Sends to the broker(s) a name server routes a topic to."""

    def __init__(
        self,
        namesrv: str | Sequence[str] | None,
        *,
        group: str = "rmq_query_producer",
        client: RemotingClient | None = None,
        timeout: float = 3.0,
    ) -> None:
        super().__init__(namesrv, client, timeout=timeout)
        self.group = group
        self._ids = UniqueIdGenerator()
        self._rotation = itertools.count()

    async def _target(self, topic: str, queue_id: int | None) -> tuple[str, str, int]:
        """(broker address, broker name, queue id) for the next send to ``topic``."""
        route = await self.route(topic)
        fallback = route is None
        if route is None:
            # Like the Java client: send with TBW102's route; the broker creates the topic. The
            # fallback is not cached, so the next send picks up the new topic's own route.
            route = await self.fetch_route(AUTO_CREATE_TOPIC)
            if route is None:
                raise UsageError(f"no route info for topic {topic} (and no {AUTO_CREATE_TOPIC} to create it)")
        queue = route.queue_datas[0]
        nums = min(queue.write_queue_nums, DEFAULT_TOPIC_QUEUE_NUMS) if fallback else queue.write_queue_nums
        broker = next(b for b in route.broker_datas if b.broker_name == queue.broker_name)
        addr = broker.select_broker_addr()
        if addr is None:
            raise UsageError(f"the route of {topic} names no master for {queue.broker_name}")
        if queue_id is None:
            queue_id = next(self._rotation) % max(1, nums)
        return addr, queue.broker_name, queue_id

    def _header(
        self, topic: str, queue_id: int, properties: str, broker_name: str, *, batch: bool = False
    ) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            producer_group=self.group,
            topic=topic,
            default_topic=AUTO_CREATE_TOPIC,
            default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id=queue_id,
            sys_flag=0,
            born_timestamp=time.time_ns() // 1_000_000,
            flag=0,
            properties=properties,
            reconsume_times=0,
            unit_mode=False,
            batch=batch,
            broker_name=broker_name,
        )

    async def send(
        self,
        topic: str,
        body: bytes,
        *,
        keys: str | Sequence[str] | None = None,
        tags: str | None = None,
        properties: Mapping[str, str] | None = None,
        queue_id: int | None = None,
        delay_level: int = 0,
        oneway: bool = False,
    ) -> SendResult | None:
        """Send one message (SEND_MESSAGE_V2); a oneway send returns None."""
        addr, broker_name, qid = await self._target(topic, queue_id)
        unique = self._ids.next_id()
        props = client_properties(keys, tags, properties, unique, delay_level)
        fields = self._header(topic, qid, props, broker_name).to_ext_fields(v2=True)
        if oneway:
            await self.client.invoke_oneway(addr, RequestCode.SEND_MESSAGE_V2, fields, body)
            return None
        response = await self.client.invoke(
            addr, RequestCode.SEND_MESSAGE_V2, fields, body, timeout=self.timeout
        )
        return self._result(response, addr, unique)

    async def send_batch(
        self, topic: str, messages: Sequence[OutgoingMessage], *, queue_id: int | None = None
    ) -> list[SendResult]:
        """Send messages as one SEND_BATCH_MESSAGE; one result per message."""
        addr, broker_name, qid = await self._target(topic, queue_id)
        uniques = [self._ids.next_id() for _ in messages]
        body = encode_batch_body(
            [
                (m.flag, m.body, _as_mapping(client_properties(m.keys, m.tags, m.properties, u)))
                for m, u in zip(messages, uniques, strict=True)
            ]
        )
        fields = self._header(topic, qid, "WAIT\x01true", broker_name, batch=True).to_ext_fields(v2=True)
        response = await self.client.invoke(
            addr, RequestCode.SEND_BATCH_MESSAGE, fields, body, timeout=self.timeout
        )
        first = self._result(response, addr, ",".join(uniques))
        offset_ids = first.offset_msg_id.split(",")
        return [
            SendResult(u, oid, addr, first.queue_id, first.queue_offset + i)
            for i, (u, oid) in enumerate(zip(uniques, offset_ids, strict=True))
        ]

    @staticmethod
    def _result(response: RemotingCommand, addr: str, unique: str) -> SendResult:
        expect_success(response, addr)
        header = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        return SendResult(unique, header.msg_id, addr, header.queue_id, header.queue_offset)


def _as_mapping(properties: str) -> dict[str, str]:
    """Keep a properties string's order when it is handed on as a mapping."""
    return dict(item.split("\x01", 1) for item in properties.split("\x02") if "\x01" in item)
