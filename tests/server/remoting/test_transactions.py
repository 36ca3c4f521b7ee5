"""Transactions over the wire against ``serve --writable`` in process: half messages, END_TRANSACTION
and the broker's check-back.

Expected answers are the real 4.9.7 broker's, as recorded in the consume-side golden capture
(``tests/server/golden/consume_side_broker_4.9.7.json``, steps "send half message ..." to "end
transaction: commit from the check-back"): codes, remarks, the committed record's properties, the
CHECK_TRANSACTION_STATE header and body.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.message import decode_message
from server.app import QueryServer, ServerSettings
from server.broker.controller import ConsumeSettings
from server.broker.transactions import TransactionSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from tests.support.harness import RawClient
from tests.support.pulls import pull_fields, records

TOPIC = "TxTopic"
GROUP = "TxProducer"
RPC_ONEWAY = 2
#: How long a test waits for a check-back that comes every 100-200 ms: long enough for a machine
#: whose disk writes stall the loop for seconds (CI once waited 5 s in vain under such load).
CHECK_WAIT = 20.0


def half_send(tag: str, unique: str, body: bytes, born: int | None = None) -> RemotingCommand:
    """SEND_MESSAGE of a half message as the Java TransactionMQProducer sends it (golden step 55),
    born now (a half message born over 72 h ago is discarded, not checked)."""
    properties = (
        f"TAGS\x01{tag}\x02UNIQ_KEY\x01{unique}\x02WAIT\x01true\x02TRAN_MSG\x01true\x02PGROUP\x01{GROUP}\x02"
    )
    return RawClient.request(
        RequestCode.SEND_MESSAGE,
        {
            "producerGroup": GROUP,
            "topic": TOPIC,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": "2",
            "sysFlag": "4",
            "bornTimestamp": str(int(time.time() * 1000) if born is None else born),
            "flag": "0",
            "properties": properties,
            "reconsumeTimes": "0",
            "unitMode": "false",
            "batch": "false",
        },
        body,
    )


def end_tx(
    commit_log_offset: int, queue_offset: int, kind: int | None, *, group: str = GROUP, check: bool = False
) -> RemotingCommand:
    fields = {
        "producerGroup": group,
        "tranStateTableOffset": str(queue_offset),
        "commitLogOffset": str(commit_log_offset),
        "commitOrRollback": str(kind),
        "fromTransactionCheck": "true" if check else "false",
        "msgId": "ignored",
        "transactionId": "ignored",
    }
    if kind is None:
        del fields["commitOrRollback"]
    return RawClient.request(RequestCode.END_TRANSACTION, fields)


def producer_heartbeat() -> RemotingCommand:
    body = {"clientID": "tx-client", "consumerDataSet": [], "producerDataSet": [{"groupName": GROUP}]}
    return RawClient.request(RequestCode.HEART_BEAT, body=json.dumps(body).encode())


def offset_of(msg_id: str) -> int:
    """The CommitLog offset in an offset message id (its last 16 hex digits)."""
    return int(msg_id[-16:], 16)


async def pull_real_queue(client: RawClient) -> list[bytes]:
    answer = await client.call(RawClient.request(RequestCode.PULL_MESSAGE, pull_fields(TOPIC, 2, 0, 32)))
    return records(answer.body) if answer.code == ResponseCode.SUCCESS else []


Start = Callable[..., Awaitable[tuple[QueryServer, WritableStore]]]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    """A writable server over an empty store with the given transaction settings."""
    started: list[tuple[QueryServer, WritableStore]] = []

    async def make(**settings: int | bool) -> tuple[QueryServer, WritableStore]:
        config = StoreConfig.for_store(
            tmp_path / f"store{len(started)}", mapped_file_size_commit_log=256 * 1024, max_message_size=4096
        )
        store = WritableStore(config)
        consume = ConsumeSettings(transactions=TransactionSettings(**settings))  # type: ignore[arg-type]
        srv = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store, consume=consume))
        await srv.start()
        started.append((srv, store))
        return srv, store

    yield make
    for srv, store in started:
        await srv.stop()
        store.close()


@pytest.fixture
async def client_of() -> AsyncIterator[Callable[[QueryServer], Awaitable[RawClient]]]:
    clients: list[RawClient] = []

    async def connect(srv: QueryServer) -> RawClient:
        client = await RawClient.connect("127.0.0.1", srv.port)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        await client.close()


async def test_commit_rollback_and_the_broker_refusals(start: Start, client_of) -> None:  # type: ignore[no-untyped-def]
    srv, store = await start()
    client = await client_of(srv)
    sent = []
    for tag, n, body in (
        ("Txcommit", 4, b"half-commit"),
        ("Txrollback", 5, b"half-rollback"),
        ("Txunknown", 6, b"x"),
    ):
        answer = await client.call(half_send(tag, f"C0FFEE0000000000000000000000000{n}", body))
        assert answer.code == ResponseCode.SUCCESS
        sent.append(answer.ext_fields)
    # The answers name the queue the producer chose and the half queue's offsets (golden 55-57).
    assert [(f["queueId"], f["queueOffset"]) for f in sent] == [("2", "0"), ("2", "1"), ("2", "2")]
    commit_at, rollback_at, unknown_at = (offset_of(f["msgId"]) for f in sent)
    # Nothing is visible in the real topic while undecided.
    assert await pull_real_queue(client) == []
    for request, code, remark in [
        (end_tx(commit_at, 0, 8, group="OtherGroup"), 1, "The producer group wrong"),
        (end_tx(commit_at, 77, 8), 1, "The transaction state table offset wrong"),
        (end_tx(999_999_999, 1, 8), 1, "Find prepared transaction message failed"),
        (end_tx(commit_at, 0, 8), 0, None),
        (end_tx(rollback_at, 1, 12), 0, "not set any response code"),
        (
            end_tx(unknown_at, 2, 99),
            1,
            "org.apache.rocketmq.remoting.exception.RemotingCommandException: commitOrRollback field wrong, "
            "org.apache.rocketmq.common.protocol.header.EndTransactionRequestHeader.checkFields"
            "(EndTransactionRequestHeader.java:60)",
        ),
        (
            end_tx(unknown_at, 2, None),
            1,
            'java.lang.NullPointerException: Cannot invoke "java.lang.Integer.intValue()" because '
            '"this.commitOrRollback" is null, org.apache.rocketmq.common.protocol.header.'
            "EndTransactionRequestHeader.checkFields(EndTransactionRequestHeader.java:48)",
        ),
    ]:
        answer = await client.call(request)
        assert (answer.code, answer.remark, answer.ext_fields or {}) == (code, remark, {})
    # UNKNOW (0) gets no answer: the next answer on the connection is the heartbeat's.
    await client.send(end_tx(unknown_at, 2, 0))
    beat = producer_heartbeat()
    assert (await client.call(beat)).opaque == beat.opaque
    # The committed message, as the real broker stored it (golden step 66).
    [committed] = [decode_message(r) for r in await pull_real_queue(client)]
    assert (committed.topic, committed.queue_id, committed.queue_offset) == (TOPIC, 2, 0)
    assert (committed.sys_flag, committed.prepared_transaction_offset, committed.body) == (
        8,
        commit_at,
        b"half-commit",
    )
    assert committed.properties == {
        "REAL_TOPIC": TOPIC,
        "TRAN_MSG": "true",
        "UNIQ_KEY": "C0FFEE00000000000000000000000004",
        "CLUSTER": "DefaultCluster",
        "PGROUP": GROUP,
        "WAIT": "true",
        "TAGS": "Txcommit",
        "REAL_QID": "2",
    }
    assert list(committed.properties) == list(
        ["REAL_TOPIC", "TRAN_MSG", "UNIQ_KEY", "CLUSTER", "PGROUP", "WAIT", "TAGS", "REAL_QID"]
    )
    # One op record per decision: body = the half's queue offset, tag d.
    ops = store.reader.get_message("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, 0, 32)
    decoded = [decode_message(b) for b in ops.buffers]
    assert [(m.body, m.tags, m.sys_flag) for m in decoded] == [(b"0", "d", 0), (b"1", "d", 0)]
    assert decoded[0].properties == {"TAGS": "d", "WAIT": "true"}
    # The half topic is listed as the broker lists it: one queue, read-write.
    half = store.topic_config("RMQ_SYS_TRANS_HALF_TOPIC")
    assert half is not None and (half.read_queue_nums, half.write_queue_nums, half.perm) == (1, 1, 6)


async def test_the_topic_table_lists_the_half_topic_once_used_and_never_the_op_topic(
    start: Start, client_of, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """As the 4.9.7 broker's table (golden ``broker_config_4.9.7/topics.json``): no half topic in a
    fresh table, one data-version bump when it is created, and no op topic ever, not even after a
    reopen puts back the topics with records that the table lacks."""
    srv, store = await start(check_interval_ms=3_600_000)
    assert store.topic_config("RMQ_SYS_TRANS_HALF_TOPIC") is None
    client = await client_of(srv)
    await client.call(half_send("Txcommit", "C0FFEE00000000000000000000000004", b"b"))  # creates TxTopic
    before = store.topics.counter
    answer = await client.call(half_send("Txrollback", "C0FFEE00000000000000000000000005", b"b"))
    assert store.topics.counter == before  # the half topic was created by the first one
    assert (await client.call(end_tx(offset_of(answer.ext_fields["msgId"]), 1, 12))).code == 0
    assert store.reader.max_offset("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) == 1
    assert store.topic_config("RMQ_SYS_TRANS_OP_HALF_TOPIC") is None
    assert store.topics.counter == before
    await srv.stop()
    store.close()
    listed = json.loads((tmp_path / "store0" / "config" / "topics.json").read_text())["topicConfigTable"]
    assert "RMQ_SYS_TRANS_HALF_TOPIC" in listed and "RMQ_SYS_TRANS_OP_HALF_TOPIC" not in listed
    reopened = WritableStore(StoreConfig.for_store(tmp_path / "store0"))
    try:
        assert reopened.topic_config("RMQ_SYS_TRANS_OP_HALF_TOPIC") is None
        assert reopened.reader.max_offset("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) == 1
    finally:
        reopened.close()


async def test_a_refused_transaction_type_is_answered_in_json(start: Start, client_of) -> None:  # type: ignore[no-untyped-def]
    """``checkFields`` throws while the header is decoded: the broker's answer is JSON whatever the
    request's serialization (golden: the ROCKETMQ run's "end transaction: type 99 is refused")."""
    srv, _ = await start()
    client = await client_of(srv)
    for kind in (99, None):
        request = end_tx(1, 0, kind)
        request.serialize_type = SerializeType.ROCKETMQ
        answer = await client.call(request)
        assert (answer.code, answer.serialize_type) == (ResponseCode.SYSTEM_ERROR, SerializeType.JSON)


async def test_a_oneway_end_transaction_is_not_answered(start: Start, client_of) -> None:  # type: ignore[no-untyped-def]
    srv, _ = await start()
    client = await client_of(srv)
    answer = await client.call(half_send("T", "C0FFEE00000000000000000000000001", b"b"))
    request = end_tx(offset_of(answer.ext_fields["msgId"]), 0, 8)
    request.flag |= RPC_ONEWAY
    await client.send(request)
    beat = producer_heartbeat()
    assert (await client.call(beat)).opaque == beat.opaque
    assert len(await pull_real_queue(client)) == 1


async def test_rejected_when_the_broker_takes_no_transactions(start: Start, client_of) -> None:  # type: ignore[no-untyped-def]
    srv, store = await start(reject_transaction_message=True)
    client = await client_of(srv)
    answer = await client.call(half_send("T", "C0FFEE00000000000000000000000001", b"b"))
    assert answer.code == ResponseCode.NO_PERMISSION
    assert answer.remark == "the broker[127.0.0.1] sending transaction message is forbidden"
    assert store.reader.max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 0


async def next_check(client: RawClient, timeout: float) -> RemotingCommand:
    """The next CHECK_TRANSACTION_STATE: one that came while ``call`` waited for an answer (the
    checker runs on its own clock and may write a check before the half SEND's answer) is kept in
    ``server_requests`` and comes first."""
    if client.server_requests:
        command = client.server_requests.pop(0)
    else:
        command = await client.receive(timeout)
    assert command.code == RequestCode.CHECK_TRANSACTION_STATE
    return command


async def test_unknown_then_check_back_commit(start: Start, client_of) -> None:  # type: ignore[no-untyped-def]
    # The producer must answer a check within one interval: a pass that runs before its answer
    # re-checks the re-put copy (the broker's rule too: duplicate check-backs under a slow producer),
    # and a 200 ms interval let a loaded CI machine's stall make one. 1 s keeps the test's claim.
    srv, _store = await start(check_interval_ms=1000, timeout_ms=0)
    producer = await client_of(srv)
    assert (await producer.call(producer_heartbeat())).code == ResponseCode.SUCCESS
    sent = await producer.call(half_send("Txunknown", "C0FFEE00000000000000000000000006", b"half-unknown"))
    half_at = offset_of(sent.ext_fields["msgId"])
    check = await next_check(producer, CHECK_WAIT)
    assert check.flag & RPC_ONEWAY
    fields = check.ext_fields
    # Golden step 67: the header names the re-put copy (queue offset 1 here), ids are the UNIQ_KEY.
    assert list(fields) == [
        "commitLogOffset",
        "msgId",
        "tranStateTableOffset",
        "offsetMsgId",
        "transactionId",
    ]
    assert fields["msgId"] == fields["transactionId"] == "C0FFEE00000000000000000000000006"
    assert fields["tranStateTableOffset"] == "1"
    copy_at = int(fields["commitLogOffset"])
    assert copy_at > half_at and offset_of(fields["offsetMsgId"]) == copy_at
    shown = decode_message(bytes(check.body or b""))
    assert (shown.topic, shown.queue_id, shown.queue_offset, shown.commit_log_offset) == (
        TOPIC,
        2,
        1,
        copy_at,
    )
    assert shown.body == b"half-unknown"
    assert shown.properties["TRANSACTION_CHECK_TIMES"] == "1"
    assert shown.properties["WAIT"] == "false"
    # The producer's answer names the copy; the commit is visible at once.
    answer = await producer.call(end_tx(copy_at, 1, 8, check=True))
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    [committed] = [decode_message(r) for r in await pull_real_queue(producer)]
    assert committed.body == b"half-unknown" and committed.prepared_transaction_offset == copy_at
    # Decided: no more check-backs (two more passes), and the progress is past both halves.
    assert producer.server_requests == []
    with pytest.raises(TimeoutError):
        await producer.receive(2.5)
    offsets = srv._configure.broker.offsets  # type: ignore[union-attr]
    assert offsets.query("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0) == 2
    assert offsets.query("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) == 1


async def test_a_producer_that_never_answers_is_given_up_on(start: Start, client_of) -> None:  # type: ignore[no-untyped-def]
    srv, store = await start(check_interval_ms=100, timeout_ms=0, check_max=2)
    producer = await client_of(srv)
    await producer.call(producer_heartbeat())
    await producer.call(half_send("T", "C0FFEE00000000000000000000000009", b"silent"))
    first = await next_check(producer, CHECK_WAIT)
    second = await next_check(producer, CHECK_WAIT)
    assert [c.ext_fields["tranStateTableOffset"] for c in (first, second)] == ["1", "2"]
    assert decode_message(bytes(second.body or b"")).properties["TRANSACTION_CHECK_TIMES"] == "2"
    with pytest.raises(TimeoutError):
        await producer.receive(0.6)
    moved = store.reader.get_message("TRANS_CHECK_MAX_TIME_TOPIC", 0, 0, 32)
    [discarded] = [decode_message(b) for b in moved.buffers]
    assert discarded.body == b"silent" and discarded.properties["TRANSACTION_CHECK_TIMES"] == "2"
    assert await pull_real_queue(producer) == []


async def test_no_producer_online_costs_nothing(start: Start, client_of) -> None:  # type: ignore[no-untyped-def]
    srv, store = await start(check_interval_ms=100, timeout_ms=0)
    client = await client_of(srv)
    await client.call(half_send("T", "C0FFEE00000000000000000000000003", b"nobody"))
    await asyncio.sleep(0.5)
    # Still checked (copies with a growing count), never sent, and the server answers at once.
    assert store.reader.max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) >= 3
    beat = producer_heartbeat()
    assert (await client.call(beat)).code == ResponseCode.SUCCESS


async def test_a_half_message_older_than_the_store_keeps_files_is_discarded_unasked(
    start: Start, client_of
) -> None:  # type: ignore[no-untyped-def]
    """``needSkip``: born more than ``fileReservedTime`` (72 h) ago: moved, never checked back."""
    srv, store = await start(check_interval_ms=100, timeout_ms=0)
    producer = await client_of(srv)
    await producer.call(producer_heartbeat())
    old = int(time.time() * 1000) - 73 * 3600 * 1000
    await producer.call(half_send("T", "C0FFEE00000000000000000000000008", b"old", born=old))
    with pytest.raises(TimeoutError):
        await producer.receive(0.6)
    moved = store.reader.get_message("TRANS_CHECK_MAX_TIME_TOPIC", 0, 0, 32)
    assert [decode_message(b).body for b in moved.buffers] == [b"old"]
