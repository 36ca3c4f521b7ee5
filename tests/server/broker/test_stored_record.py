"""``StoredRecord``: a record read for a receive keeps its bytes and reads only the fields the lease
table needs; they must be ``decode_message``'s for every host kind, and a bad record must fail when
read with ``decode_message``'s error."""

from __future__ import annotations

from dataclasses import replace

import pytest

from protocol.message import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    MAGIC_CODE_V1,
    STOREHOST_V6_FLAG,
    MessageDecodeError,
    MessageExt,
    decode_message,
    encode_message,
)
from server.broker.receive_store import StoredRecord

BASE = MessageExt(
    topic="T",
    body=b"body",
    queue_id=5,
    queue_offset=77,
    commit_log_offset=123_456_789,
    reconsume_times=3,
    born_host="10.0.0.1",
    store_host="10.0.0.2",
    store_port=10911,
    properties={"UNIQ_KEY": "ABC"},
)


@pytest.mark.parametrize(
    "message",
    [
        BASE,
        replace(BASE, sys_flag=BORNHOST_V6_FLAG, born_host="::1"),
        replace(BASE, sys_flag=STOREHOST_V6_FLAG, store_host="fe80::2"),
        replace(BASE, sys_flag=BORNHOST_V6_FLAG | STOREHOST_V6_FLAG, born_host="::1", store_host="::2"),
        replace(BASE, magic=MAGIC_CODE_V1, queue_id=-1, queue_offset=(1 << 63) - 1, reconsume_times=-2),
        replace(BASE, sys_flag=COMPRESSED_FLAG, body=b"z" * 500),
    ],
)
def test_the_fields_read_are_the_decoded_ones(message: MessageExt) -> None:
    raw = encode_message(message)
    record, decoded = StoredRecord(raw), decode_message(raw)
    assert (record.queue_id, record.queue_offset, record.commit_log_offset, record.reconsume_times) == (
        decoded.queue_id,
        decoded.queue_offset,
        decoded.commit_log_offset,
        decoded.reconsume_times,
    )
    assert record.decode() == decoded


@pytest.mark.parametrize("cut", [10, 60, -3])
def test_a_bad_record_fails_when_read_as_decode_message_fails(cut: int) -> None:
    raw = encode_message(BASE)[:cut]
    with pytest.raises(MessageDecodeError) as expected:
        decode_message(raw)
    with pytest.raises(MessageDecodeError) as got:
        StoredRecord(raw)
    assert str(got.value) == str(expected.value)


def test_a_receive_of_read_records_stops_at_their_bytes() -> None:
    """``MAX_RECEIVE_BYTES`` counts a read record by its stored bytes (``held_bytes``): ten records
    of 1 MiB bodies, read as the store hands them (``StoredRecord``), give a receive of 32 four."""
    from server.broker.receive_leases import MAX_RECEIVE_BYTES, ReceiveLeases, held_bytes

    body = b"b" * (1024 * 1024)
    records = [
        StoredRecord(encode_message(replace(BASE, queue_id=0, queue_offset=i, body=body, reconsume_times=0)))
        for i in range(10)
    ]
    assert held_bytes(records[0]) == len(records[0].raw) > len(body)

    class Reader:
        def read(self, topic, queue_id, offset, n, tags_codes, record_filter=None):  # type: ignore[no-untyped-def]
            found = records[offset : offset + min(n, 1)]
            return found, offset + len(found)

        def bounds(self, topic, queue_id):  # type: ignore[no-untyped-def]
            return 0, len(records)

    leases = ReceiveLeases(
        Reader(),
        broker_name="b",
        commit=lambda *a: None,
        committed=lambda *a: -1,
        dead_letter=lambda *a: None,
    )
    got = leases.receive("G", "T", [0], 32, 30_000, 0, max_attempts=17)
    assert [d.message.queue_offset for d in got] == [0, 1, 2, 3]
    assert sum(len(d.message.raw) for d in got) - len(got[-1].message.raw) < MAX_RECEIVE_BYTES
