"""A held pull is answered by the SEND that wakes it, in the SEND's own turn of the loop, after the
SEND's answer (issue 33's end-to-end row): through the compiled request path when it finds messages,
whose answer must be the Python pass's byte for byte, else through the Python pass.

In process, over ``serve --writable``'s dispatcher, with connections on transports that record
what is written, so "in the same turn" is "before this test awaits anything".
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from protocol.codes import RPC_TYPE_RESPONSE, LanguageCode, RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.frame import FrameDecoder, encode_frame
from protocol.message_id import UniqueIdGenerator
from protocol.send_message import SendMessageRequestHeader, client_properties
from server.remoting.buffer_budget import BufferBudget
from server.remoting.connection import RemotingConnection
from server.remoting.processors.pull_message import PullMessageProcessor
from server.remoting.processors.woken_pull import WokenPull
from server.remoting.refusal import IncompleteRequests
from server.remoting.request_path import COMPILED
from server.remoting.write_budget import WriteBudget
from tests.support.pulls import heartbeat, records

TOPIC = "Woken"
GROUP = "woken_group"
_ids = UniqueIdGenerator()


class _Transport:
    """Records every write of answers (in ``log``, shared by the test's transports, with this one's
    name); the broker's own requests (NOTIFY_CONSUMER_IDS_CHANGED after a heartbeat) are left out."""

    def __init__(self, name: str, log: list[tuple[str, bytes]], port: int) -> None:
        self.name = name
        self.log = log
        self.port = port

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", self.port) if name == "peername" else default

    def write(self, data: bytes) -> None:
        if any(c.flag & RPC_TYPE_RESPONSE for c in FrameDecoder().feed(bytes(data))):
            self.log.append((self.name, bytes(data)))

    def writelines(self, parts: Any) -> None:
        self.write(b"".join(bytes(p) for p in parts))

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


def _connection(srv: Any, name: str, log: list[tuple[str, bytes]], port: int) -> RemotingConnection:
    connection = RemotingConnection(
        srv.dispatcher,
        idle_timeout=0,
        budget=BufferBudget(),
        write_budget=WriteBudget(),
        incomplete=IncompleteRequests(),
        woken=srv.changes,
    )
    connection.connection_made(_Transport(name, log, port))  # type: ignore[arg-type]
    return connection


def _answers(log: list[tuple[str, bytes]], name: str) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    return [command for who, data in log if who == name for command in decoder.feed(data)]


def _send(queue_id: int, tag: str = "TagA", opaque: int = 77) -> bytes:
    header = SendMessageRequestHeader(
        "producer_group", TOPIC, "TBW102", 4, queue_id, 0, 1700000000000, 0,
        client_properties(f"key-{opaque}", tag, None, _ids.next_id()), 0, False, None, False, "b1",
    )  # fmt: skip
    command = RemotingCommand(
        RequestCode.SEND_MESSAGE_V2, LanguageCode.JAVA, 407, opaque, 0, None,
        header.to_ext_fields(v2=True), b"woken body", SerializeType.JSON,
    )  # fmt: skip
    return encode_frame(command)


def _pull(
    queue_id: int,
    offset: int,
    *,
    subscription: str | None = "*",
    serialize: SerializeType = SerializeType.JSON,
    opaque: int = 500,
) -> bytes:
    """A push consumer's pull, held up to 600 s: sysFlag 7 (commit, suspend, subscription) with
    ``subscription``, or 3 (the heartbeat's subscription) with None."""
    fields = {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": "3", "commitOffset": "0", "suspendTimeoutMillis": "600000",
        "subVersion": "1",
    }  # fmt: skip
    if subscription is not None:
        fields |= {"sysFlag": "7", "subscription": subscription, "expressionType": "TAG"}
    command = RemotingCommand(
        RequestCode.PULL_MESSAGE, LanguageCode.JAVA, 407, opaque, 0, None, fields, None, serialize
    )
    return encode_frame(command)


def _processor(srv: Any) -> PullMessageProcessor:
    return srv.dispatcher._sync[RequestCode.PULL_MESSAGE].__self__  # type: ignore[no-any-return]


async def _turns(n: int = 3) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def _registered(srv: Any, connection: RemotingConnection, topics: str = "*") -> None:
    """The consumer's HEART_BEAT (answered from a task), so its pulls may go without a subscription."""
    body = heartbeat("127.0.0.1@woken", GROUP, {TOPIC: topics})
    connection.data_received(encode_frame(RemotingCommand(RequestCode.HEART_BEAT, body=body, opaque=1)))
    await _turns(5)


