"""Client bookkeeping: HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG, QUERY_TOPIC_CONSUME_BY_WHO.

Read-only (the functions below), the server answers them as the broker does but keeps nothing;
under ``serve --writable`` ``ClientManageProcessor`` registers clients in the broker's groups.

Java clients heartbeat every broker in their routes, unregister on shutdown, and ``mqadmin
queryMsgById`` asks who consumes the topic. The answers mirror the 4.9.7 broker's: SUCCESS for a
well-formed heartbeat (whose body must be HeartbeatData JSON, as the broker decodes it, within the
bounds of ``protocol.heartbeat``; the bodies of UNREGISTER_CLIENT and GET_CONSUMER_LIST_BY_GROUP are
never read, as the broker never reads them), SUCCESS with
an empty header map for UNREGISTER_CLIENT, and an empty ``groupList`` for QUERY_TOPIC_CONSUME_BY_WHO,
which ends mqadmin's message-track step. ``clientID`` and ``topic`` are ``@CFNotNull``, but the 4.9.7
broker's header decoder only logs a missing one and carries on with null, so both answer SUCCESS
without them too (checked against the real broker, over JSON and ROCKETMQ: RELIABILITY.md).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Iterator

import msgspec

from protocol.codes import LanguageCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import UnregisterClientRequestHeader
from protocol.errors import JsonBodyError
from protocol.heartbeat import (
    AnyObject,
    ClientHeartbeat,
    ClientSubscription,
    HeartbeatBodyError,
    decode_heartbeat,
)
from protocol.json_body import decode_json_body
from server.broker.controller import BrokerController
from server.broker.message_filter import FilterCompileError, compile_filter, is_tag_type
from server.loop_budget import LoopBudget
from server.remoting.channel import CURRENT_CHANNEL, RemotingChannel
from server.remoting.reply import exception_answer, system_error

#: ``GroupList`` with no groups, as fastjson writes it.
EMPTY_GROUP_LIST = b'{"groupList":[]}'


def heart_beat(request: RemotingCommand) -> RemotingCommand:
    """SUCCESS for a HeartbeatData JSON object, SYSTEM_ERROR (as the broker's failed decode) else.

    Nothing in the body is kept, so it is decoded as ``AnyObject``: its contents are skipped, not
    built, and ``protocol.heartbeat`` refuses an oversized body before parsing it.
    """
    try:
        decode_heartbeat(request.body, AnyObject)
    except HeartbeatBodyError as exc:
        return exception_answer(request, str(exc))
    channel = CURRENT_CHANNEL.get()
    if channel is not None:
        channel.heart_beat()  # a producer's or consumer's connection: kept at the connection limit
    return request.make_response(ResponseCode.SUCCESS)


def unregister_client(request: RemotingCommand) -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, ext_fields={})


def query_topic_consume_by_who(request: RemotingCommand) -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, body=EMPTY_GROUP_LIST)


class CheckClientBody(msgspec.Struct):
    """``CheckClientRequestBody``: the subscription a consumer is about to use."""

    subscriptionData: ClientSubscription | None = None


def _language_name(language: int | LanguageCode) -> str:
    try:
        return LanguageCode(language).name
    except ValueError:
        return str(language)


def property_filter_refused(expression_type: str) -> str:
    return f"The broker does not support consumer to filter message by {expression_type}"


#: Our remarks where the broker answers with a Java exception's text (RELIABILITY.md).
NO_CHECK_BODY_REMARK = "CheckClientRequestBody: the request has no body"
#: A heartbeat body past this many bytes (hundreds of groups) is registered in slices of ``SLICE_S``
#: seconds of work, the loop serving other requests between them (``server.loop_budget``).
SLICED_BODY_BYTES = 64 * 1024
SLICE_S = 0.002

BAD_CHECK_BODY_REMARK = "CheckClientRequestBody: the request body is not a JSON object"


class ClientManageProcessor:
    """``ClientManageProcessor`` for a broker that registers clients (``serve --writable``).

    A heartbeat registers the client's producer and consumer groups on the connection it came over
    (``server.broker.controller.BrokerController.heartbeat``); UNREGISTER_CLIENT removes it from the
    groups it names; CHECK_CLIENT_CONFIG accepts tag subscriptions, refuses SQL92 ones as a broker
    without ``enablePropertyFilter`` does when that is off, and otherwise compiles the expression:
    SUBSCRIPTION_PARSE_FAILED with the compiler's message when it does not compile.
    QUERY_TOPIC_CONSUME_BY_WHO lists the groups subscribed to a topic now or holding an offset in it.
    """

    def __init__(self, broker: BrokerController, budget: LoopBudget | None = None) -> None:
        self._broker = broker
        #: Heartbeats take turns with the other requests (``server.loop_budget``): a thousand
        #: clients connecting at once do not hold everyone else up for their whole burst.
        self._budget = budget if budget is not None else LoopBudget()

    def heart_beat(self, request: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        """Registered at once when the loop's heartbeat budget allows and the body is small (the
        common case: one client, a few groups); otherwise in turns, a slice at a time."""
        body = request.body
        # read now: a heartbeat in turns runs in a task of its own
        channel = CURRENT_CHANNEL.get()
        if not self._budget.free() or (body is not None and len(body) > SLICED_BODY_BYTES):
            return self._heart_beat_in_turns(request, channel)
        started = time.perf_counter()
        refused: list[RemotingCommand] = []
        try:
            for _ in self._heart_beat(request, channel, refused):
                pass
            return refused[0] if refused else request.make_response(ResponseCode.SUCCESS)
        finally:
            self._budget.charge(time.perf_counter() - started)

    async def _heart_beat_in_turns(
        self, request: RemotingCommand, channel: RemotingChannel | None
    ) -> RemotingCommand:
        budget = self._budget
        refused: list[RemotingCommand] = []
        steps = self._heart_beat(request, channel, refused)
        try:
            while True:
                if not budget.free():
                    await budget.turn()
                started = time.perf_counter()
                try:
                    for _ in steps:
                        if time.perf_counter() - started >= SLICE_S:
                            break
                    else:
                        return refused[0] if refused else request.make_response(ResponseCode.SUCCESS)
                finally:
                    budget.charge(time.perf_counter() - started)
        finally:
            steps.close()  # a cancelled heartbeat lets go of the tables it held

    def _heart_beat(
        self, request: RemotingCommand, channel: RemotingChannel | None, refused: list[RemotingCommand]
    ) -> Iterator[None]:
        """The registration's steps; a refusal (the answer instead of SUCCESS) put into ``refused``."""
        try:
            heartbeat = decode_heartbeat(request.body, ClientHeartbeat)
        except HeartbeatBodyError as exc:
            refused.append(exception_answer(request, str(exc)))
            return
        if channel is None:
            refused.append(system_error(request, "HEART_BEAT outside a connection"))
            return
        yield from self._broker.heartbeat_steps(
            channel, heartbeat, _language_name(request.language), request.version
        )
        channel.heart_beat()  # a registered client's connection: kept at the connection limit

    def unregister_client(self, request: RemotingCommand) -> RemotingCommand:
        header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        channel = CURRENT_CHANNEL.get()
        if channel is not None:
            self._broker.unregister(channel, header.producer_group, header.consumer_group)
        return request.make_response(ResponseCode.SUCCESS, ext_fields={})

    def check_client_config(self, request: RemotingCommand) -> RemotingCommand:
        if request.body is None:
            # The broker decodes the body unconditionally and fails on none (golden: "check client
            # config: no body", a NullPointerException's text; ours names what is missing).
            return exception_answer(request, NO_CHECK_BODY_REMARK)
        subscription = None
        if request.body:
            try:
                subscription = decode_json_body(request.body, CheckClientBody).subscriptionData
            except JsonBodyError:  # nested too deeply included (issue 31)
                return exception_answer(request, BAD_CHECK_BODY_REMARK)
        if subscription is None or is_tag_type(subscription.expressionType):
            return request.make_response(ResponseCode.SUCCESS)
        expression_type = subscription.expressionType or ""
        if not self._broker.settings.enable_property_filter:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, remark=property_filter_refused(expression_type)
            )
        try:
            compile_filter(expression_type, subscription.subString)
        except FilterCompileError as exc:
            return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, remark=str(exc))
        return request.make_response(ResponseCode.SUCCESS)

    def query_topic_consume_by_who(self, request: RemotingCommand) -> RemotingCommand:
        topic = (request.ext_fields or {}).get("topic") or ""
        groups = set(self._broker.consumers.groups_of_topic(topic)) | self._broker.offsets.groups_of_topic(
            topic
        )
        return request.make_response(
            ResponseCode.SUCCESS, body=msgspec.json.encode({"groupList": sorted(groups)}), ext_fields={}
        )
