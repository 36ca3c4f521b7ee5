"""A small pull consumer for tests: receive what was sent, through any RocketMQ 4.x broker.

It behaves towards the broker (``serve --writable`` or the real one) as the official Java client's
consumers do, so a test that receives with it exercises the broker's consume side, not a shortcut:

- it heartbeats its group to every broker of its topics' routes (HEART_BEAT: one ``ConsumerData``,
  ``CONSUME_PASSIVELY``, ``CLUSTERING``, ``CONSUME_FROM_FIRST_OFFSET``, each subscription built as
  ``FilterAPI.buildSubscriptionData`` builds it: tags trimmed, their Java ``String.hashCode`` in
  ``codeSet``, ``subVersion`` the time it was made), again every 30 s and whenever a pull finds the
  group or subscription unknown (a restarted broker);
- each queue starts at the group's committed offset (QUERY_CONSUMER_OFFSET); with none
  (QUERY_NOT_FOUND) at 0, as ``CONSUME_FROM_FIRST_OFFSET`` does, and an offset the broker says is
  out of range (PULL_OFFSET_MOVED) moves to the broker's ``nextBeginOffset``;
- one long-polling pull at a time per queue, as the push consumer pulls: the suspend flag (the broker
  holds the pull until a message arrives or 15 s pass), the commit-offset flag carrying the offset
  consumed so far, no subscription in the pull (the broker filters by the heartbeat's); what comes
  back is filtered by tag again, as the Java client does;
- offsets are committed (UPDATE_CONSUMER_OFFSET) every 5 s and at ``close``, which then checks them
  with QUERY_CONSUMER_OFFSET, and leaves the group (UNREGISTER_CLIENT).

"Consumed" means handed to the caller by ``receive``: a message pulled but not yet taken is never
committed, so the next consumer of the group gets it; within one consumer nothing is pulled twice
(per queue, one pull at a time, from the end of the previous one). Per queue, messages come in queue
order.

Not for production: there is no rebalance. Each consumer takes every queue of its topics, so two
live members of one group both receive everything (use one consumer per group, or distinct groups).
No retry topic, no CONSUMER_SEND_MSG_BACK, no orderly locks, no broadcasting model, no SQL92 filter.
Errors are the classes of ``clients.response_errors`` (and the transport errors of
``clients.errors``): a broker's refusal that retrying cannot cure (no permission, group or topic
unknown, a bad subscription) is raised by the next ``receive``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from clients.admin import decode_answer_records
from clients.client import RemotingClient
from clients.errors import ClientError, TransportError, UsageError
from clients.message_queue import PULL_STATUS_BY_CODE, MessageQueue, PullStatus
from clients.namesrv import NamesrvClient
from clients.response_errors import (
    SubscriptionNotExistError,
    SubscriptionNotLatestError,
    SystemBusyError,
    broker_error,
    client_error,
    expect_success,
)
from clients.route import TopicRouteData
from protocol.codes import RequestCode, ResponseCode
from protocol.custom_headers import (
    PULL_COMMIT_OFFSET_FLAG,
    PULL_SUSPEND_FLAG,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    read_offset,
)
from protocol.errors import ProtocolError
from protocol.index_key import java_string_hash
from protocol.java_hashmap import hashmap_order_by_hash
from protocol.message import MessageExt

log = logging.getLogger(__name__)

#: ``SubscriptionData.SUB_ALL``.
SUB_ALL = "*"
#: ``DefaultMQPushConsumerImpl``: how long the broker may hold a pull; the pull's own timeout is
#: 15 s longer (``CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND``, 30 s).
BROKER_SUSPEND_MAX_TIME_MILLIS = 15_000
SUSPENDED_PULL_MARGIN = 15.0
#: ``pullBatchSize`` and ``pullThresholdForQueue``: messages per pull, and how many pulled but not
#: yet taken a queue may have before its pulls pause.
PULL_BATCH_SIZE = 32
PULL_THRESHOLD_FOR_QUEUE = 1000
#: ``heartbeatBrokerInterval``, ``persistConsumerOffsetInterval`` (seconds).
HEARTBEAT_INTERVAL = 30.0
PERSIST_INTERVAL = 5.0
#: ``pollNameServerInterval``; a topic with no route yet (nothing sent so far) is asked for this often.
ROUTE_INTERVAL = 30.0
MISSING_ROUTE_INTERVAL = 0.2
#: ``pullTimeDelayMillsWhenException`` is 3 s; a test waits for less, and the broker here is local.
RETRY_DELAY = 0.2
#: ``PermName.PERM_READ``.
PERM_READ = 0x4


def java_trim(text: str) -> str:
    """``String.trim()``: strips characters up to U+0020 at both ends, nothing else."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


