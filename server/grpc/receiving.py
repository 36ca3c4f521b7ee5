"""The SimpleConsumer calls over the broker's lease table: QueryAssignment, ReceiveMessage, AckMessage,
ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue, as the Proxy 5.1.4 answers them.

- QueryAssignment (``RouteActivity.queryAssignment``): a readable topic is one assignment, queue id
  -1 ("any queue of this broker"), or one per read queue for a FIFO group; none readable is
  FORBIDDEN "no readable queue".
- ReceiveMessage (``ReceiveMessageActivity``): the polling time (``polling_time_ms``) is the
  request's long polling timeout, or, when the client sent none (the Go client), the call's time
  remaining minus half the client's request timeout; then clamped to 5..20 s
  (``grpcClientConsumer{Min,Max}LongPollingTimeoutMillis``) and kept inside the call's deadline;
  the invisible duration must be 10 s..12 h (ILLEGAL_INVISIBLE_TIME); a bad tag
  expression, or an empty SQL one, is ILLEGAL_FILTER_EXPRESSION (the Proxy's ``FilterAPI.build``);
  an SQL expression that does not compile is the broker's pop answer SUBSCRIPTION_PARSE_FAILED,
  which the Proxy passes on as INTERNAL_SERVER_ERROR "parse the consumer's subscription failed";
  an SQL one filters each record by its properties (``server.broker.message_filter``, the same
  filter as the remoting pulls, with the 5.x grammar's ``CONTAINS``/``STARTSWITH``/``ENDSWITH``; the
  broker's pop does not look at ``enablePropertyFilter``). Like a pop
  with queue id -1, every readable queue of the topic is looked at, starting from the request's
  queue. Nothing found: the call waits until a SEND to one of those queues (``StoreChanges``), a
  lease falls due, or the polling time runs out, then answers MESSAGE_NOT_FOUND "no new message".
  Found: one status OK, then one response per message (``ReceiveMessageResponseStreamWriter``),
  each serialized here at once (``message_bytes``, the same bytes as ``build_message``'s objects);
  the service ends every stream with a delivery-timestamp response, as the 5.3 Proxy does.
  A FIFO consumer (``Settings.subscription.fifo``, which the Proxy sets from the group's
  ``consumeMessageOrderly``; the group's own config when the client sent no settings) pops orderly:
  a queue with a message out and not acked gives nothing more (``ReceiveLeases``).
- AckMessage (``AckMessageActivity``): one result per entry; the response's status is the entry's
  when there is one entry, OK when all are OK, else MULTIPLE_RESULTS. An orderly group's ack wakes
  the receives held on its queue, as the broker's ack of an orderly pop notifies its long polling:
  the queue may be unlocked.
- ChangeInvisibleDuration: a new receipt handle; ForwardMessageToDeadLetterQueue: the message to
  ``%DLQ%group`` and acked.

Messages are built as ``GrpcConverter.buildMessage`` builds them, with one difference: a compressed
record's body is sent inflated with IDENTITY encoding (the Proxy sends the stored bytes as GZIP, but
a 4.x producer's bodies are zlib, which a client's gzip decoder would refuse).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from protocol.message import MessageExt
from server.broker.controller import BrokerController, SubscriptionGroupConfig
from server.broker.message_filter import SQL92, FilterCompileError, SqlRecordFilter, compile_filter
from server.broker.receive_leases import InvalidReceiptHandle, ReceiveLeases
from server.broker.receive_store import StoredRecord
from server.grpc.ack_bytes import ack_response
from server.grpc.conversion import (
    PROPERTY_BORN_HOST,
    PROPERTY_KEYS,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_TRACE_CONTEXT,
    PROPERTY_UNIQ_KEY,
    SYSTEM_PROPERTY_NAMES,
    message_type_of,
)
from server.grpc.message_bytes import MESSAGE_TYPES, ReceivedMessages
from server.grpc.route import PERM_READ, permission_of
from server.grpc.topics import GrpcTopics
from server.grpc.v2 import Code, Encoding, definition, service
from server.grpc.validation import GrpcStatusError, validate_consumer_group, validate_topic
from server.remoting.processors.pull_message import (
    SUBSCRIPTION_PARSE_FAILED_REMARK,
    SubscriptionParseError,
    tag_filter,
)
from server.store_api import RecordFilter
from server.store_changes import StoreChanges

MIN_POLLING_MS = 5_000
MAX_POLLING_MS = 20_000
MIN_INVISIBLE_MS = 10_000
MAX_INVISIBLE_MS = 12 * 3600 * 1000
#: ``ProxyConfig.defaultInvisibleTimeMills``: what an auto-renew receive is leased for.
DEFAULT_INVISIBLE_MS = 60_000
#: ``PopMessageProcessor``: a pop asks for at most 32 messages.
MAX_BATCH = 32
#: ``ClientConfiguration``'s request timeout in every official client (3 s): what half of is kept
#: for the answer when the client sent no Settings (or none with a request timeout).
DEFAULT_REQUEST_TIMEOUT_MS = 3_000
#: How long before the call's deadline an empty receive is answered at the latest. The Proxy polls
#: up to the deadline itself when the time remaining is shorter than the polling time, so its
#: "nothing found" reaches the client after it gave up (DEADLINE_EXCEEDED); this leaves the answer
#: time to arrive.
ANSWER_MARGIN_MS = 500
#: The first client version that knows ILLEGAL_POLLING_TIME; older ones are answered BAD_REQUEST.
ILLEGAL_POLLING_TIME_SINCE = "5.0.3"
#: The shortest wait of a held receive between two looks.
MIN_WAIT_SECONDS = 0.05


def duration_ms(value: Duration) -> int:
    return int(value.seconds) * 1000 + int(value.nanos) // 1_000_000


def request_timeout_ms(settings: definition.Settings | None) -> int:
    """The client's request timeout from its Settings (``DEFAULT_REQUEST_TIMEOUT_MS`` without one)."""
    if settings is not None and settings.HasField("request_timeout"):
        given = duration_ms(settings.request_timeout)
        if given > 0:
            return given
    return DEFAULT_REQUEST_TIMEOUT_MS


