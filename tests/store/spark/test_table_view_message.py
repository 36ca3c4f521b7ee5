"""The DataFrame of the golden stores, row for row, against what the official 4.9.7 client's
viewMessage answered for the same messages from the real 4.9.7 broker (issue 36).

The answers were recorded once (``tests/server/golden/record_view_message.py``: the real broker on
a copy of each store, ``ViewMessages.java`` asking VIEW_MESSAGE_BY_ID for every record's offset):
zlib, LZ4 and ZSTD bodies (inflated by the Java client), IPv6 born and store hosts, prepared and
rolled-back transaction records, and the real broker's sends. Every field the client decodes is
compared with the row's column; the body by length and SHA-256 (the recording keeps no bodies).
"""

from __future__ import annotations

import gzip
import hashlib
import ipaddress
import json
from pathlib import Path

import pytest

from store.spark.message_rows import COLUMN_NAMES
from tests.support.golden_tables import STORES, copy_golden

RECORDING = Path(__file__).resolve().parents[2] / "server" / "golden" / "view_message_4.9.7.json.gz"


def _host(text: str) -> tuple[object, int]:
    """``ip:port`` as Java prints it (``/1.2.3.4:5``, ``/[0:0:...:1]:5``, ``fd00:0:...:5678:5``) or
    as the row holds it, as (address, port)."""
    text = text.lstrip("/")
    host, _, port = text.rpartition(":")
    return ipaddress.ip_address(host.strip("[]")), int(port)


@pytest.fixture(scope="module")
def recorded() -> dict[str, dict[str, dict]]:
    return json.loads(gzip.decompress(RECORDING.read_bytes()))["stores"]


def test_rows_equal_the_java_clients_view_message(spark, stores_dir: Path, tmp_path: Path, recorded) -> None:  # type: ignore[no-untyped-def]
    from store.spark.message_source import register

    register(spark)
    confs = copy_golden(stores_dir, tmp_path)
    frame = spark.read.format("rocketmq").load([str(confs[name]) for name in STORES])
    col = {name: i for i, name in enumerate(COLUMN_NAMES)}
    # Both stores' broker.conf name broker-a: the rows are told apart by the store they came from.
    rows: dict[str, dict[str, tuple]] = {name: {} for name in STORES}
    for row in frame.collect():
        values = tuple(bytes(v) if isinstance(v, bytearray) else v for v in row)
        offset = str(values[col["commitLogOffset"]])
        store = next(n for n in STORES if offset in recorded[n] and offset not in rows[n])
        rows[store][offset] = values
    kinds = set()
    for name in STORES:
        assert set(rows[name]) == set(recorded[name]), name
        for offset, java in recorded[name].items():
            row = rows[name][offset]
            where = f"{name} @{offset}"
            assert "error" not in java, where
            expected = {
                "topic": java["topic"],
                "queueId": java["queueId"],
                "queueOffset": java["queueOffset"],
                "commitLogOffset": java["commitLogOffset"],
                "storeSize": java["storeSize"],
                # The client's getMsgId is the UNIQ_KEY when there is one, else the offset id.
                "offsetMsgId": java.get("offsetMsgId", java["msgId"]),
                "uniqueKey": java["properties"].get("UNIQ_KEY"),
                "keys": [k for k in (java.get("keys") or "").split(" ") if k],
                "tags": java.get("tags"),
                "storeTimestamp": java["storeTimestamp"],
                "bornTimestamp": java["bornTimestamp"],
                "reconsumeTimes": java["reconsumeTimes"],
                "flag": java["flag"],
                "sysFlag": java["sysFlag"],
                "preparedTransactionOffset": java["preparedTransactionOffset"],
                "properties": java["properties"],
            }
            got = {k: row[col[k]] for k in expected}
            if "UNIQ_KEY" in java["properties"]:
                assert java["msgId"] == java["properties"]["UNIQ_KEY"], where
            assert got == expected, where
            assert _host(row[col["bornHost"]]) == _host(java["bornHost"]), where
            assert _host(row[col["storeHost"]]) == _host(java["storeHost"]), where
            body = row[col["body"]]
            assert (len(body), hashlib.sha256(body).hexdigest()) == (
                java["bodyLength"],
                java["bodySha256"],
            ), where
            kinds.add(java["sysFlag"] & 0x701 if java["sysFlag"] & 1 else 0)
            kinds.add(("tx", java["sysFlag"] & 0xC))
            kinds.add(("v6", java["sysFlag"] & 0x30))
    # The recording covers what it claims: zlib, LZ4 and ZSTD bodies, both transaction kinds the
    # queues leave out, and IPv6 born and store hosts.
    assert {0x101, 0x201, 0x301, ("tx", 0x4), ("tx", 0xC), ("v6", 0x10), ("v6", 0x20)} <= kinds
