"""PullMessageProcessor, read-only: PULL_MESSAGE (11) answered from the consume queues.

The checks and answers follow the 4.9.7 broker in its order: the topic must be in the store's topic
table (TOPIC_NOT_EXIST), the queue id below the topic's read queue count (SYSTEM_ERROR naming the
consumer's address), the subscription must parse (tag expressions ``A || B`` filter by tagsCode,
``*`` takes everything; an SQL92 expression filters each record by its properties,
``server.broker.message_filter``), and a request without the subscription flag is answered as by a
broker that knows no such consumer group.

SQL92 as the 4.9.7 broker serves it: an expression type other than a tag type needs a non-empty
expression (else SUBSCRIPTION_PARSE_FAILED); a pull that carries its expression but whose expression
does not compile is *not* refused - ``ConsumerFilterManager.build`` swallows the error and the
broker's filter then lets every message through - while a heartbeat-declared expression that does
not compile was never registered, so a pull relying on it gets FILTER_DATA_NOT_EXIST. Past those
checks, a broker without ``enablePropertyFilter`` answers SYSTEM_ERROR "The broker does not support
consumer to filter message by SQL92" (``ConsumeSettings.enable_property_filter``; the read-only
server filters). Such pulls never take the compiled request path (``plain_pull`` says no).
Then the store's ``GetMessageStatus`` becomes the response code and its name the remark: FOUND → 0,
OFFSET_OVERFLOW_ONE / OFFSET_FOUND_NULL → 19, OFFSET_OVERFLOW_BADLY / OFFSET_TOO_SMALL → 21,
NO_MATCHED_MESSAGE / MESSAGE_WAS_REMOVING → 20, an empty queue → 21 unless the request asked for
offset 0 (then 19). ``suggestWhichBrokerId`` is always the master (0), as on a broker without
``slaveReadEnable``. The body is the records' raw bytes, concatenated.

Read-only, it commits no offset (the commit-offset flag is ignored) and knows no consumer group.
Under ``serve --writable`` it is given the ``BrokerController`` and pulls as the broker's do for
registered consumers: the group's config is looked up (and auto-created) first, a pull without the
subscription flag (a push consumer's, by default) is filtered by the subscription the group's
heartbeat declared, and the commit-offset flag commits the consumer's offset on the pull's first
pass (not when a held pull runs again). On PULL_OFFSET_MOVED it appends the OFFSET_MOVED_EVENT
record a master broker appends to its own store (``server.broker.offset_moved``): no client reads
it, but without it every later record's CommitLog offset would differ from the broker's.

Long polling: a 19 answer to a request with the suspend flag is held (the broker's
``PullRequestHoldService``) until the queue's max offset passes the requested offset - then the pull
runs again and may be held again - or the suspend timeout runs out - then it runs once more and its
answer is sent whatever it is. The wait is on ``StoreChanges`` (pulsed by the store refresh) with a
re-check at least every ``HOLD_RECHECK_SECONDS``.

Held pulls are bounded (``HoldLimits``): per connection and in total. Each one costs a task, its
request and a wake-up per store refresh, so without a bound one connection pipelining suspend-flag
PULLs held 76.8k of them (RSS 70 -> 559 MB, other clients' queries 3-9 s). A pull that would be held
past a bound is answered the way the broker answers a request its pull thread pool cannot queue:
SYSTEM_BUSY, ``[OVERLOAD]system busy, start flow control for a while`` (``NettyRemotingAbstract``'s
``RejectedExecutionException`` path), which clients treat as "back off and pull again".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from protocol.codes import ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.custom_header_fields import fast_codes_order
from protocol.custom_headers import (
    PULL_COMMIT_OFFSET_FLAG,
    PULL_RESPONSE_FAST_KEYS,
    PULL_SUBSCRIPTION_FLAG,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
)
from protocol.frame import encode_frame
from protocol.index_key import java_string_hash
from server.broker.controller import BrokerController
from server.broker.message_filter import FilterCompileError, SqlRecordFilter, compile_filter, is_tag_type
from server.burst_log import BurstLog
from server.remoting.channel import CURRENT_CHANNEL
from server.remoting.dispatch import java_remote_address
from server.remoting.faq import suggest_todo
from server.remoting.peer import CURRENT_PEER
from server.remoting.processors.woken_pull import WokenPull
from server.remoting.reply import Answered
from server.runtime_stats import PullStats
from server.store_api import ConsumeQueueStore, RecordFilter
from server.store_changes import StoreChanges
from server.topic_table import TopicTable

log = logging.getLogger(__name__)

#: Default bound on the pulls held at once by all connections: the broker's ``PullRequestHoldService``
#: holds what its pull thread pool (queue of 100,000) let in; here each held pull is ~6 KiB of
#: task and request, so 10,000 cost ~60 MiB, far above what consumers hold (one per queue each).
DEFAULT_MAX_HELD_PULLS = 10_000

#: Default bound per connection: a Java client pulls every queue it is assigned over its one
#: connection to a broker, a few hundred at most in practice.
DEFAULT_MAX_HELD_PULLS_PER_CONNECTION = 1_000

#: The broker's answer to a request its thread pool rejects (``NettyRemotingAbstract``).
BUSY_REMARK = "[OVERLOAD]system busy, start flow control for a while"

#: ``MixAll.MASTER_ID``.
MASTER_ID = 0

#: ``ExpressionType.TAG`` and ``SubscriptionData.SUB_ALL``.
TAG = "TAG"
SUB_ALL = "*"

#: How often a held pull looks at its queue even without a pulse (a store that grew between pulses).
HOLD_RECHECK_SECONDS = 1.0

#: The longest a pull is held, whatever the client asks (Java clients ask 15-20 s).
MAX_HOLD_SECONDS = 3600.0

#: Store status name → response code (``PullMessageProcessor``'s switch); NO_MESSAGE_IN_QUEUE and
#: NO_MATCHED_LOGIC_QUEUE depend on the requested offset and are handled apart.
STATUS_CODES = {
    "FOUND": ResponseCode.SUCCESS,
    "MESSAGE_WAS_REMOVING": ResponseCode.PULL_RETRY_IMMEDIATELY,
    "NO_MATCHED_MESSAGE": ResponseCode.PULL_RETRY_IMMEDIATELY,
    "OFFSET_FOUND_NULL": ResponseCode.PULL_NOT_FOUND,
    "OFFSET_OVERFLOW_BADLY": ResponseCode.PULL_OFFSET_MOVED,
    "OFFSET_OVERFLOW_ONE": ResponseCode.PULL_NOT_FOUND,
    "OFFSET_TOO_SMALL": ResponseCode.PULL_OFFSET_MOVED,
}
_EMPTY_QUEUE_STATUSES = ("NO_MESSAGE_IN_QUEUE", "NO_MATCHED_LOGIC_QUEUE")


#: ``PullMessageResponseHeader``'s keys per serialization (JSON: the broker's HashMap order; ROCKETMQ:
#: its ``FastCodesHeader.encode`` order), computed once, not per pull.
_RESPONSE_FIELD_ORDER = {
    ser: tuple(
        fast_codes_order(PullMessageResponseHeader(0, 0, 0, 0).to_ext_fields(), PULL_RESPONSE_FAST_KEYS, ser)
    )
    for ser in (SerializeType.JSON, SerializeType.ROCKETMQ)
}


def response_fields(
    next_begin_offset: int, min_offset: int, max_offset: int, serialize_type: SerializeType
) -> dict[str, str]:
    """A pull answer's ``PullMessageResponseHeader`` fields in the order ``serialize_type`` writes them
    (``suggestWhichBrokerId`` always the master)."""
    values = {
        "suggestWhichBrokerId": str(MASTER_ID),
        "nextBeginOffset": str(next_begin_offset),
        "minOffset": str(min_offset),
        "maxOffset": str(max_offset),
    }
    return {key: values[key] for key in _RESPONSE_FIELD_ORDER[serialize_type]}


class SubscriptionParseError(ValueError):
    """``FilterAPI.build`` threw: the broker answers SUBSCRIPTION_PARSE_FAILED."""


def _java_trim(text: str) -> str:
    """``String.trim()``: strips characters up to U+0020 at both ends, nothing else."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def tag_filter(subscription: str | None, expression_type: str | None) -> frozenset[int] | None:
    """The tagsCodes a tag subscription accepts; None = every message (``*``, empty, or null).

    ``FilterAPI.buildSubscriptionData``: split on ``||`` (Java's split drops trailing empty parts;
    none left is a parse error), trim each part, keep the non-empty ones, each tag's
    ``String.hashCode`` is its code. An empty ``expressionType`` is a tag type to the broker's
    filter but skips the parsing: only ``*`` then takes anything.
    """
    if expression_type == "":
        return None if subscription == SUB_ALL else frozenset()
    if subscription is None or subscription == SUB_ALL or subscription == "":
        return None
    parts = subscription.split("||")
    while parts and parts[-1] == "":
        parts.pop()
    if not parts:
        raise SubscriptionParseError("subString split error")
    codes = {java_string_hash(tag) for tag in (_java_trim(p) for p in parts) if tag}
    return frozenset(codes)