def polling_time_ms(
    long_polling_ms: int | None, request_timeout: int, time_remaining_ms: int | None, client_version: str = ""
) -> int:
    """How long an empty ReceiveMessage waits, by ``ReceiveMessageActivity``'s rule.

    ``long_polling_ms``: the request's long polling timeout (None when it has none);
    ``time_remaining_ms``: until the call's deadline (None: no deadline). The polling time is the
    long polling timeout, else the time remaining minus half the request timeout (the client's
    deadline is its await duration plus its request timeout, so the answer comes half a request
    timeout early), else (no deadline either) the longest; clamped to 5..20 s. It must end
    ``ANSWER_MARGIN_MS`` before the deadline: when it would not, it is shortened to that, or, with
    less than the 5 s minimum left, the call is refused as the Proxy refuses it: ILLEGAL_POLLING_TIME,
    BAD_REQUEST for a client older than 5.0.3 (its ``x-mq-client-version``, compared as Java compares
    strings; none counts as older), which does not know that code.
    """
    if long_polling_ms is not None:
        polling = long_polling_ms
    elif time_remaining_ms is not None:
        polling = time_remaining_ms - request_timeout // 2
    else:
        polling = MAX_POLLING_MS
    polling = min(max(polling, MIN_POLLING_MS), MAX_POLLING_MS)
    if time_remaining_ms is not None and polling > time_remaining_ms - ANSWER_MARGIN_MS:
        if time_remaining_ms < MIN_POLLING_MS:
            raise GrpcStatusError(
                Code.BAD_REQUEST
                if ILLEGAL_POLLING_TIME_SINCE > client_version
                else Code.ILLEGAL_POLLING_TIME,
                "The deadline time remaining is not enough for polling, please check network condition",
            )
        polling = time_remaining_ms - ANSWER_MARGIN_MS
    return polling


def _timestamp(ms: int) -> Timestamp:
    ts = Timestamp()
    ts.FromMilliseconds(ms)
    return ts