@dataclass(frozen=True, slots=True)
class Subscription:
    """``SubscriptionData`` as the Java client builds it (``FilterAPI.buildSubscriptionData``)."""

    topic: str
    sub_string: str
    #: Tags in the order Java's ``HashSet`` iterates them (empty: every message).
    tags: tuple[str, ...] = ()
    codes: tuple[int, ...] = ()
    sub_version: int = field(default_factory=lambda: time.time_ns() // 1_000_000)

    @classmethod
    def build(cls, topic: str, expression: str | None) -> Subscription:
        if expression is None or expression in ("", SUB_ALL):
            return cls(topic, SUB_ALL)
        parts = expression.split("||")
        while parts and parts[-1] == "":
            parts.pop()  # Java's split drops trailing empty strings
        if not parts:
            raise UsageError(f"subscription exception: cannot split {expression!r} into tags")
        tags: list[str] = []
        for part in parts:
            tag = java_trim(part)
            if tag and tag not in tags:
                tags.append(tag)
        codes = list(dict.fromkeys(java_string_hash(t) for t in tags))
        return cls(
            topic,
            expression,
            tuple(hashmap_order_by_hash(tags, java_string_hash)),
            tuple(hashmap_order_by_hash(codes, lambda c: c)),
        )

    def accepts(self, message: MessageExt) -> bool:
        """The Java client's own check of what a pull returned: the tag is one subscribed."""
        return not self.tags or message.tags in self.tags

    def to_json(self) -> dict[str, object]:
        """The fields as fastjson writes ``SubscriptionData`` (sorted by name, sets as arrays)."""
        return {
            "classFilterMode": False,
            "codeSet": list(self.codes),
            "expressionType": "TAG",
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags),
            "topic": self.topic,
        }


class ReceiveTimeoutError(TimeoutError):
    """Fewer messages than asked arrived in time; ``received`` holds those that did (not consumed)."""

    def __init__(self, message: str, received: list[MessageExt]) -> None:
        super().__init__(message)
        self.received = received


def describe(message: MessageExt) -> str:
    """One message in a few words, for error messages."""
    parts = [f"{message.topic}[{message.queue_id}]@{message.queue_offset}"]
    if message.tags is not None:
        parts.append(f"tags={message.tags}")
    if message.keys:
        parts.append(f"keys={' '.join(message.keys)}")
    body = message.body[:40]
    parts.append(f"body={body!r}{'...' if len(message.body) > 40 else ''}")
    return " ".join(parts)


def local_client_id() -> str:
    """``ClientConfig.buildMQClientId`` after ``changeInstanceNameToPID``: ``ip@pid#nanotime``."""
    return f"127.0.0.1@{os.getpid()}#{time.monotonic_ns()}"


@dataclass(slots=True, eq=False)
class _Queue:
    """One queue's progress: where the next pull starts and which pulled messages are not yet taken."""

    mq: MessageQueue
    subscription: Subscription
    #: The offset of the next pull; None until the committed offset is known.
    next_pull: int | None = None
    #: Queue offsets of the messages pulled and waiting in the consumer's buffer, oldest first.
    waiting: deque[int] = field(default_factory=deque)
    #: The offset the broker is known to hold for the group (-1: none committed by us).
    committed: int = -1
    room: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def consumed(self) -> int:
        """The offset to commit: the oldest message not yet taken, else where the next pull starts."""
        if self.waiting:
            return self.waiting[0]
        return -1 if self.next_pull is None else self.next_pull