async def test_a_woken_pull_is_answered_in_the_sends_own_turn_after_the_send(writable_server) -> None:
    srv, store = writable_server
    store.create_topic(TOPIC)
    log: list[tuple[str, bytes]] = []
    consumer = _connection(srv, "consumer", log, 40001)
    producer = _connection(srv, "producer", log, 40002)
    await _registered(srv, consumer)
    consumer.data_received(_pull(0, 0, subscription=None))
    await _turns()
    assert [a.opaque for a in _answers(log, "consumer")] == [1]  # the heartbeat's; the pull is held
    producer.data_received(_send(0))
    # nothing awaited since the SEND's read: its answer, then the pull's, both written already
    assert [who for who, _ in log] == ["consumer", "producer", "consumer"]
    (sent,) = _answers(log, "producer")
    assert sent.code == ResponseCode.SUCCESS
    pulled = _answers(log, "consumer")[-1]
    assert (pulled.opaque, pulled.code, pulled.remark) == (500, ResponseCode.SUCCESS, "FOUND")
    assert pulled.ext_fields["nextBeginOffset"] == "1"
    (record,) = records(pulled.body)
    assert b"woken body" in record
    await _turns()
    assert len(_answers(log, "consumer")) == 2  # the hold's task ended without writing again
    assert srv.changes.waiting(TOPIC, 0) == 0 and _processor(srv).holds.held == 0