def build_message(
    message: MessageExt, *, attempt: int, receipt_handle: str = "", invisible_ms: int | None = None
) -> definition.Message:
    """``GrpcConverter.buildMessage``: a stored message as a 5.x client reads it. A received one has
    its receipt handle and invisible duration; one shown for a transaction check-back has neither.
    A receive sends ``message_bytes.ReceivedMessages``' bytes, compared in tests with this."""
    props = message.properties
    system = definition.SystemProperties(
        message_id=props.get(PROPERTY_UNIQ_KEY) or message.offset_msg_id,
        body_digest=definition.Digest(
            type=definition.DigestType.MD5, checksum=hashlib.md5(message.body).hexdigest().upper()
        ),
        body_encoding=Encoding.IDENTITY,
        message_type=MESSAGE_TYPES[message_type_of(props)],
        born_timestamp=_timestamp(message.born_timestamp),
        born_host=props.get(PROPERTY_BORN_HOST) or message.born_host,
        store_timestamp=_timestamp(message.store_timestamp),
        store_host=f"{message.store_host}:{message.store_port}",
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        delivery_attempt=attempt,
    )
    if receipt_handle:
        system.receipt_handle = receipt_handle
    if invisible_ms is not None:
        system.invisible_duration.CopyFrom(
            Duration(seconds=invisible_ms // 1000, nanos=(invisible_ms % 1000) * 1_000_000)
        )
    if PROPERTY_TAGS in props:
        system.tag = props[PROPERTY_TAGS]
    if props.get(PROPERTY_KEYS) is not None:
        system.keys.extend(props[PROPERTY_KEYS].split(" "))
    if "TIMER_DELIVER_MS" in props and props["TIMER_DELIVER_MS"].lstrip("-").isdigit():
        system.delivery_timestamp.CopyFrom(_timestamp(int(props["TIMER_DELIVER_MS"])))
    if PROPERTY_SHARDING_KEY in props:
        system.message_group = props[PROPERTY_SHARDING_KEY]
    if PROPERTY_TRACE_CONTEXT in props:
        system.trace_context = props[PROPERTY_TRACE_CONTEXT]
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_NAMES}
    return definition.Message(
        topic=definition.Resource(name=message.topic),
        user_properties=user,
        system_properties=system,
        body=message.body,
    )


def _status(code: int, message: str | None = None) -> definition.Status:
    return definition.Status(code=code, message=message if message is not None else Code.Name(code))


#: A receive's first response when it found messages, serialized once.
RECEIVED_OK = service.ReceiveMessageResponse(status=_status(Code.OK)).SerializeToString()


def receive_filter(
    expression: definition.FilterExpression,
) -> tuple[frozenset[int] | None, RecordFilter | None]:
    """A ReceiveMessage's filter: (tag codes, None) for a TAG expression, (None, the record filter)
    for an SQL one; the Proxy's and the broker's refusals as ``GrpcStatusError``."""
    if expression.type == definition.FilterType.SQL:
        if not expression.expression:
            raise GrpcStatusError(Code.ILLEGAL_FILTER_EXPRESSION, f"Expression can't be null! {SQL92}")
        try:
            return None, SqlRecordFilter(compile_filter(SQL92, expression.expression, v5=True))
        except FilterCompileError:
            raise GrpcStatusError(Code.INTERNAL_SERVER_ERROR, SUBSCRIPTION_PARSE_FAILED_REMARK) from None
    try:
        return tag_filter(expression.expression or "*", "TAG"), None
    except SubscriptionParseError as exc:
        raise GrpcStatusError(Code.ILLEGAL_FILTER_EXPRESSION, str(exc)) from None