def declared_filter(sub_string: str | None, code_set: list[int] | None) -> frozenset[int] | None:
    """The tagsCodes a subscription declared in a heartbeat accepts (``ExpressionMessageFilter``):
    every message for ``*`` (or no expression), else the client's own ``codeSet``."""
    if sub_string is None or sub_string == SUB_ALL:
        return None
    return frozenset(code_set or ())


def illegal_queue_remark(queue_id: int, topic: str, read_queue_nums: int, peer: str) -> str:
    """The broker's remark for a queue id outside ``[0, readQueueNums)``."""
    return (
        f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{read_queue_nums}] "
        f"consumer:[{peer}]"
    )


def topic_not_exist_remark(topic: str) -> str:
    """The broker's remark when the pulled topic has no config."""
    return f"topic[{topic}] not exist, apply first please! {suggest_todo()}"


#: Remarks of the early refusals, as the broker words them.
SUBSCRIPTION_PARSE_FAILED_REMARK = "parse the consumer's subscription failed"
GROUP_INFO_NOT_EXIST_REMARK = "the consumer's group info not exist" + suggest_todo()
SUBSCRIPTION_NOT_EXIST_REMARK = "the consumer's subscription not exist" + suggest_todo()
SUBSCRIPTION_NOT_LATEST_REMARK = "the consumer's subscription not latest"
FILTER_DATA_NOT_EXIST_REMARK = "The broker's consumer filter data is not exist!Your expression may be wrong!"


