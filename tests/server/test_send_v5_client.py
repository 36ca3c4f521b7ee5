"""The 5.3.3 client's SEND frames (built from its sources, see ``tests/support/v5_frames.py``).

The captured 4.9.7 SENDs are rewritten into the 5.3.3 client's form (version 479, properties ending
with ``\\x02``, the V2 fast-encode field order under ROCKETMQ), put through the wire codec and the
send processor: the 4.9.7 broker's rules give the same records and answers for them (the single
message's properties are parsed and re-serialized; a batch item's trailing ``\\x02`` is the separator
the broker would otherwise add), so the expected values are the Java golden store and response
frames. Then the same kind of frames go over a socket to ``serve --writable``, with the
``RpcRequestHeader`` fields a 5.x caller may add (``ns``, ``nsd``, ``lo``, ``oway``: unknown to the
4.9.7 broker, and ``oway`` read by no 5.3.3 broker either) and the 5.x properties ``INSTANCE_ID`` and
``__SHARDINGKEY``.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.frame import decode_frame, encode_frame
from protocol.message import decode_message, raw_properties
from protocol.message_id import decode_offset_msg_id
from tests.support.harness import RawClient
from tests.support.send_replay import check_against_java, replay, send_expected
from tests.support.v5_frames import V5_VERSION, v5_send


@pytest.fixture(scope="module")
def expected(stores_dir: Path) -> dict:
    """What the 4.9.7 replay expects (``tests/support/send_replay.py``): the same for the 5.x form."""
    return send_expected(stores_dir)


def test_built_json_frames_have_the_5_3_3_clients_layout(vectors_dir: Path) -> None:
    """Our JSON encoder with version 479 writes exactly what the real 5.3.3 client wrote."""
    for name in ("v5_viewMessageTopic/000_req_code33.bin", "v5_queryMsgByKey/002_req_code12.bin"):
        captured = (vectors_dir / "wire" / name).read_bytes()
        decoded = decode_frame(captured)
        assert decoded.version == V5_VERSION
        rebuilt = RemotingCommand(
            code=decoded.code,
            language=LanguageCode.JAVA,
            version=V5_VERSION,
            opaque=decoded.opaque,
            flag=decoded.flag,
            ext_fields=dict(decoded.ext_fields or {}),
        )
        assert encode_frame(rebuilt) == captured, name


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_5x_send_frames_give_the_brokers_records_and_answers(
    tmp_path: Path, stores_dir: Path, vectors_dir: Path, expected: dict, serialize_type: SerializeType
) -> None:
    seen: list[RemotingCommand] = []

    def as_5x(request: RemotingCommand) -> RemotingCommand:
        wire = encode_frame(v5_send(request, serialize_type))
        decoded = decode_frame(wire)
        assert decoded.version == V5_VERSION and decoded.serialize_type == serialize_type
        seen.append(decoded)
        return decoded

    config, exchanges = replay(tmp_path, stores_dir, vectors_dir, expected, transform=as_5x)
    codes = {r.code for r in seen}
    assert codes == {RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE}
    assert all(
        (r.ext_fields or {}).get("i", (r.ext_fields or {}).get("properties", "")).endswith("\x02")
        for r in seen
    )
    for _path, _response, answer in exchanges:
        assert answer.serialize_type == serialize_type
    check_against_java(config, exchanges, stores_dir, expected)


def _v2_fields(topic: str, properties: str, queue_id: int = 0, **extra: str) -> dict[str, str]:
    """A 5.3.3 V2 header in fast-encode order (``a`` .. ``n``), then any extra extFields."""
    fields = {
        "a": "pg5",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": "1795377488153",
        "h": "0",
        "i": properties,
        "j": "0",
        "k": "false",
        "m": "false",
        "n": "b1",
    }
    fields.update(extra)
    return fields


def _request(
    code: int, fields: dict[str, str], body: bytes, st: SerializeType, flag: int = 0
) -> RemotingCommand:
    request = RawClient.request(code, fields, body, serialize_type=st, flag=flag)
    request.version = V5_VERSION
    return request


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_5x_sends_over_a_socket(writable_server, serialize_type: SerializeType) -> None:
    srv, store = writable_server
    store.create_topic("V5", 2)
    uniq = "FD00000000000000000000000000000256DD"
    props = "__SHARDINGKEY\x01group-7\x02INSTANCE_ID\x01ns-1\x02"
    props += f"UNIQ_KEY\x01{uniq}\x02WAIT\x01true\x02KEYS\x01k5\x02"
    # What 5.3.3's RPC hooks add (NamespaceRpcHook: nsd/ns; StreamTypeRPCHook: ReqT;
    # DynamicalExtFieldRPCHook: the zone) and the RpcRequestHeader fields another 5.x caller may set.
    rpc_fields = {
        "nsd": "true",
        "ns": "ns-1",
        "ReqT": "0",
        "__ZONE_NAME": "zone-a",
        "__ZONE_MODE": "true",
        "lo": "false",
        "oway": "true",
        "bname": "b1",
    }
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        answer = await client.call(
            _request(
                RequestCode.SEND_MESSAGE_V2, _v2_fields("V5", props, 1, **rpc_fields), b"five", serialize_type
            )
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        fields = answer.ext_fields or {}
        assert fields["queueId"] == "1" and fields["queueOffset"] == "0"
        assert fields["MSG_REGION"] == "DefaultRegion" and fields["TRACE_ON"] == "true"
        assert "transactionId" not in fields
        host, port, offset = decode_offset_msg_id(fields["msgId"])
        assert (host, port) == ("127.0.0.1", srv.port)
        # A oneway SEND (the flag's bit 1) with oway=false: stored, never answered; the next
        # request's answer is the first thing the connection reads.
        await client.send(
            _request(
                RequestCode.SEND_MESSAGE_V2,
                _v2_fields("V5", f"UNIQ_KEY\x01{uniq[:-1]}2\x02WAIT\x01true\x02", 1, oway="false"),
                b"oneway",
                serialize_type,
                flag=2,
            )
        )
        probe = await client.call(
            _request(
                RequestCode.SEND_MESSAGE_V2, _v2_fields("V5", "WAIT\x01true\x02", 1), b"third", serialize_type
            )
        )
        assert probe.code == ResponseCode.SUCCESS and (probe.ext_fields or {})["queueOffset"] == "2"
    finally:
        await client.close()
    raw = store.reader.view_message(offset)
    assert raw is not None
    found = decode_message(raw)
    assert found.body == b"five" and found.topic == "V5" and found.queue_id == 1
    # Parsed and re-serialized by the 4.9.7 rules (CLUSTER added, WAIT dropped, the 5.x ones kept, no
    # trailing separator): the bytes the real 4.9.7 broker stored for this very header, sent by hand.
    assert raw_properties(raw) == (
        b"KEYS\x01k5\x02__SHARDINGKEY\x01group-7\x02UNIQ_KEY\x01FD00000000000000000000000000000256DD"
        b"\x02CLUSTER\x01DefaultCluster\x02INSTANCE_ID\x01ns-1"
    )


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_5x_compressed_send_keeps_its_compression_type(
    writable_server, serialize_type: SerializeType
) -> None:
    """5.3.3 compresses bodies over 4 KiB with its ``compressType`` (ZLIB by default) and sends
    ``COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE`` (0x1 | 0x3 << 8); the broker stores flag and bytes as sent."""
    srv, store = writable_server
    store.create_topic("V5z", 1)
    plain = bytes(range(256)) * 20
    packed = zlib.compress(plain, 5)  # Deflater(level 5): a zlib stream
    fields = _v2_fields("V5z", "UNIQ_KEY\x01FD00000000000000000000000000000256AA\x02WAIT\x01true\x02")
    fields["f"] = str(0x1 | 0x3 << 8)
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        answer = await client.call(_request(RequestCode.SEND_MESSAGE_V2, fields, packed, serialize_type))
    finally:
        await client.close()
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    _host, _port, offset = decode_offset_msg_id((answer.ext_fields or {})["msgId"])
    raw = store.reader.view_message(offset)
    assert raw is not None
    stored = decode_message(raw, decompress=False, check_crc=True)
    assert stored.sys_flag == 0x301 and stored.body == packed
    assert decode_message(raw).body == plain


async def test_5x_timer_properties_put_the_message_in_the_timer_wheel(writable_server) -> None:
    """5.x ``setDelayTimeSec``/``setDeliverTimeMs`` put ``TIMER_DELAY_SEC``/``TIMER_DELIVER_MS``: the
    5.x broker stores the message in ``rmq_sys_wheel_timer`` queue 0 with its slot (``TIMER_OUT_MS``)
    and real topic and queue (the 4.9.7 broker had no wheel and stored it in its topic at once; the
    delivery is ``tests/server/test_send_timer.py``'s)."""
    srv, store = writable_server
    store.create_topic("V5t", 1)
    props = "TIMER_DELAY_SEC\x0130\x02UNIQ_KEY\x01FD00000000000000000000000000000256BB\x02WAIT\x01true\x02"
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        answer = await client.call(
            _request(RequestCode.SEND_MESSAGE_V2, _v2_fields("V5t", props), b"t", SerializeType.JSON)
        )
    finally:
        await client.close()
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert (answer.ext_fields or {})["queueOffset"] == "0"
    _host, _port, offset = decode_offset_msg_id((answer.ext_fields or {})["msgId"])
    raw = store.reader.view_message(offset)
    assert raw is not None
    stored = decode_message(raw)
    assert stored.topic == "rmq_sys_wheel_timer" and stored.queue_id == 0
    assert stored.properties["TIMER_DELAY_SEC"] == "30"
    assert stored.properties["REAL_TOPIC"] == "V5t" and stored.properties["REAL_QID"] == "0"
    out = int(stored.properties["TIMER_OUT_MS"])
    # 30 s after its arrival, rounded down to the second (the store time is the arrival's ms or later)
    assert out % 1000 == 0 and out <= stored.store_timestamp + 30_000 < out + 2000
    assert store.reader.max_offset("V5t", 0) == 0


def _rocketmq_frame(code: int, opaque: int, pairs: list[tuple[str, str]], body: bytes) -> bytes:
    """A ROCKETMQ-serialized request written field by field (repeated keys allowed)."""
    ext = b"".join(
        struct.pack(">h", len(k.encode())) + k.encode() + struct.pack(">i", len(v.encode())) + v.encode()
        for k, v in pairs
    )
    header = struct.pack(">hBhiii", code, 0, V5_VERSION, opaque, 0, 0) + struct.pack(">i", len(ext)) + ext
    return struct.pack(">ii", 4 + len(header) + len(body), (1 << 24) | len(header)) + header + body


async def test_5x_rocketmq_frame_with_repeated_header_fields(writable_server) -> None:
    """With an RPC hook that calls ``makeCustomHeaderToNet`` (the ACL hook signs the sorted fields),
    5.3.3's ``rocketMQProtocolEncode`` writes ``a`` .. ``n`` from the fast encoder and again from the
    extFields map: every key twice. Java's decoder puts them in a ``HashMap`` (the last one wins)."""
    srv, store = writable_server
    store.create_topic("V5d", 1)
    fields = list(
        _v2_fields("V5d", "UNIQ_KEY\x01FD00000000000000000000000000000256CC\x02WAIT\x01true\x02").items()
    )
    client = await RawClient.connect("127.0.0.1", srv.port)
    try:
        await client.send_bytes(_rocketmq_frame(RequestCode.SEND_MESSAGE_V2, 77, fields + fields, b"dup"))
        answer = await client.receive()
    finally:
        await client.close()
    assert answer.opaque == 77 and answer.code == ResponseCode.SUCCESS, answer.remark
    assert answer.serialize_type == SerializeType.ROCKETMQ
    _host, _port, offset = decode_offset_msg_id((answer.ext_fields or {})["msgId"])
    raw = store.reader.view_message(offset)
    assert raw is not None and decode_message(raw).body == b"dup"
