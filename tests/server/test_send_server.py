"""``serve --writable`` over a socket: our producer sends, our admin client finds every message at once.

An in-process server on 127.0.0.1 port 0 over an empty store: single, batch, oneway and delayed
sends, a topic created on its first SEND through TBW102's route, and the refusals (too large,
illegal topic, forbidden topic, bad queue id, bad batch body). Every stored message must be
queryable by key, by unique key and by offset id as soon as its SEND was answered.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from clients.admin import QueryAdmin
from clients.errors import MQClientError
from clients.producer import OutgoingMessage, Producer
from protocol.codes import RequestCode, ResponseCode
from protocol.message_id import decode_offset_msg_id
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.harness import RawClient

MAX = 2**63 - 1


async def test_sent_messages_are_queryable_by_key_unique_key_and_offset_id(writable_server) -> None:
    srv, store = writable_server
    addr = f"127.0.0.1:{srv.port}"
    store.create_topic("Orders", 2)
    async with Producer(addr) as producer, QueryAdmin(addr) as admin:
        sent = [
            await producer.send("Orders", f"order {i}".encode(), keys=[f"order-{i}", "all"], tags="T")
            for i in range(40)
        ]
        assert {s.queue_id for s in sent} == {0, 1}
        assert [s.queue_offset for s in sent if s.queue_id == 0] == list(range(20))
        for i, s in enumerate(sent):
            (found,) = (await admin.query_by_key("Orders", f"order-{i}")).messages
            assert found.body == f"order {i}".encode() and found.unique_key == s.msg_id
            assert found.properties["CLUSTER"] == "DefaultCluster" and "WAIT" not in found.properties
            (by_unique,) = await admin.query_by_unique_key("Orders", s.msg_id)
            assert by_unique.offset_msg_id == s.offset_msg_id
            viewed = await admin.view_message(s.offset_msg_id)
            assert viewed.body == f"order {i}".encode()
            assert decode_offset_msg_id(s.offset_msg_id)[:2] == ("127.0.0.1", srv.port)
        assert len((await admin.query_message("Orders", "all", 64, 0, MAX)).messages) == 40


async def test_new_topic_is_created_through_tbw102_and_then_routed(writable_server) -> None:
    srv, _store = writable_server
    addr = f"127.0.0.1:{srv.port}"
    async with Producer(addr) as producer, QueryAdmin(addr) as admin:
        first = await producer.send("BrandNew", b"x", keys="k1")
        assert first is not None and 0 <= first.queue_id < 4
        route = await admin.get_route("BrandNew")
        assert route.queue_datas[0].write_queue_nums == 4 and route.queue_datas[0].perm == 6
        (found,) = (await admin.query_by_key("BrandNew", "k1")).messages
        assert found.body == b"x"


async def test_no_auto_create_answers_topic_not_exist(tmp_path: Path) -> None:
    config = StoreConfig.for_store(tmp_path / "s", auto_create_topic_enable=False)
    store = WritableStore(config)
    srv = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
    await srv.start()
    try:
        client = await RawClient.connect("127.0.0.1", srv.port)
        route = await client.call(RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}))
        assert route.code == ResponseCode.TOPIC_NOT_EXIST
        answer = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, _v2("Nope"), b"b"))
        assert answer.code == ResponseCode.TOPIC_NOT_EXIST
        assert answer.remark.startswith("topic[Nope] not exist, apply first please!")
        await client.close()
    finally:
        await srv.stop()
        store.close()


def _v2(topic: str, queue_id: int = 0, props: str = "WAIT\x01true", batch: bool = False) -> dict[str, str]:
    return {
        "a": "g",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": "1",
        "h": "0",
        "i": props,
        "j": "0",
        "k": "false",
        "m": "true" if batch else "false",
    }


async def test_refusals_carry_the_brokers_codes_and_store_nothing(writable_server) -> None:
    srv, store = writable_server
    store.create_topic("T", 2)
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        cases = [
            (_v2("T"), b"z" * 4097, ResponseCode.MESSAGE_ILLEGAL, "msg body length limit 4096B"),
            (_v2("bad topic"), b"z", ResponseCode.SYSTEM_ERROR, "illegal characters"),
            (_v2("SCHEDULE_TOPIC_XXXX"), b"z", ResponseCode.NO_PERMISSION, "is forbidden"),
            (_v2("T", queue_id=2), b"z", ResponseCode.SYSTEM_ERROR, "request queueId[2] is illegal"),
            (_v2("T", batch=True), b"\x00\x00\x00\x30", ResponseCode.SYSTEM_ERROR, "bad batch body"),
            ({"b": "T"}, b"z", ResponseCode.SYSTEM_ERROR, "the custom field <a> is null"),
        ]
        for fields, body, code, remark in cases:
            answer = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, fields, body))
            assert answer.code == code, (fields, answer.remark)
            assert remark in (answer.remark or "")
            if code != ResponseCode.SYSTEM_ERROR or "custom field" not in remark:
                assert answer.ext_fields == {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
        ok = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, _v2("T"), b"z" * 4096))
        assert ok.code == ResponseCode.SUCCESS and ok.ext_fields["queueOffset"] == "0"
    finally:
        await client.close()
    assert len(list(store.reader.commitlog.iter_records())) == 1


async def test_batch_oneway_and_delayed_sends(writable_server) -> None:
    srv, store = writable_server
    addr = f"127.0.0.1:{srv.port}"
    store.create_topic("B", 1)
    async with Producer(addr) as producer, QueryAdmin(addr) as admin:
        results = await producer.send_batch(
            "B", [OutgoingMessage(f"m{i}".encode(), keys=f"bk-{i}", tags="x") for i in range(3)]
        )
        assert [r.queue_offset for r in results] == [0, 1, 2]
        for i, r in enumerate(results):
            (found,) = (await admin.query_by_key("B", f"bk-{i}")).messages
            assert found.offset_msg_id == r.offset_msg_id and found.unique_key == r.msg_id
        assert await producer.send("B", b"one-way", keys="ow", oneway=True) is None
        for _ in range(100):  # a oneway SEND has no answer to wait for: poll until it is indexed
            try:
                (found,) = (await admin.query_by_key("B", "ow")).messages
                break
            except MQClientError:
                await asyncio.sleep(0.02)
        assert found.body == b"one-way"
        delayed = await producer.send("B", b"later", keys="dl", delay_level=1)
        assert delayed is not None and delayed.queue_offset == 0  # its offset in SCHEDULE_TOPIC_XXXX
        (scheduled,) = (await admin.query_message("SCHEDULE_TOPIC_XXXX", "dl", 8, 0, MAX)).messages
        assert scheduled.properties["REAL_TOPIC"] == "B"
        delivered = None
        for _ in range(200):  # level 1 is due one second after it was stored
            try:
                (delivered,) = (await admin.query_message("B", "dl", 8, 0, MAX)).messages
                break
            except MQClientError:
                await asyncio.sleep(0.05)
        assert delivered is not None
        assert delivered.body == b"later" and delivered.queue_id == 0 and delivered.queue_offset == 4


async def test_read_only_server_refuses_sends(tmp_path: Path) -> None:
    config = StoreConfig.for_store(tmp_path / "s")
    (tmp_path / "s" / "commitlog").mkdir(parents=True)
    with MessageStore.open(config) as store:
        async with QueryServer(store, ServerSettings(port=0)) as srv:
            client = await RawClient.connect("127.0.0.1", srv.port)
            answer = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, _v2("T"), b"z"))
            assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            await client.close()
    assert list((tmp_path / "s" / "commitlog").iterdir()) == []


async def test_the_one_liner_for_other_test_suites_prints_the_address(tmp_path: Path) -> None:
    """``serve --writable --demo --port 0`` prints ``NAMESRV_ADDR=HOST:PORT`` and serves sends there."""
    import signal
    import subprocess
    import sys

    from tests.support.paths import REPO_ROOT
    from tests.support.serve_process import PROCESS_TIMEOUT

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clients.cli", "serve", "--writable", "--demo", "--store", str(tmp_path / "d"),
        "--port", "0", cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), PROCESS_TIMEOUT)).decode().strip()
        assert line.startswith("NAMESRV_ADDR=127.0.0.1:"), line
        addr = line.split("=", 1)[1]
        async with Producer(addr) as producer, QueryAdmin(addr) as admin:
            sent = await producer.send("DemoOrders", b"from another suite", keys="suite-1")
            (found,) = (await admin.query_by_key("DemoOrders", "suite-1")).messages
            assert sent is not None and found.unique_key == sent.msg_id
            assert (await admin.query_by_key("DemoOrders", "order-3")).messages, "the demo's messages too"
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_failed_write_is_answered_and_takes_no_queue_offset(writable_server, monkeypatch) -> None:
    """A full disk (or a read-only store): SYSTEM_ERROR with the broker's CREATE_MAPEDFILE_FAILED remark,
    nothing stored, and the next SEND gets the queue offset the failed one would have had."""
    import errno

    from store.write.writer import StoreWriter

    srv, store = writable_server
    store.create_topic("F", 1)
    real = StoreWriter._file_for
    failures = iter([True])

    def failing(self: StoreWriter, start: int) -> int:
        if next(failures, False):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, start)

    monkeypatch.setattr(StoreWriter, "_file_for", failing)
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        failed = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, _v2("F"), b"z"))
        assert failed.code == ResponseCode.SYSTEM_ERROR
        assert failed.remark == "create mapped file failed, server is busy or broken."
        ok = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, _v2("F"), b"z"))
        assert ok.code == ResponseCode.SUCCESS and ok.ext_fields["queueOffset"] == "0"
    finally:
        await client.close()


async def test_a_message_no_commitlog_file_can_hold_is_message_illegal(tmp_path: Path, caplog) -> None:
    """64 KiB CommitLog files, a 128 KiB message limit: a 70,000-byte body passes the size check but
    fits no file. The broker's answer for a message it cannot store as sent is MESSAGE_ILLEGAL (13)
    with ``handlePutMessageResult``'s remark; nothing is written (no blank end-of-file record, no
    queue offset taken) and nothing is logged at ERROR (before: SYSTEM_ERROR and a traceback)."""
    config = StoreConfig.for_store(
        tmp_path / "s", mapped_file_size_commit_log=64 * 1024, max_message_size=128 * 1024
    )
    store = WritableStore(config)
    store.create_topic("T", 1)
    srv = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
    await srv.start()
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        first = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, _v2("T"), b"a" * 100))
        assert first.code == ResponseCode.SUCCESS
        for request in (
            RawClient.request(RequestCode.SEND_MESSAGE_V2, _v2("T"), b"z" * 70_000),
            RawClient.request(
                RequestCode.SEND_BATCH_MESSAGE, _v2("T", batch=True), _batch_body([b"y" * 40_000] * 2)
            ),
        ):
            refused = await client.call(request)
            assert refused.code == ResponseCode.MESSAGE_ILLEGAL
            assert refused.remark == (
                "the message is illegal, maybe msg body or properties length not matched. "
                "msg body length limit 131072B, msg properties length limit 32KB."
            )
            assert refused.ext_fields == {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
        after = await client.call(RawClient.request(RequestCode.SEND_MESSAGE_V2, _v2("T"), b"b" * 100))
        assert after.code == ResponseCode.SUCCESS and after.ext_fields["queueOffset"] == "1"
    finally:
        await client.close()
        await srv.stop()
        store.close()
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    with MessageStore.open(config) as reopened:
        sizes = [len(buf) for _, buf in reopened.commitlog.iter_records()]
    assert len(sizes) == 2 and sum(sizes) < 1024  # the two small ones, back to back in file 0


def _batch_body(bodies: list[bytes]) -> bytes:
    """A SEND_BATCH_MESSAGE body (``MessageDecoder.encodeMessages``): per message TOTALSIZE, MAGICCODE
    0, BODYCRC 0, FLAG 0, BODY length + bytes, PROPERTIES length (short) + bytes."""
    import struct

    out = b""
    for body in bodies:
        size = 4 + 4 + 4 + 4 + 4 + len(body) + 2
        out += struct.pack(">iiiii", size, 0, 0, 0, len(body)) + body + struct.pack(">h", 0)
    return out