def group_not_exist_remark(group: str) -> str:
    return f"subscription group [{group}] does not exist, {suggest_todo()}"


def group_no_permission_remark(group: str) -> str:
    return f"subscription group no permission, {group}"


def no_broadcast_remark(group: str) -> str:
    return f"the consumer group[{group}] can not consume by broadcast way"


def topic_not_readable_remark(topic: str) -> str:
    return f"the topic[{topic}] pulling message is forbidden"


def negative_capacity_remark(max_msg_nums: int) -> str:
    """The broker's answer to a negative maxMsgNums (``RemotingHelper.exceptionSimpleDesc``)."""
    return (
        f"java.lang.IllegalArgumentException: Illegal Capacity: {max_msg_nums}, "
        "java.base/java.util.ArrayList.<init>(ArrayList.java:160)"
    )


def property_filter_remark(expression_type: str) -> str:
    return f"The broker does not support consumer to filter message by {expression_type}"


def carried_filter(expression_type: str, subscription: str | None) -> RecordFilter | None:
    """The record filter of a pull carrying a non-tag expression (``FilterAPI.build`` and
    ``ConsumerFilterManager.build``): ``SubscriptionParseError`` for no expression; None - every
    message passes - for one that does not compile, as the broker's null filter data does."""
    if not subscription:
        raise SubscriptionParseError(f"Expression can't be null! {expression_type}")
    try:
        return SqlRecordFilter(compile_filter(expression_type, subscription))
    except FilterCompileError:
        return None


def woken_answer(response: RemotingCommand) -> RemotingCommand:
    """A held pull's answer as the broker sends it: JSON, whatever the request's serialization.

    ``PullRequestHoldService`` re-runs the request and writes the answer itself, and a response
    built by ``createResponseCommand`` keeps the default serialization (only the remoting layer's
    normal path copies the request's); so its header is the HashMap-ordered JSON one (golden: "pull:
    empty queue offset 0, suspend flag, 500 ms", ROCKETMQ run)."""
    response.serialize_type = SerializeType.JSON
    fields = response.ext_fields
    order = _RESPONSE_FIELD_ORDER[SerializeType.JSON]
    if fields is not None and fields.keys() == set(order):
        response.ext_fields = {key: fields[key] for key in order}
    return response