class PullConsumer(NamesrvClient):
    """A consumer group member that takes every queue of its topics (see the module docstring).

    ``subscribe`` the topics (or give ``subscriptions``, topic → tag expression), ``await start()``,
    then ``await receive(count, timeout)`` as often as needed, and ``await close()`` (or use
    ``async with``, which starts and closes it).
    """

    def __init__(
        self,
        namesrv: str | Sequence[str] | None,
        group: str,
        *,
        client: RemotingClient | None = None,
        timeout: float = 3.0,
        suspend_millis: int = BROKER_SUSPEND_MAX_TIME_MILLIS,
        batch_size: int = PULL_BATCH_SIZE,
        threshold_per_queue: int = PULL_THRESHOLD_FOR_QUEUE,
        subscriptions: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(namesrv, client, timeout=timeout)
        if not group:
            raise UsageError("a consumer group is required")
        self.group = group
        self.client_id = local_client_id()
        self.suspend_millis = suspend_millis
        self.batch_size = batch_size
        self.threshold_per_queue = threshold_per_queue
        self._subscriptions: dict[str, Subscription] = {}
        self._queues: dict[MessageQueue, _Queue] = {}
        self._brokers: set[str] = set()
        self._ready: deque[tuple[_Queue, MessageExt]] = deque()
        self._arrived = asyncio.Event()
        self._failure: ClientError | ProtocolError | None = None
        self._housekeeping: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False
        for topic, expression in (subscriptions or {}).items():
            self.subscribe(topic, expression)

    async def __aenter__(self) -> PullConsumer:
        await self.start()
        return self

    # -- set-up -----------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | None = SUB_ALL) -> None:
        """Receive ``topic``'s messages whose tag matches ``expression`` (``*``, ``TagA || TagB``)."""
        if self._started:
            raise UsageError("subscribe before start()")
        if not topic:
            raise UsageError("a topic is required")
        self._subscriptions[topic] = Subscription.build(topic, expression)

    async def start(self) -> None:
        """Find the routes, heartbeat the brokers, start pulling every queue found.

        A topic with no route yet (nothing sent to it so far) is looked up again every 0.2 s, and
        its queues are pulled as soon as it has one.
        """
        if self._started:
            return
        if not self._subscriptions:
            raise UsageError("subscribe to a topic before start()")
        self._started = True
        try:
            await self._refresh_routes()
        except BaseException:
            await self.close()
            raise
        self._housekeeping = asyncio.ensure_future(self._keep_house())

    # -- receiving --------------------------------------------------------------------------------

    @property
    def ready(self) -> int:
        """How many messages have been pulled and wait to be taken."""
        return len(self._ready)

    async def receive(self, count: int, timeout: float = 10.0) -> list[MessageExt]:
        """The next ``count`` messages, waiting up to ``timeout`` seconds for them to arrive.

        Taken messages count as consumed (committed with the group's offsets). Fewer in time raise
        ``ReceiveTimeoutError`` (a ``TimeoutError``) naming those that came, which stay untaken; a
        broker's refusal that retrying cannot cure is raised as its error class.
        """
        if count < 0 or timeout < 0:
            raise UsageError("count and timeout must not be negative")
        if not self._started or self._closed:
            raise UsageError("receive on a consumer that is not started, or closed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self._ready) < count:
            if self._failure is not None:
                raise self._failure
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise self._timeout(count, timeout)
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), remaining)
        return self._take(count)

    def _take(self, count: int) -> list[MessageExt]:
        taken = []
        for _ in range(count):
            queue, message = self._ready.popleft()
            queue.waiting.popleft()
            queue.room.set()
            taken.append(message)
        return taken

    def _timeout(self, count: int, timeout: float) -> ReceiveTimeoutError:
        waiting = [message for _, message in self._ready]
        topics = ", ".join(f"{s.topic} (tags {s.sub_string})" for s in self._subscriptions.values())
        text = (
            f"received {len(waiting)} of {count} messages within {timeout:g}s"
            f" from {topics}, group {self.group}"
        )
        if not self._queues:
            text += "; no route yet for any of its topics (nothing sent to them?)"
        if waiting:
            text += ": " + "; ".join(describe(m) for m in waiting[:20])
            if len(waiting) > 20:
                text += f"; ... {len(waiting) - 20} more"
        return ReceiveTimeoutError(text, waiting)

    # -- routes and heartbeats --------------------------------------------------------------------

    async def _refresh_routes(self) -> bool:
        """Look the topics up; start pulling new queues, heartbeat new brokers. True if all routed."""
        all_routed = True
        new_brokers: set[str] = set()
        found: list[tuple[MessageQueue, str]] = []
        for topic in self._subscriptions:
            route = await self.fetch_route(topic)
            if route is None:
                all_routed = False
                continue
            self._routes[topic] = route
            found.extend(self._readable_queues(topic, route))
        for _, addr in found:
            if addr not in self._brokers:
                new_brokers.add(addr)
        if new_brokers:
            self._brokers |= new_brokers
            await self._heartbeat(new_brokers)
        for mq, _ in found:
            if mq not in self._queues:
                queue = _Queue(mq, self._subscriptions[mq.topic])
                queue.room.set()
                self._queues[mq] = queue
                queue.task = asyncio.ensure_future(self._pull_loop(queue))
        return all_routed

    @staticmethod
    def _readable_queues(topic: str, route: TopicRouteData) -> list[tuple[MessageQueue, str]]:
        queues = []
        for data in route.queue_datas or []:
            if not data.perm & PERM_READ:
                continue
            broker = next((b for b in route.broker_datas if b.broker_name == data.broker_name), None)
            addr = broker.select_broker_addr() if broker is not None else None
            if addr is None:
                continue
            queues.extend(
                (MessageQueue(topic, data.broker_name, i), addr) for i in range(data.read_queue_nums)
            )
        return queues

    def heartbeat_body(self) -> bytes:
        """``HeartbeatData`` as fastjson writes the Java client's (fields sorted by name)."""
        consumer = {
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
            "consumeType": "CONSUME_PASSIVELY",
            "groupName": self.group,
            "messageModel": "CLUSTERING",
            "subscriptionDataSet": [s.to_json() for s in self._subscriptions.values()],
            "unitMode": False,
        }
        return msgspec.json.encode(
            {"clientID": self.client_id, "consumerDataSet": [consumer], "producerDataSet": []}
        )

    async def _heartbeat(self, addrs: set[str] | None = None) -> None:
        body = self.heartbeat_body()
        for addr in sorted(addrs if addrs is not None else self._brokers):
            response = await self.client.invoke(addr, RequestCode.HEART_BEAT, {}, body, timeout=self.timeout)
            expect_success(response, addr)

    def _addr(self, mq: MessageQueue) -> str:
        route = self._routes[mq.topic]
        broker = next(b for b in route.broker_datas if b.broker_name == mq.broker_name)
        addr = broker.select_broker_addr()
        assert addr is not None  # checked when the queue was taken
        return addr

    async def _keep_house(self) -> None:
        """Routes (often while a topic has none), heartbeats and offset commits, on the Java client's
        schedule; a failure is logged and tried again at the next turn."""
        loop = asyncio.get_running_loop()
        next_route = next_heartbeat = next_persist = loop.time()
        next_heartbeat += HEARTBEAT_INTERVAL
        next_persist += PERSIST_INTERVAL
        all_routed = len(self._routes) == len(self._subscriptions)
        while True:
            now = loop.time()
            try:
                if now >= next_route or not all_routed:
                    all_routed = await self._refresh_routes()
                    next_route = now + ROUTE_INTERVAL
                if now >= next_heartbeat:
                    await self._heartbeat()
                    next_heartbeat = now + HEARTBEAT_INTERVAL
                if now >= next_persist:
                    await self.commit()
                    next_persist = now + PERSIST_INTERVAL
            except ClientError as exc:
                log.warning("consumer %s: %s", self.group, exc)
            await asyncio.sleep(MISSING_ROUTE_INTERVAL if not all_routed else 1.0)

    # -- pulling ----------------------------------------------------------------------------------

    async def _pull_loop(self, queue: _Queue) -> None:
        while True:
            try:
                if queue.next_pull is None:
                    queue.next_pull = await self._start_offset(queue)
                if len(queue.waiting) >= self.threshold_per_queue:
                    queue.room.clear()
                    await queue.room.wait()
                    continue
                await self._pull(queue)
            except (SubscriptionNotExistError, SubscriptionNotLatestError) as exc:
                # The broker does not know the group's subscription (restarted, or expired us).
                log.info("consumer %s: %s; heartbeating again", self.group, exc)
                await asyncio.sleep(RETRY_DELAY)
                with contextlib.suppress(ClientError):
                    await self._heartbeat()
            except (TransportError, SystemBusyError) as exc:
                log.info("consumer %s, %s: %s; pulling again", self.group, queue.mq, exc)
                await asyncio.sleep(RETRY_DELAY)
            except (ClientError, ProtocolError) as exc:  # ProtocolError: an answer that does not decode
                log.warning("consumer %s, %s: %s; this queue is no longer pulled", self.group, queue.mq, exc)
                self._failure = exc
                self._arrived.set()
                return

    async def _start_offset(self, queue: _Queue) -> int:
        """The committed offset (QUERY_CONSUMER_OFFSET), else 0 (``CONSUME_FROM_FIRST_OFFSET``)."""
        mq = queue.mq
        addr = self._addr(mq)
        fields = QueryConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id).to_ext_fields()
        response = await self.client.invoke(
            addr, RequestCode.QUERY_CONSUMER_OFFSET, fields, timeout=self.timeout
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return 0
        expect_success(response, addr)
        offset = read_offset(response.ext_fields)
        queue.committed = offset
        return offset

    async def _pull(self, queue: _Queue) -> None:
        mq, subscription = queue.mq, queue.subscription
        assert queue.next_pull is not None
        consumed = queue.consumed()
        sys_flag = PULL_SUSPEND_FLAG | (PULL_COMMIT_OFFSET_FLAG if consumed > 0 else 0)
        header = PullMessageRequestHeader(
            consumer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=queue.next_pull,
            max_msg_nums=self.batch_size,
            sys_flag=sys_flag,
            commit_offset=max(consumed, 0),
            suspend_timeout_millis=self.suspend_millis,
            sub_version=subscription.sub_version,
            subscription=None,
            expression_type="TAG",
        )
        addr = self._addr(mq)
        response = await self.client.invoke(
            addr,
            RequestCode.PULL_MESSAGE,
            header.to_ext_fields(),
            timeout=self.suspend_millis / 1000 + SUSPENDED_PULL_MARGIN,
        )
        status = PULL_STATUS_BY_CODE.get(response.code)
        if status is None:
            raise broker_error(response.code, response.remark, addr)
        fields = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
        if status is PullStatus.FOUND:
            for message in decode_answer_records(response.body or b"", addr):
                if not subscription.accepts(message):
                    continue
                message.properties["MIN_OFFSET"] = str(fields.min_offset)
                message.properties["MAX_OFFSET"] = str(fields.max_offset)
                queue.waiting.append(message.queue_offset)
                self._ready.append((queue, message))
            self._arrived.set()
        elif status is PullStatus.OFFSET_ILLEGAL:
            log.warning(
                "consumer %s, %s: offset %d is out of the queue's range, moving to %d",
                self.group,
                mq,
                queue.next_pull,
                fields.next_begin_offset,
            )
        queue.next_pull = fields.next_begin_offset
        if status is PullStatus.OFFSET_ILLEGAL and not queue.waiting:
            await self._commit_queue(queue)

    # -- offsets ----------------------------------------------------------------------------------

    async def _commit_queue(self, queue: _Queue) -> int:
        offset = queue.consumed()
        if offset < 0 or offset == queue.committed:
            return offset
        mq = queue.mq
        addr = self._addr(mq)
        fields = UpdateConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id, offset).to_ext_fields()
        response = await self.client.invoke(
            addr, RequestCode.UPDATE_CONSUMER_OFFSET, fields, timeout=self.timeout
        )
        expect_success(response, addr)
        queue.committed = offset
        return offset

    async def commit(self) -> None:
        """Commit every queue's consumed offset that the broker does not hold yet."""
        for queue in list(self._queues.values()):
            await self._commit_queue(queue)

    async def committed_offset(self, mq: MessageQueue) -> int:
        """The group's offset for ``mq`` as the broker holds it (-1: none)."""
        addr = self._addr(mq)
        fields = QueryConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id).to_ext_fields()
        response = await self.client.invoke(
            addr, RequestCode.QUERY_CONSUMER_OFFSET, fields, timeout=self.timeout
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        expect_success(response, addr)
        return read_offset(response.ext_fields)

    async def _final_commit(self) -> None:
        """Commit, then read each offset back and commit again if the broker holds less.

        A pull in flight carries an older consumed offset with its commit-offset flag; a broker may
        apply it after the commit sent here, which would hand the next consumer messages this one
        took. Reading back after the commit was answered sees what such a pull did.
        """
        for _ in range(3):
            await self.commit()
            behind = False
            for queue in self._queues.values():
                expected = queue.consumed()
                if expected < 0:
                    continue
                held = await self.committed_offset(queue.mq)
                if held < expected:
                    queue.committed = held
                    behind = True
            if not behind:
                return
        raise client_error(
            ResponseCode.SYSTEM_ERROR,
            f"consumer {self.group}: the broker keeps going back on committed offsets",
        )

    # -- closing ----------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop pulling, commit what was taken (checked), leave the group, close the connections.

        A commit the broker refuses or cannot be reached for is raised (after the connections are
        closed): the next consumer of the group would otherwise get messages this one took.
        """
        if self._closed:
            return
        self._closed = True
        tasks = [q.task for q in self._queues.values() if q.task is not None]
        if self._housekeeping is not None:
            tasks.append(self._housekeeping)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        try:
            if self._queues:
                await self._final_commit()
        finally:
            try:
                await self._unregister()
            finally:
                await super().close()

    async def _unregister(self) -> None:
        fields = UnregisterClientRequestHeader(self.client_id, None, self.group).to_ext_fields()
        for addr in sorted(self._brokers):
            try:
                await self.client.invoke(addr, RequestCode.UNREGISTER_CLIENT, fields, timeout=self.timeout)
            except ClientError as exc:  # the Java client only logs it too
                log.info("consumer %s: unregistering from %s failed: %s", self.group, addr, exc)


__all__ = ["PullConsumer", "ReceiveTimeoutError", "Subscription"]
