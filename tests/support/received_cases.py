"""Received messages every optional field of a v2 ``Message`` is set or left out in: the cases
``test_message_bytes`` answers from a ``MessageExt`` and ``test_record_response`` from its stored record."""

from __future__ import annotations

from dataclasses import replace

from protocol.message import MessageExt

BASE = MessageExt(
    topic="OrderTopic",
    body=b"hello body",
    queue_id=3,
    queue_offset=12_345,
    commit_log_offset=987_654,
    born_timestamp=1_764_400_000_123,
    store_timestamp=1_764_400_000_456,
    born_host="10.0.0.7",
    store_host="127.0.0.1",
    store_port=10911,
    properties={
        "UNIQ_KEY": "7F00000100012A9F1B2C3D4E5F60000A",
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "zeta": "last",
        "alpha": "first",
        "PGROUP": "OrderTopic",
        "RECONSUME_TIME": "0",
        "__BORNHOST": "10.0.0.7:5555",
        "BORN_TIMESTAMP": "1764400000123",
    },
)


def with_properties(**props: str | None) -> MessageExt:
    """BASE with properties set (a value) or removed (None)."""
    merged = dict(BASE.properties)
    for name, value in props.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return replace(BASE, properties=merged)


CASES: dict[str, tuple[MessageExt, int, str, int | None]] = {
    "every usual field": (BASE, 1, "handle-1", 30_000),
    "no properties at all": (replace(BASE, properties={}), 1, "h", 30_000),
    "an empty body": (replace(BASE, body=b""), 2, "h", 30_000),
    "a body over 127 and 16383 bytes": (replace(BASE, body=bytes(range(256)) * 70), 3, "h", 30_000),
    "queue id 0, queue offset 0": (replace(BASE, queue_id=0, queue_offset=0), 1, "h", 30_000),
    "a negative queue id": (replace(BASE, queue_id=-1), 1, "h", 30_000),
    "a large queue offset": (replace(BASE, queue_offset=(1 << 62) + 5), 1, "h", 30_000),
    "attempt 0 and a large one": (BASE, 0, "h", 30_000),
    "attempt 300": (BASE, 300, "h", 30_000),
    "no receipt handle, no invisible duration (a check-back)": (BASE, 1, "", None),
    "an invisible duration of whole seconds": (BASE, 1, "h", 10_000),
    "an invisible duration with milliseconds": (BASE, 1, "h", 43_200_001),
    "an empty tag": (with_properties(TAGS=""), 1, "h", 30_000),
    "keys with empty items": (with_properties(KEYS=" a  b "), 1, "h", 30_000),
    "one key": (with_properties(KEYS="only"), 1, "h", 30_000),
    "an empty KEYS": (with_properties(KEYS=""), 1, "h", 30_000),
    "no tag, no keys": (with_properties(TAGS=None, KEYS=None), 1, "h", 30_000),
    "no UNIQ_KEY: the offset message id": (with_properties(UNIQ_KEY=None), 1, "h", 30_000),
    "no __BORNHOST: the record's born host": (with_properties(__BORNHOST=None), 1, "h", 30_000),
    "no born host anywhere": (replace(with_properties(__BORNHOST=None), born_host=""), 1, "h", 30_000),
    "a FIFO message": (with_properties(__SHARDINGKEY="group-7"), 1, "h", 30_000),
    "an empty message group": (with_properties(__SHARDINGKEY=""), 1, "h", 30_000),
    "a trace context": (with_properties(TRACE_CONTEXT="00-abc-def-01"), 1, "h", 30_000),
    "a timer message": (with_properties(TIMER_DELIVER_MS="1764400060000"), 1, "h", 30_000),
    "a timer message before 1970": (with_properties(TIMER_DELIVER_MS="-1500"), 1, "h", 30_000),
    "a delivery time that is not a number": (with_properties(TIMER_DELIVER_MS="soon"), 1, "h", 30_000),
    "a DELAY level": (with_properties(DELAY="3"), 1, "h", 30_000),
    "TIMER_DELAY_SEC": (with_properties(TIMER_DELAY_SEC="10"), 1, "h", 30_000),
    "TIMER_DELAY_MS": (with_properties(TIMER_DELAY_MS="10"), 1, "h", 30_000),
    "a half message": (with_properties(TRAN_MSG="true", __SHARDINGKEY="g"), 1, "h", 30_000),
    "TRAN_MSG not true": (with_properties(TRAN_MSG="false"), 1, "h", 30_000),
    "timestamps 0 and before 1970": (replace(BASE, born_timestamp=0, store_timestamp=-1), 1, "h", 30_000),
    "timestamps of whole seconds": (
        replace(BASE, born_timestamp=5_000, store_timestamp=1000),
        1,
        "h",
        30_000,
    ),
    "unicode everywhere": (
        replace(
            with_properties(TAGS="标签", KEYS="ключ κλειδί", **{"名字": "值 🚀", "é": ""}),
            topic="主题",
            body="тело 🚀".encode(),
        ),
        1,
        "句柄",
        30_000,
    ),
    "many user properties, unsorted": (
        with_properties(**{f"p{n % 7}{n}": "v" * n for n in range(40, 0, -1)}),
        1,
        "h",
        30_000,
    ),
    "an empty topic": (replace(BASE, topic=""), 1, "h", 30_000),
    "a store host with another port": (
        replace(BASE, store_host="192.168.1.20", store_port=0),
        1,
        "h",
        30_000,
    ),
}