class HoldLimits:
    """How many pulls are held, per connection (by its ``ip:port``) and in total, and the bounds.

    A pull takes a slot when it is first held and keeps it across its re-checks until it answers
    (or is cancelled with its connection); a pull that finds no slot is answered SYSTEM_BUSY.
    """

    __slots__ = ("_by_peer", "_ended", "_log", "held", "per_connection", "refused", "total")

    def __init__(
        self,
        total: int = DEFAULT_MAX_HELD_PULLS,
        per_connection: int = DEFAULT_MAX_HELD_PULLS_PER_CONNECTION,
    ) -> None:
        if total < 1 or per_connection < 1:
            raise ValueError(f"held-pull bounds must be at least 1, got {total} and {per_connection}")
        self.total = total
        self.per_connection = per_connection
        #: Pulls held now, all connections together.
        self.held = 0
        #: Pulls answered SYSTEM_BUSY because no slot was free (a counter, for tests and reports).
        self.refused = 0
        self._by_peer: dict[str, int] = {}
        self._ended: set[str] = set()
        self._log = BurstLog(log)

    def held_by(self, peer: str) -> int:
        """Pulls ``peer``'s connection holds now."""
        return self._by_peer.get(peer, 0)

    def take(self, peer: str) -> bool:
        """A slot for one more held pull of ``peer``; False (and logged, per burst) if none is free."""
        mine = self._by_peer.get(peer, 0)
        if mine >= self.per_connection or self.held >= self.total:
            self.refused += 1
            self._log.event(
                "answering SYSTEM_BUSY to a long-polling pull from %s: %d held for it (bound %d), %d "
                "held in all (bound %d)",
                peer,
                mine,
                self.per_connection,
                self.held,
                self.total,
            )
            return False
        self._by_peer[peer] = mine + 1
        self.held += 1
        return True

    def give_back(self, peer: str) -> None:
        """The held pull of ``peer`` answered (or was cancelled)."""
        mine = self._by_peer[peer] - 1
        if mine:
            self._by_peer[peer] = mine
        else:
            del self._by_peer[peer]
            self._ended.discard(peer)
        self.held -= 1

    def end(self, peer: str) -> bool:
        """``peer`` sent EOF: its held pulls answer at their next look instead of at their timeout.

        Java clients never half-close, so a peer that did is gone or leaving; without this its pulls
        kept their slots for up to the suspend timeout it asked (an hour at most), which let a peer
        that pipelines and disconnects, again and again, take every slot. True if it held any.
        """
        if peer in self._by_peer:
            self._ended.add(peer)
            return True
        return False

    def ended(self, peer: str) -> bool:
        """Whether ``peer``'s held pulls should answer now (``end``)."""
        return peer in self._ended


