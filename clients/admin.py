"""Message queries the way the Java client's ``MQAdminImpl`` makes them, over ``RemotingClient``.

- ``query_by_key`` / ``query_by_unique_key``: route from the name server (cached per topic), one
  QUERY_MESSAGE per broker group (the master, else a replica) sent concurrently, each broker's body
  decoded record by record, then Java's client-side filter: a key query keeps a message only if the
  key is one of its ``KEYS`` and its topic is the topic asked for (index hashes collide across keys
  and topics); a unique-key query keeps it only if its message id equals the key. A broker whose
  SUCCESS lacks either index header field is ignored, as Java does.
- ``view_message``: VIEW_MESSAGE_BY_ID sent to the ``ip:port`` written inside the offset message id.
- ``query_by_id``: 5.x ``queryMsgById``: the view above, and if that fails for any reason, a
  unique-key query routed through the name server over the last three days.

Verdicts are Java's: an empty filtered result is ``NO_MESSAGE`` (208), a topic without a route is
``TOPIC_NOT_EXIST`` (17). Where Java would only log, the errors are kept on the result so a caller
can tell "nothing there" from "nobody answered" (``QueryResult.errors``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import msgspec

from clients.errors import (
    ClientError,
    InvalidMessageIdError,
    MQClientError,
    UsageError,
)
from clients.message_queue import (
    PULL_STATUS_BY_CODE,
    MessageQueue,
    PullResult,
    PullStatus,
    java_hashset_order,
)
from clients.namesrv import NamesrvClient
from clients.response_errors import (
    broker_error,
    client_error,
    expect_success,
    no_message_error,
    no_route_error,
)
from clients.route import TopicRouteData
from protocol.codes import RequestCode, ResponseCode
from protocol.custom_headers import (
    PULL_SUBSCRIPTION_FLAG,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    ViewMessageRequestHeader,
    read_offset,
    read_timestamp,
    with_unique_key_query,
)
from protocol.errors import CodecUnavailableError, HeaderFieldError, MessageIdError, ProtocolError
from protocol.message import MessageExt, decode_message, decode_messages
from protocol.message_id import decode_offset_msg_id
from protocol.topic_stats import TopicOffset, decode_topic_stats

log = logging.getLogger(__name__)


def decode_answer_records(body: bytes | bytearray | memoryview, addr: str) -> list[MessageExt]:
    """The records of a QUERY_MESSAGE answer, as Java's ``MessageDecoder.decodes`` reads them.

    Like Java, the walk stops at the first record it cannot decode and keeps what came before. Java
    always has every codec; here lz4 and zstandard are optional, and a missing one would make that
    stop silent ("no message" while the broker found some), so it raises ``CodecUnavailableError``
    naming the package instead. Any other undecodable record is logged, then dropped as in Java.
    """
    messages = decode_messages(body)
    decoded = sum(msg.store_size for msg in messages)
    if decoded < len(body):
        try:
            decode_message(body, decoded)
        except CodecUnavailableError:
            raise
        except ProtocolError as exc:
            log.warning("answer of %s: records from byte %d on dropped, as Java does: %s", addr, decoded, exc)
    return messages


LONG_MAX = (1 << 63) - 1
#: ``queryMsgByKey``'s default maximum number of messages per broker.
DEFAULT_KEY_MAX_NUM = 64
#: The broker's ``defaultQueryMaxNum``, used for unique-key queries.
DEFAULT_UNIQUE_MAX_NUM = 32
#: How far back 5.x ``queryMsgById`` looks when it falls back to a unique-key query.
ID_FALLBACK_WINDOW_MS = 3 * 24 * 60 * 60 * 1000
#: ``MixAll.TOOLS_CONSUMER_GROUP``: the group mqadmin's pull-based tools pull as.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
#: ``DefaultMQPullConsumer``'s ``brokerSuspendMaxTimeMillis`` (sent, unused without the suspend flag).
BROKER_SUSPEND_MAX_TIME_MILLIS = 20000
#: ``SubscriptionData.SUB_ALL``.
SUB_ALL = "*"


class _GroupList(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    group_list: list[str] = msgspec.field(default_factory=list)


_GROUP_LIST = msgspec.json.Decoder(_GroupList)


@dataclass(slots=True)
class QueryResult:
    """Filtered messages from every broker, and what went wrong on the brokers that failed."""

    index_last_update_timestamp: int = 0
    messages: list[MessageExt] = field(default_factory=list)
    #: ``(broker address, error)`` for each broker that did not answer SUCCESS or QUERY_NOT_FOUND.
    errors: list[tuple[str, ClientError | ProtocolError]] = field(default_factory=list)


def java_split_space(text: str) -> list[str]:
    """``String.split(" ")``: like Python's, minus the trailing empty strings Java drops."""
    parts = text.split(" ")
    while parts and not parts[-1]:
        parts.pop()
    return parts