class GrpcConsumers:
    """The consume-side calls of one gRPC port (``serve --writable`` only)."""

    def __init__(
        self,
        broker: BrokerController,
        leases: ReceiveLeases,
        topics: GrpcTopics,
        changes: StoreChanges,
        *,
        clock: Callable[[], int],
        host: str = "",
    ) -> None:
        self.broker = broker
        #: The broker's address host (``brokerIP1``), named in the broker's own refusals.
        self.host = host
        self.leases = leases
        self.topics = topics
        self.changes = changes
        self._clock = clock

    async def renew_forever(self, interval: float = 1.0) -> None:
        """Renew auto-renew leases due for it every ``interval`` seconds (until cancelled)."""
        while True:
            await asyncio.sleep(interval)
            self.leases.renew_all(self._clock())

    def orderly(self, group: str, settings: definition.Settings | None) -> bool:
        """FIFO consumption: what the client was answered (``subscription.fifo``), else the group's."""
        if settings is not None and settings.HasField("subscription"):
            return bool(settings.subscription.fifo)
        config = self.broker.find_group(group)
        return config is not None and config.consume_message_orderly

    def max_attempts(self, group: str, settings: definition.Settings | None) -> int:
        """The backoff policy's max attempts the client was answered, else the group's."""
        if settings is not None and settings.backoff_policy.max_attempts > 0:
            return int(settings.backoff_policy.max_attempts)
        config = self.broker.find_group(group)
        return (config.retry_max_times if config is not None else 16) + 1

    def _readable(self, topic: str) -> int:
        config = self.topics.get(topic)
        if config is None:
            raise GrpcStatusError(
                Code.TOPIC_NOT_FOUND, f"No topic route info in name server for the topic: {topic}"
            )
        return config.read_queue_nums if config.perm & PERM_READ else 0

    def _group(self, name: str) -> SubscriptionGroupConfig:
        """The group's config, or the Proxy's refusal of a bad or unknown group."""
        validate_consumer_group(name)
        config = self.broker.find_group(name)
        if config is None:
            raise GrpcStatusError(Code.CONSUMER_GROUP_NOT_FOUND, f"consumer group not found: {name}")
        return config

    # -- QueryAssignment --------------------------------------------------------------------------

    def query_assignment(
        self, request: service.QueryAssignmentRequest, to: definition.Broker, fifo: bool
    ) -> service.QueryAssignmentResponse:
        validate_topic(request.topic.name)
        self._group(request.group.name)
        config = self.topics.get(request.topic.name)
        if config is None:
            raise GrpcStatusError(
                Code.TOPIC_NOT_FOUND,
                f"No topic route info in name server for the topic: {request.topic.name}",
            )
        if not (config.perm & PERM_READ) or config.read_queue_nums <= 0:
            raise GrpcStatusError(Code.FORBIDDEN, "no readable queue")
        ids = range(config.read_queue_nums) if fifo else [-1]
        assignments = [
            definition.Assignment(
                message_queue=definition.MessageQueue(
                    topic=request.topic, id=i, permission=permission_of(config.perm), broker=to
                )
            )
            for i in ids
        ]
        return service.QueryAssignmentResponse(status=_status(Code.OK), assignments=assignments)

    # -- ReceiveMessage ---------------------------------------------------------------------------

    async def receive(
        self,
        request: service.ReceiveMessageRequest,
        settings: definition.Settings | None,
        time_remaining_ms: int | None,
        *,
        client_id: str = "",
        client_version: str = "",
    ) -> AsyncIterator[service.ReceiveMessageResponse]:
        """The responses of one ReceiveMessage call; raises ``GrpcStatusError`` before the first.

        ``auto_renew`` (a PushConsumer's receive): the messages stay invisible while ``client_id`` is a
        live member of the group (``ReceiveLeases``' renewal), the client's handle good for its ack."""
        polling = polling_time_ms(
            duration_ms(request.long_polling_timeout) if request.HasField("long_polling_timeout") else None,
            request_timeout_ms(settings),
            time_remaining_ms,
            client_version,
        )
        topic, group = request.message_queue.topic.name, request.group.name
        validate_topic(topic)
        self._group(group)
        if request.auto_renew:
            invisible = DEFAULT_INVISIBLE_MS
        else:
            invisible = duration_ms(request.invisible_duration)
            _check_invisible(invisible, MIN_INVISIBLE_MS)
        tags, record_filter = receive_filter(request.filter_expression)
        if request.batch_size <= 0:
            raise GrpcStatusError(Code.BAD_REQUEST, "batch size must be > 0")
        if request.batch_size > MAX_BATCH:
            # ``PopMessageProcessor``'s SYSTEM_ERROR, which the Proxy answers INTERNAL_SERVER_ERROR.
            raise GrpcStatusError(
                Code.INTERNAL_SERVER_ERROR,
                f"the broker[{self.host}] pop message's num is greater than {MAX_BATCH}",
            )
        readable = self._readable(topic)
        if readable <= 0:
            raise GrpcStatusError(Code.FORBIDDEN, "no readable queue")
        first = request.message_queue.id % readable if request.message_queue.id >= 0 else 0
        order = [(first + i) % readable for i in range(readable)]
        max_attempts = self.max_attempts(group, settings)
        orderly = self.orderly(group, settings)
        loop = asyncio.get_running_loop()
        until = loop.time() + polling / 1000
        while True:
            now = self._clock()
            found = self.leases.receive(
                group,
                topic,
                order,
                request.batch_size,
                invisible,
                now,
                max_attempts=max_attempts,
                tags_codes=tags,
                record_filter=record_filter,
                orderly=orderly,
                client_id=client_id,
                auto_renew=request.auto_renew,
            )
            if found:
                # already serialized (``message_bytes``): grpcio sends bytes as they are
                yield RECEIVED_OK
                messages = ReceivedMessages(topic, invisible)
                for delivery in found:
                    record = delivery.message
                    if isinstance(record, StoredRecord):
                        yield messages.record(
                            record.raw, attempt=delivery.attempt, receipt_handle=delivery.handle
                        )
                    else:
                        assert isinstance(record, MessageExt), record
                        yield messages.response(
                            record, attempt=delivery.attempt, receipt_handle=delivery.handle
                        )
                return
            left = until - loop.time()
            if left <= 0 or self.changes.closed:
                yield service.ReceiveMessageResponse(status=_status(Code.MESSAGE_NOT_FOUND, "no new message"))
                return
            self.leases.renew(group, topic, now)
            due = self.leases.next_deadline(group, topic)
            # Every write of a writable store tells its queue (``WritableStore.arrived``): no periodic
            # look is needed, only the next lease falling due.
            wait = left
            if due is not None:
                # at least a moment: a lease on a queue no longer readable must not spin the loop
                wait = min(wait, max(MIN_WAIT_SECONDS, (due - now) / 1000))
            await self._wait_queues(topic, order, wait)

    async def _wait_queues(self, topic: str, queue_ids: list[int], timeout: float) -> None:
        """Until a SEND to one of the queues (or the server stops), at most ``timeout`` seconds.

        The queues are watched from this call, before anything yields: a SEND handled between the
        read that found nothing and the first turn of the wait's tasks must wake this receive."""
        events = [self.changes.watch_queue(topic, q) for q in queue_ids]
        if timeout <= 0 or any(event.is_set() for event in events):
            return
        waits = [asyncio.ensure_future(event.wait()) for event in events]
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    # -- AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue ----------------------

    def ack(self, request: service.AckMessageRequest) -> bytes:
        """The AckMessageResponse's bytes (``ack_bytes``): the leases of all entries found and acked
        together (``ReceiveLeases.ack_all``), each entry answered with its own status."""
        group, topic = request.group.name, request.topic.name
        validate_topic(topic)
        orderly = self._group(group).consume_message_orderly
        if not request.entries:
            raise GrpcStatusError(Code.INVALID_RECEIPT_HANDLE, "receipt handle cannot be empty")
        entries = [(entry.message_id, entry.receipt_handle) for entry in request.entries]
        results, queue_ids = self.leases.ack_all(group, topic, [handle for _, handle in entries])
        if orderly:
            for queue_id in queue_ids:
                self.changes.notify_queue(topic, queue_id)
        return ack_response(entries, results)

    def change_invisible(
        self, request: service.ChangeInvisibleDurationRequest
    ) -> service.ChangeInvisibleDurationResponse:
        validate_topic(request.topic.name)
        self._group(request.group.name)
        invisible = duration_ms(request.invisible_duration)
        _check_invisible(invisible, 0)
        try:
            delivery = self.leases.change_invisible(
                request.group.name, request.topic.name, request.receipt_handle, invisible, self._clock()
            )
        except InvalidReceiptHandle as exc:
            raise GrpcStatusError(Code.INVALID_RECEIPT_HANDLE, str(exc)) from None
        if delivery is None:
            raise GrpcStatusError(Code.MESSAGE_NOT_FOUND, "the message is no longer in the store")
        return service.ChangeInvisibleDurationResponse(
            status=_status(Code.OK), receipt_handle=delivery.handle
        )

    def forward_to_dead_letter(
        self, request: service.ForwardMessageToDeadLetterQueueRequest
    ) -> service.ForwardMessageToDeadLetterQueueResponse:
        validate_topic(request.topic.name)
        self._group(request.group.name)
        try:
            self.leases.dead_letter(request.group.name, request.topic.name, request.receipt_handle)
        except InvalidReceiptHandle as exc:
            raise GrpcStatusError(Code.INVALID_RECEIPT_HANDLE, str(exc)) from None
        return service.ForwardMessageToDeadLetterQueueResponse(status=_status(Code.OK))


def _check_invisible(invisible_ms: int, minimum: int) -> None:
    """``GrpcValidator.validateInvisibleTime``."""
    if invisible_ms < minimum:
        raise GrpcStatusError(
            Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {minimum}"
        )
    if invisible_ms > MAX_INVISIBLE_MS:
        raise GrpcStatusError(
            Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {MAX_INVISIBLE_MS}"
        )