class PullMessageProcessor:
    """PULL_MESSAGE over the store's consume queues, with long polling."""

    __slots__ = ("_broker", "_changes", "_stats", "_store", "_topics", "compiled_woken", "holds")

    def __init__(
        self,
        store: ConsumeQueueStore,
        changes: StoreChanges,
        stats: PullStats | None = None,
        topics: TopicTable | None = None,
        holds: HoldLimits | None = None,
        broker: BrokerController | None = None,
    ) -> None:
        self._store = store
        #: The consume side's state under ``serve --writable``; None read-only.
        self._broker = broker
        self._changes = changes
        self._stats = stats if stats is not None else PullStats()
        self._topics = topics if topics is not None else TopicTable(store)
        #: The bounds on held pulls and how many are held now.
        self.holds = holds if holds is not None else HoldLimits()
        #: The compiled request path's pass for a woken pull (``RequestPath.answer_woken``): the
        #: answer frame when it finds messages, None to leave the pass to ``pull_once``.
        self.compiled_woken: Callable[[WokenPull], bytes | None] | None = None

    @property
    def changes(self) -> StoreChanges:
        """What wakes the held pulls."""
        return self._changes

    def process(self, request: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand | Answered]:
        """PULL_MESSAGE as the dispatcher calls it: the first pass runs now, so its offset commit
        lands in the order the connection's requests came (a client's UPDATE_CONSUMER_OFFSET sent
        after a pull must not be overwritten by the pull's older commit offset); only a pull to be
        held returns a coroutine."""
        peer_address = CURRENT_PEER.get()
        peer = java_remote_address(f"{peer_address[0]}:{peer_address[1]}") if peer_address else "/?"
        if self._broker is None:
            # Read-only, a pull commits nothing: it runs as a task, its answer written when done
            # (and counted by the write budget as such).
            return self.pull_message(request, peer)
        return self._first_pass(request, peer)

    async def pull_message(self, request: RemotingCommand, peer: str) -> RemotingCommand | Answered:
        """The whole pull, held or not, for a caller that names the peer itself."""
        result = self._first_pass(request, peer)
        return result if isinstance(result, RemotingCommand) else await result

    def _first_pass(
        self, request: RemotingCommand, peer: str
    ) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand | Answered]:
        """The pull's first pass (the one that may commit): its answer, or the hold that follows."""
        header = PullMessageRequestHeader.from_ext_fields(request.ext_fields)
        response = self.pull_once(request, header, peer, commit=True)
        if not (header.has_suspend_flag and response.code == ResponseCode.PULL_NOT_FOUND):
            return response
        return self._hold(request, header, peer)

    async def _hold(
        self, request: RemotingCommand, header: PullMessageRequestHeader, peer: str
    ) -> RemotingCommand | Answered:
        """Hold a pull that found nothing until its queue grows or its suspend timeout runs out,
        then answer what a pass finds (re-held while the queue has still nothing past it). The SEND
        that grows the queue answers it itself (``WokenPull``); what reaches the loop below is the
        timeout, the recheck, the peer's end or the server's stop."""
        loop_time = asyncio.get_running_loop().time
        hold = min(max(header.suspend_timeout_millis, 0) / 1000.0, MAX_HOLD_SECONDS)
        deadline = loop_time() + hold
        if not self.holds.take(peer):
            return request.make_response(ResponseCode.SYSTEM_BUSY, remark=BUSY_REMARK)
        waiting = WokenPull(self, request, header, peer, CURRENT_CHANNEL.get(None))
        try:
            # The first pass and this task are a turn of the event loop apart: a SEND handled between
            # them (the next frame of the same read, another connection's) woke the pulls waiting on
            # its queue, and this one was not waiting yet. Look at the queue once before the first
            # wait (as the broker's hold looks at a suspended request's queue on its next check),
            # not before every wait: a pass that found nothing with the queue already past the
            # offset (an entry not readable yet) would spin.
            grown = self._store.max_offset(header.topic, header.queue_id) > header.queue_offset
            while True:
                allow_suspend = True
                # Held: wait for the queue to pass the requested offset, or for the timeout.
                while not grown:
                    remaining = deadline - loop_time()
                    if remaining <= 0 or self._changes.closed or self.holds.ended(peer):
                        allow_suspend = False  # the broker's timeout path: run once more, answer anything
                        break
                    answered = await waiting.wait(min(remaining, HOLD_RECHECK_SECONDS))
                    if answered is not None:
                        return answered  # written by the SEND that woke it
                    if self.holds.ended(peer):
                        allow_suspend = False
                        break
                    if self._store.max_offset(header.topic, header.queue_id) > header.queue_offset:
                        break
                grown = False
                response = self.pull_once(request, header, peer, commit=False)
                if not (allow_suspend and response.code == ResponseCode.PULL_NOT_FOUND):
                    return woken_answer(response)
        finally:
            waiting.release()
            self.holds.give_back(peer)

    def answer_woken(self, waiting: WokenPull) -> Answered | None:
        """A held pull's pass when its queue grew, answered on its connection: ``Answered``, or None
        when its queue has nothing past its offset yet (still held). The compiled pass first (the
        one ordinary pulls take: the same bytes as ``woken_answer`` of the Python pass, which
        tests compare), the Python pass for anything it leaves."""
        header = waiting.header
        if self._store.max_offset(header.topic, header.queue_id) <= header.queue_offset:
            return None
        channel = waiting.channel
        assert channel is not None and channel.write_frame is not None
        compiled = self.compiled_woken
        if compiled is not None:
            frame = compiled(waiting)
            if frame is not None:
                channel.write_frame(frame)
                return Answered(ResponseCode.SUCCESS)
        response = self.pull_once(waiting.request, header, waiting.peer, commit=False)
        if response.code == ResponseCode.PULL_NOT_FOUND:
            return None
        channel.write_frame(encode_frame(woken_answer(response)))
        return Answered(response.code)

    def pull_once(
        self, request: RemotingCommand, header: PullMessageRequestHeader, peer: str, *, commit: bool = True
    ) -> RemotingCommand:
        """One pass of the broker's ``processRequest``: an answer, never a wait.

        ``commit``: whether this pass may commit the consumer's offset (the first pass of a pull,
        the broker's ``brokerAllowSuspend``).
        """
        broker = self._broker
        if broker is not None:
            return self._pull_registered(request, header, peer, broker, commit)
        read_queue_nums = self._topics.queue_nums().get(header.topic)
        if read_queue_nums is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, remark=topic_not_exist_remark(header.topic), ext_fields={}
            )
        if not 0 <= header.queue_id < read_queue_nums:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=illegal_queue_remark(header.queue_id, header.topic, read_queue_nums, peer),
                ext_fields={},
            )
        if not header.has_subscription_flag:
            # No consumer group is registered here, so the broker's lookup of the group's own
            # subscription fails.
            return request.make_response(
                ResponseCode.SUBSCRIPTION_NOT_EXIST, remark=GROUP_INFO_NOT_EXIST_REMARK, ext_fields={}
            )
        expression_type = header.expression_type
        record_filter: RecordFilter | None = None
        tags_codes: frozenset[int] | None = None
        try:
            if expression_type is None or expression_type in (TAG, ""):
                tags_codes = tag_filter(header.subscription, expression_type)
            else:
                record_filter = carried_filter(expression_type, header.subscription)
        except SubscriptionParseError:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, remark=SUBSCRIPTION_PARSE_FAILED_REMARK, ext_fields={}
            )
        return self._read(request, header, tags_codes, record_filter)

    def plain_pull(
        self,
        group: str,
        topic: str,
        queue_id: int,
        sys_flag: int,
        sub_version: int,
        subscription: str | None,
        expression_type: str | None,
    ) -> tuple[frozenset[int] | None] | None:
        """For the compiled request path (``server.remoting.request_path``): ``(tag filter,)`` when a
        pull with these fields passes every check of ``_pull_registered`` (a registered server only),
        found without any side effect; None for anything else (the Python path then answers it).

        The success path of ``_pull_registered``, condition for condition: the group's config exists
        (looked up without the auto-creation ``find_group`` does) and may consume; the topic exists,
        is readable and has the queue; the subscription is the request's (a tag expression that
        parses) or the one the group's heartbeat declared (clustering, or broadcasting allowed; not
        older than the request's ``subVersion``); the expression type is a tag type.
        """
        broker = self._broker
        if broker is None:
            return None
        config = broker.groups.get(group)
        if config is None or not config.consume_enable:
            return None
        topic_config = broker.store.topic_config(topic)
        if topic_config is None or not topic_config.perm & 4:  # PermName.PERM_READ
            return None
        if not 0 <= queue_id < topic_config.read_queue_nums:
            return None
        if sys_flag & PULL_SUBSCRIPTION_FLAG:
            if expression_type is not None and expression_type not in (TAG, ""):
                return None
            try:
                return (tag_filter(subscription, expression_type),)
            except SubscriptionParseError:
                return None
        consumer_group = broker.consumers.get(group)
        if consumer_group is None:
            return None
        if not config.consume_broadcast_enable and consumer_group.message_model == "BROADCASTING":
            return None
        declared = consumer_group.subscriptions.get(topic)
        if declared is None or declared.subVersion < sub_version:
            return None
        if declared.expressionType is not None and declared.expressionType not in (TAG, ""):
            return None
        return (declared_filter(declared.subString, declared.codeSet),)

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """The commit-offset flag's commit of a first pass, for the compiled request path (which
        calls it after its read, where ``_pull_registered`` commits)."""
        self._broker.commit_offset(group, topic, queue_id, offset)  # type: ignore[union-attr]

    @property
    def stats(self) -> PullStats:
        """What this processor served (GET_BROKER_RUNTIME_INFO's figures)."""
        return self._stats

    def _pull_registered(
        self,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        peer: str,
        broker: BrokerController,
        commit: bool,
    ) -> RemotingCommand:
        """The broker's checks in its order, for a server that knows consumer groups."""
        group = header.consumer_group
        config = broker.find_group(group)
        if config is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark=group_not_exist_remark(group), ext_fields={}
            )
        if not config.consume_enable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, remark=group_no_permission_remark(group), ext_fields={}
            )
        topic_config = broker.store.topic_config(header.topic)
        if topic_config is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, remark=topic_not_exist_remark(header.topic), ext_fields={}
            )
        if not topic_config.perm & 4:  # PermName.PERM_READ
            return request.make_response(
                ResponseCode.NO_PERMISSION, remark=topic_not_readable_remark(header.topic), ext_fields={}
            )
        if not 0 <= header.queue_id < topic_config.read_queue_nums:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=illegal_queue_remark(
                    header.queue_id, header.topic, topic_config.read_queue_nums, peer
                ),
                ext_fields={},
            )
        tags_codes: frozenset[int] | None = None
        record_filter: RecordFilter | None = None
        if header.has_subscription_flag:
            expression_type = header.expression_type
            subscription = header.subscription
            try:
                if expression_type is None or expression_type in (TAG, ""):
                    tags_codes = tag_filter(subscription, expression_type)
                else:
                    record_filter = carried_filter(expression_type, subscription)
            except SubscriptionParseError:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                    remark=SUBSCRIPTION_PARSE_FAILED_REMARK,
                    ext_fields={},
                )
        else:
            consumer_group = broker.consumers.get(group)
            if consumer_group is None:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST, remark=GROUP_INFO_NOT_EXIST_REMARK, ext_fields={}
                )
            if not config.consume_broadcast_enable and consumer_group.message_model == "BROADCASTING":
                return request.make_response(
                    ResponseCode.NO_PERMISSION, remark=no_broadcast_remark(group), ext_fields={}
                )
            declared = consumer_group.subscriptions.get(header.topic)
            if declared is None:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST, remark=SUBSCRIPTION_NOT_EXIST_REMARK, ext_fields={}
                )
            if declared.subVersion < header.sub_version:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_NOT_LATEST, remark=SUBSCRIPTION_NOT_LATEST_REMARK, ext_fields={}
                )
            expression_type = declared.expressionType
            if is_tag_type(expression_type):
                tags_codes = declared_filter(declared.subString, declared.codeSet)
            else:
                # ``ConsumerFilterManager.get``: registered from the heartbeat only if it compiled.
                try:
                    compiled = compile_filter(expression_type, declared.subString)  # type: ignore[arg-type]
                except FilterCompileError:
                    return request.make_response(
                        ResponseCode.FILTER_DATA_NOT_EXIST, remark=FILTER_DATA_NOT_EXIST_REMARK, ext_fields={}
                    )
                if not declared.classFilterMode:
                    record_filter = SqlRecordFilter(compiled)
        if not is_tag_type(expression_type) and not broker.settings.enable_property_filter:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, remark=property_filter_remark(expression_type), ext_fields={}
            )
        response = self._read(request, header, tags_codes, record_filter)
        if response.code == ResponseCode.PULL_OFFSET_MOVED:
            # the master's statistics record, put before the offset is committed, as the broker does
            fields = response.ext_fields or {}
            broker.offset_moved(
                group, header.topic, header.queue_id, header.queue_offset, int(fields["nextBeginOffset"])
            )
        if commit and header.sys_flag & PULL_COMMIT_OFFSET_FLAG:
            broker.commit_offset(group, header.topic, header.queue_id, header.commit_offset)
        return response

    def _read(
        self,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        tags_codes: frozenset[int] | None,
        record_filter: RecordFilter | None = None,
    ) -> RemotingCommand:
        """The store read and its answer, once the request passed every check."""
        if header.max_msg_nums < 0 and (
            self._store.min_offset(header.topic, header.queue_id)
            <= header.queue_offset
            < self._store.max_offset(header.topic, header.queue_id)
        ):
            # The broker's store sizes an ArrayList with maxMsgNums once it has entries to read, and
            # the exception ends up as the answer (JDK 17's text, as the 4.9.7 broker sent it).
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, remark=negative_capacity_remark(header.max_msg_nums)
            )
        started = time.monotonic()
        result = self._store.get_message(
            header.topic, header.queue_id, header.queue_offset, header.max_msg_nums, tags_codes, record_filter
        )
        status = result.status.name
        self._stats.record(status == "FOUND", len(result.buffers), int((time.monotonic() - started) * 1000))
        if status in _EMPTY_QUEUE_STATUSES:
            code = ResponseCode.PULL_OFFSET_MOVED if header.queue_offset != 0 else ResponseCode.PULL_NOT_FOUND
        else:
            code = STATUS_CODES[status]
        fields = response_fields(
            result.next_begin_offset, result.min_offset, result.max_offset, request.serialize_type
        )
        body = None
        if code == ResponseCode.SUCCESS:
            # A copy: a memoryview would pin the store's mapping while the answer waits to be sent.
            body = b"".join(result.buffers)
        return request.make_response(code, remark=status, ext_fields=fields, body=body)