def query_ext_fields(
    topic: str, key: str, max_num: int, begin: int, end: int, *, unique_key: bool = False
) -> dict[str, str]:
    """QUERY_MESSAGE's extFields exactly as the Java client sends them (HashMap order included)."""
    header = QueryMessageRequestHeader(topic, key, max_num, begin, end)
    return with_unique_key_query(header.to_ext_fields(), unique_key)


def addr_of(host: str, port: int) -> str:
    """``host:port`` with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def subscription_tags(sub_expression: str | None) -> set[str]:
    """``FilterAPI.buildSubscriptionData``'s tag set (empty: every message), which the Java client
    applies again to what a pull returns."""
    if sub_expression is None or sub_expression in ("", SUB_ALL):
        return set()
    tags = set()
    for part in sub_expression.split("||"):
        tag = part.strip(" \t\n\r\x0b\x0c")
        if tag:
            tags.add(tag)
    return tags


class QueryAdmin(NamesrvClient):
    """Key, unique-key and id queries, and the consume-queue reads and pulls of mqadmin's pull-based
    tools, against a name server and the brokers it routes to."""

    # -- routes -----------------------------------------------------------------------------------

    async def get_route(self, topic: str) -> TopicRouteData:
        """The topic's route (cached); no route is Java's ``TOPIC_NOT_EXIST`` verdict."""
        route = await self.route(topic)
        if route is None:
            raise no_route_error(topic)
        return route

    # -- QUERY_MESSAGE ----------------------------------------------------------------------------

    async def query_message(
        self,
        topic: str,
        key: str,
        max_num: int,
        begin: int,
        end: int,
        *,
        unique_key: bool = False,
        cluster: str | None = None,
    ) -> QueryResult:
        """MQAdminImpl.queryMessage: ask every broker of the topic, merge, filter like Java."""
        route = await self.get_route(topic)
        addrs = route.broker_addrs(cluster)
        if not addrs:
            raise no_route_error(topic)
        ext_fields = query_ext_fields(topic, key, max_num, begin, end, unique_key=unique_key)
        answers = await asyncio.gather(
            *(self._query_one(addr, ext_fields) for addr in addrs), return_exceptions=True
        )
        result = QueryResult()
        answered = False
        for addr, answer in zip(addrs, answers, strict=True):
            if isinstance(answer, ClientError | ProtocolError):
                if len(addrs) > 1:  # with one broker its error is the verdict, raised below
                    log.warning("query of broker %s failed: %s", addr, answer)
                result.errors.append((addr, answer))
                continue
            if isinstance(answer, BaseException):
                raise answer
            if answer is None:
                answered = True  # QUERY_NOT_FOUND or an ignored SUCCESS: the broker did answer
                continue
            answered = True
            timestamp, messages = answer
            result.index_last_update_timestamp = max(result.index_last_update_timestamp, timestamp)
            for msg in messages:
                if unique_key:
                    keep = msg.msg_id == key
                else:
                    keys = msg.properties.get("KEYS")
                    keep = keys is not None and msg.topic == topic and key in java_split_space(keys)
                if keep:
                    result.messages.append(msg)
                else:
                    log.debug("dropped %s: key %r not in it (index hash collision)", msg.msg_id, key)
        if not result.messages:
            if not answered and result.errors:
                raise result.errors[0][1]
            raise no_message_error("key")
        return result

    async def _query_one(self, addr: str, ext_fields: dict[str, str]) -> tuple[int, list[MessageExt]] | None:
        response = await self.client.invoke(
            addr, RequestCode.QUERY_MESSAGE, ext_fields, timeout=self.timeout * 3
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        expect_success(response, addr)
        try:
            header = QueryMessageResponseHeader.from_ext_fields(response.ext_fields)
        except HeaderFieldError as exc:
            # Java's @CFNotNull check fails on this answer and the broker's results are dropped.
            log.warning("ignoring the answer of %s: %s", addr, exc)
            return None
        return header.index_last_update_timestamp, decode_answer_records(response.body or b"", addr)

    async def query_by_key(
        self,
        topic: str,
        key: str,
        max_num: int = DEFAULT_KEY_MAX_NUM,
        begin: int = 0,
        end: int = LONG_MAX,
        *,
        cluster: str | None = None,
    ) -> QueryResult:
        """``mqadmin queryMsgByKey``: messages of ``topic`` whose KEYS contain ``key``."""
        return await self.query_message(topic, key, max_num, begin, end, cluster=cluster)

    async def query_by_unique_key(
        self,
        topic: str,
        unique_key: str,
        max_num: int = DEFAULT_UNIQUE_MAX_NUM,
        begin: int = 0,
        end: int = LONG_MAX,
        *,
        cluster: str | None = None,
    ) -> list[MessageExt]:
        """``mqadmin queryMsgByUniqueKey``: every message with this id, oldest store time first."""
        try:
            result = await self.query_message(
                topic, unique_key, max_num, begin, end, unique_key=True, cluster=cluster
            )
        except MQClientError as exc:
            if exc.code == ResponseCode.NO_MESSAGE:
                raise no_message_error("unique key") from None
            raise
        return sorted(result.messages, key=lambda m: m.store_timestamp)

    # -- VIEW_MESSAGE_BY_ID -----------------------------------------------------------------------

    async def view_message(self, offset_msg_id: str, topic: str | None = None) -> MessageExt:
        """The message at the CommitLog offset inside ``offset_msg_id``, asked of the broker it names."""
        try:
            host, port, offset = decode_offset_msg_id(offset_msg_id)
        except MessageIdError as exc:
            raise InvalidMessageIdError(offset_msg_id, str(exc)) from exc
        return await self.view_at(addr_of(host, port), offset, topic)

    async def view_at(self, addr: str, offset: int, topic: str | None = None) -> MessageExt:
        """VIEW_MESSAGE_BY_ID for ``offset`` on ``addr``; a non-SUCCESS answer raises its code's class."""
        ext_fields = ViewMessageRequestHeader(offset, topic or None).to_ext_fields()
        response = await self.client.invoke(
            addr, RequestCode.VIEW_MESSAGE_BY_ID, ext_fields, timeout=self.timeout
        )
        expect_success(response, addr)
        return decode_message(response.body or b"")

    async def query_by_id(
        self,
        msg_id: str,
        topic: str | None = None,
        *,
        cluster: str | None = None,
        begin: int | None = None,
    ) -> MessageExt:
        """5.x ``queryMsgById``: view by offset id; on any failure, a unique-key query if a topic is known.

        Without a topic (or name server) there is nothing to fall back on and the view's error stands
        (4.x behaviour). The fallback looks back ``ID_FALLBACK_WINDOW_MS`` unless ``begin`` is given.
        """
        try:
            return await self.view_message(msg_id, topic)
        except (ClientError, ProtocolError) as exc:
            if not topic or not self.namesrv_addrs:
                raise
            log.warning("view by offset id failed (%s); trying %s as a unique key", exc, msg_id)
        start = begin if begin is not None else int(time.time() * 1000) - ID_FALLBACK_WINDOW_MS
        try:
            result = await self.query_message(
                topic, msg_id, DEFAULT_UNIQUE_MAX_NUM, start, LONG_MAX, unique_key=True, cluster=cluster
            )
        except MQClientError as exc:
            if exc.code == ResponseCode.NO_MESSAGE:
                raise no_message_error("id") from None
            raise
        return result.messages[0]

    # -- QUERY_TOPIC_CONSUME_BY_WHO ---------------------------------------------------------------

    async def consumer_groups(self, addr: str, topic: str) -> list[str]:
        """The consumer groups the broker at ``addr`` knows for ``topic``."""
        response = await self.client.invoke(
            addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}, timeout=self.timeout
        )
        expect_success(response, addr)
        if not response.body:
            return []
        try:
            return _GROUP_LIST.decode(response.body).group_list
        except msgspec.DecodeError as exc:
            raise broker_error(response.code, f"undecodable group list: {exc}", addr) from exc

    # -- consume queues (DefaultMQPullConsumer / DefaultMQAdminExt) --------------------------------

    async def broker_addr(self, topic: str, broker_name: str) -> str:
        """The address pulls for ``broker_name`` go to: its master, else a replica (from the route)."""
        route = await self.get_route(topic)
        for broker in route.broker_datas:
            if broker.broker_name == broker_name:
                addr = broker.select_broker_addr()
                if addr:
                    return addr
        raise client_error(ResponseCode.SYSTEM_ERROR, f"The broker[{broker_name}] not exist")

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic``, in the order Java's ``HashSet`` gives them."""
        route = await self.get_route(topic)
        queues = [
            MessageQueue(topic, data.broker_name, queue_id)
            for data in route.queue_datas or []
            if data.perm & 0x4  # PermName.PERM_READ
            for queue_id in range(data.read_queue_nums)
        ]
        if not queues:
            raise client_error(
                ResponseCode.SYSTEM_ERROR, f"Can not find Message Queue for this topic, {topic}"
            )
        return java_hashset_order(queues)

    async def _queue_call(self, mq: MessageQueue, code: int, ext_fields: dict[str, str]) -> dict[str, str]:
        addr = await self.broker_addr(mq.topic, mq.broker_name)
        response = await self.client.invoke(addr, code, ext_fields, timeout=self.timeout)
        expect_success(response, addr)
        return response.ext_fields or {}

    async def min_offset(self, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET: the queue's first offset still stored."""
        fields = QueueRequestHeader(mq.topic, mq.queue_id).to_ext_fields()
        return read_offset(await self._queue_call(mq, RequestCode.GET_MIN_OFFSET, fields))

    async def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET: the offset the queue's next message will get."""
        fields = QueueRequestHeader(mq.topic, mq.queue_id).to_ext_fields()
        return read_offset(await self._queue_call(mq, RequestCode.GET_MAX_OFFSET, fields))

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        """GET_EARLIEST_MSG_STORETIME: store time of the queue's first message (-1 when empty)."""
        fields = QueueRequestHeader(mq.topic, mq.queue_id).to_ext_fields()
        return read_timestamp(await self._queue_call(mq, RequestCode.GET_EARLIEST_MSG_STORETIME, fields))

    async def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the broker's offset for a store time (its binary search)."""
        fields = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp).to_ext_fields()
        return read_offset(await self._queue_call(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, fields))

    async def pull(
        self, mq: MessageQueue, sub_expression: str | None, offset: int, max_nums: int
    ) -> PullResult:
        """``DefaultMQPullConsumer.pull``: one PULL_MESSAGE (no suspend, no commit), the answer's
        records decoded and filtered again by tag as the Java client does, each given the
        ``MIN_OFFSET``/``MAX_OFFSET`` properties the client adds."""
        if offset < 0:
            raise UsageError("offset < 0")
        if max_nums <= 0:
            raise UsageError("maxNums <= 0")
        expression = sub_expression if sub_expression is not None else SUB_ALL
        header = PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER_GROUP,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=PULL_SUBSCRIPTION_FLAG,
            commit_offset=0,
            suspend_timeout_millis=BROKER_SUSPEND_MAX_TIME_MILLIS,
            sub_version=0,
            subscription=expression,
            expression_type="TAG",
        )
        addr = await self.broker_addr(mq.topic, mq.broker_name)
        response = await self.client.invoke(
            addr, RequestCode.PULL_MESSAGE, header.to_ext_fields(), timeout=self.timeout
        )
        status = PULL_STATUS_BY_CODE.get(response.code)
        if status is None:
            raise broker_error(response.code, response.remark, addr)
        fields = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
        result = PullResult(status, fields.next_begin_offset, fields.min_offset, fields.max_offset)
        if status is PullStatus.FOUND:
            messages = decode_answer_records(response.body or b"", addr)
            tags = subscription_tags(expression)
            if tags:
                messages = [m for m in messages if m.tags is not None and m.tags in tags]
            for msg in messages:
                msg.properties["MIN_OFFSET"] = str(fields.min_offset)
                msg.properties["MAX_OFFSET"] = str(fields.max_offset)
            result.messages = messages
        return result

    async def examine_topic_stats(self, topic: str) -> list[TopicOffset]:
        """GET_TOPIC_STATS_INFO of every broker of the topic, merged (``examineTopicStats``)."""
        route = await self.get_route(topic)
        rows: list[TopicOffset] = []
        for addr in route.broker_addrs():
            response = await self.client.invoke(
                addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}, timeout=self.timeout
            )
            expect_success(response, addr)
            rows.extend(decode_topic_stats(bytes(response.body or b"")))
        if not rows:
            raise client_error(ResponseCode.SYSTEM_ERROR, "Not found the topic stats info")
        return rows