CASES = {
    "subscription posted, JSON": ({"subscription": "*"}, "TagA", "*"),
    "the heartbeat's subscription": ({"subscription": None}, "TagA", "*"),
    "a ROCKETMQ-serialized request": ({"serialize": SerializeType.ROCKETMQ}, "TagA", "*"),
    "a tag filter that matches": ({"subscription": "TagB || TagA"}, "TagA", "*"),
    "a tag filter that does not match": ({"subscription": "TagB"}, "TagA", "*"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_the_compiled_woken_answer_is_the_python_pass_byte_for_byte(writable_server, case) -> None:
    """Two consumers hold the same pull (same opaque) on one queue: one is answered by the compiled
    pass, the other by the Python pass (``woken_answer``); one SEND wakes both."""
    pull_options, tag, declared = CASES[case]
    srv, store = writable_server
    store.create_topic(TOPIC)
    srv.changes.turn_budget = 60.0  # both wake-ups in the SEND's turn however slow the machine
    processor = _processor(srv)
    log: list[tuple[str, bytes]] = []
    compiled_side = _connection(srv, "compiled", log, 40001)
    python_side = _connection(srv, "python", log, 40003)
    producer = _connection(srv, "producer", log, 40002)
    await _registered(srv, compiled_side, declared)
    await _registered(srv, python_side, declared)
    compiled = processor.compiled_woken
    outcomes: list[bool] = []

    def only_one_side(waiting: Any) -> bytes | None:
        if waiting.channel is python_side.channel or compiled is None:
            return None
        frame = compiled(waiting)
        outcomes.append(frame is not None)
        return frame

    processor.compiled_woken = only_one_side
    for side in (compiled_side, python_side):
        side.data_received(_pull(2, 0, **pull_options))
    await _turns()
    log.clear()
    producer.data_received(_send(2, tag))
    (by_compiled,) = [data for who, data in log if who == "compiled"]
    (by_python,) = [data for who, data in log if who == "python"]
    assert by_compiled == by_python
    answer = _answers(log, "python")[0]
    if case == "a tag filter that does not match":
        assert answer.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert outcomes == ([False] if COMPILED else [])  # the compiled pass leaves it
    else:
        assert (answer.code, answer.remark, answer.ext_fields["nextBeginOffset"]) == (0, "FOUND", "1")
        assert outcomes == ([True] if COMPILED else [])


async def test_a_held_pull_whose_connection_closes_leaves_no_wake_up_behind(writable_server) -> None:
    srv, store = writable_server
    store.create_topic(TOPIC)
    log: list[tuple[str, bytes]] = []
    consumer = _connection(srv, "consumer", log, 40001)
    for queue_offset in range(3):  # three pulls held on one queue, one connection
        consumer.data_received(_pull(1, 0, opaque=600 + queue_offset))
    await _turns()
    assert srv.changes.waiting(TOPIC, 1) == 3 and _processor(srv).holds.held == 3
    consumer.connection_lost(None)
    await _turns()
    assert srv.changes.waiting(TOPIC, 1) == 0 and _processor(srv).holds.held == 0
    producer = _connection(srv, "producer", log, 40002)
    producer.data_received(_send(1))
    await _turns()
    assert len(_answers(log, "consumer")) == 0


async def test_a_thousand_pulls_held_on_one_queue_cost_a_send_to_another_nothing(
    writable_server, monkeypatch
) -> None:
    """1,000 consumers hold a pull on queue 0: a SEND to queue 1 wakes none of them; one to queue 0
    answers each once, starting in its own turn (as many as one turn's budget runs, the rest at the
    next turns: ``test_one_turn_runs_the_wake_ups_its_budget_allows_and_later_turns_the_rest``)."""
    srv, store = writable_server
    store.create_topic(TOPIC)
    log: list[tuple[str, bytes]] = []
    consumers = [_connection(srv, f"c{i}", log, 41000 + i) for i in range(1000)]
    for consumer in consumers:
        consumer.data_received(_pull(0, 0))
    await _turns()
    log.clear()
    assert srv.changes.waiting(TOPIC, 0) == 1000
    woken_calls = []
    wake = WokenPull.__call__

    def counted(self: WokenPull) -> None:
        woken_calls.append(self)
        wake(self)

    monkeypatch.setattr(WokenPull, "__call__", counted)
    producer = _connection(srv, "producer", log, 40002)
    producer.data_received(_send(1, opaque=1))
    assert [who for who, _ in log] == ["producer"] and woken_calls == []
    assert srv.changes.woken == [] and srv.changes.waiting(TOPIC, 0) == 1000
    producer.data_received(_send(0, opaque=2))
    assert [who for who, _ in log[:3]] == ["producer", "producer", "c0"]  # the first, in the SEND's turn
    for _ in range(2000):
        if len(log) == 1002:
            break
        await asyncio.sleep(0)
    assert sorted(who for who, _ in log[2:]) == sorted(f"c{i}" for i in range(1000))
    assert len(woken_calls) == 1000  # one wake-up each
    assert all(_answers(log, f"c{i}")[0].remark == "FOUND" for i in range(0, 1000, 97))
    await _turns()
    assert srv.changes.waiting(TOPIC, 0) == 0 and _processor(srv).holds.held == 0


async def test_one_turn_runs_the_wake_ups_its_budget_allows_and_later_turns_the_rest(writable_server) -> None:
    """With no time to spare in a turn (a budget of 0: one wake-up per turn), a SEND that wakes 300
    held pulls answers one in its own turn and one in each later turn, in the order they were held;
    another read in the same turn does not run the ones left for later (one budget per turn, not
    per read). 10,000 pulls held on one queue woke in the SEND's turn: 114-146 ms of the loop."""
    srv, store = writable_server
    store.create_topic(TOPIC)
    srv.changes.turn_budget = 0.0
    log: list[tuple[str, bytes]] = []
    consumers = [_connection(srv, f"c{i}", log, 41000 + i) for i in range(300)]
    for consumer in consumers:
        consumer.data_received(_pull(0, 0))
    await _turns()
    log.clear()
    producer = _connection(srv, "producer", log, 40002)
    other = _connection(srv, "other", log, 40003)
    producer.data_received(_send(0, opaque=2))
    assert [who for who, _ in log] == ["producer", "c0"]
    other.data_received(_send(1, opaque=3))  # wakes nobody, and runs none of the 299 left
    assert [who for who, _ in log] == ["producer", "c0", "other"]
    turns = 0
    while len(log) < 302 and turns < 2000:
        before = len(log)
        await asyncio.sleep(0)
        assert len(log) - before <= 1  # the scheduled run's one
        turns += 1
    assert [who for who, _ in log[3:]] == [f"c{i}" for i in range(1, 300)]
    assert turns >= 299
    assert all(_answers(log, f"c{i}")[0].remark == "FOUND" for i in range(0, 300, 37))
    await _turns()
    assert srv.changes.waiting(TOPIC, 0) == 0 and _processor(srv).holds.held == 0


async def test_a_woken_pass_that_fails_is_answered_as_a_failed_one(writable_server, monkeypatch) -> None:
    srv, store = writable_server
    store.create_topic(TOPIC)
    log: list[tuple[str, bytes]] = []
    consumer = _connection(srv, "consumer", log, 40001)
    producer = _connection(srv, "producer", log, 40002)
    consumer.data_received(_pull(3, 0))
    await _turns()

    def broken(self: Any, waiting: Any) -> None:
        raise RuntimeError("the woken pass failed")

    monkeypatch.setattr(PullMessageProcessor, "answer_woken", broken)
    producer.data_received(_send(3))
    assert _answers(log, "producer")[0].code == ResponseCode.SUCCESS  # the SEND is not touched
    await _turns()
    (answer,) = _answers(log, "consumer")
    assert (answer.opaque, answer.code) == (500, ResponseCode.SYSTEM_ERROR)
    assert "request code 11" in (answer.remark or "")
    assert srv.changes.waiting(TOPIC, 3) == 0 and _processor(srv).holds.held == 0
