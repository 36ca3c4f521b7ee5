"""Every record of the store written by the real RocketMQ 4.9.7 broker decodes to what Java said.

The CommitLog files are read in place (read-only) and each of the 5000 records in
``java-4.9.7-a.expected.json`` is checked field by field, through the full decoder (with the CRC
check on) and through the index builder's fast path, and re-encoded to the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from protocol.message import (
    BLANK_MAGIC_CODE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    TransactionType,
    decode_message,
    decode_messages,
    encode_message,
    read_index_fields,
)

STORE = "java-4.9.7-a"


@pytest.fixture(scope="module")
def expected(stores_dir: Path) -> dict:
    return json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def commitlog(stores_dir: Path, expected: dict) -> tuple[int, dict[int, bytes]]:
    """File size and the CommitLog files by their start offset (their names)."""
    size = expected["messageStoreConfig"]["mappedFileSizeCommitLog"]
    files = {int(p.name): p.read_bytes() for p in (stores_dir / STORE / "commitlog").iterdir()}
    assert all(len(data) == size for data in files.values())
    return size, files


def _locate(commitlog: tuple[int, dict[int, bytes]], offset: int) -> tuple[bytes, int]:
    size, files = commitlog
    base = offset - offset % size
    return files[base], offset - base


def test_store_holds_the_expected_corpus(expected: dict) -> None:
    messages = expected["messages"]
    assert len(messages) == 5000
    flags = {m["sysFlag"] for m in messages}
    # The corpus covers what the codec must handle: compression types, transactions, IPv6 hosts.
    assert {0x101, 0x201, 0x301, 0x4, 0xC, 0x10, 0x20} <= flags


def test_every_record_decodes_to_the_expected_values(expected: dict, commitlog: tuple) -> None:
    for exp in expected["messages"]:
        buf, pos = _locate(commitlog, exp["commitLogOffset"])
        msg = decode_message(buf, pos, check_crc=True)
        where = f"message {exp['i']} at {exp['commitLogOffset']}"
        assert msg.commit_log_offset == exp["commitLogOffset"], where
        assert msg.store_size == exp["size"], where
        assert msg.topic == exp["topic"], where
        assert msg.queue_id == exp["queueId"], where
        assert msg.queue_offset == exp["queueOffset"], where
        assert msg.properties.get("KEYS") == exp["keys"], where
        assert msg.keys == ([t for t in exp["keys"].split(" ") if t] if exp["keys"] else []), where
        assert msg.tags == exp["tags"], where
        assert msg.unique_key == exp["uniqKey"], where
        assert msg.sys_flag == exp["sysFlag"], where
        assert msg.store_timestamp == exp["storeTimestamp"], where
        assert msg.offset_msg_id == exp["offsetMsgId"], where
        assert msg.msg_id == (exp["uniqKey"] or exp["offsetMsgId"]), where
        stored = msg.stored_body if msg.is_compressed else msg.body
        assert stored is not None
        assert len(stored) == exp["bodyLen"], where
        assert hashlib.sha256(stored).hexdigest() == exp["bodySha256"], where
        if "uncompressedBodySha256" in exp:
            assert msg.is_compressed, where
            assert len(msg.body) == exp["uncompressedBodyLen"], where
            assert hashlib.sha256(msg.body).hexdigest() == exp["uncompressedBodySha256"], where
        assert encode_message(msg) == buf[pos : pos + exp["size"]], where


def test_every_record_through_the_index_fast_path(expected: dict, commitlog: tuple) -> None:
    for exp in expected["messages"]:
        buf, pos = _locate(commitlog, exp["commitLogOffset"])
        fields = read_index_fields(buf, pos)
        assert fields == (
            exp["size"],
            fields.magic,
            exp["sysFlag"],
            exp["commitLogOffset"],
            exp["storeTimestamp"],
            exp["topic"],
            exp["keys"],
            exp["uniqKey"],
        ), exp["i"]


def test_records_lie_back_to_back_up_to_the_blank_marker(expected: dict, commitlog: tuple) -> None:
    """Reading each file sequentially finds exactly the expected records, then the filler: the
    blank marker (``decode_messages`` stops there, as it stops at anything undecodable) or zeros."""
    _, files = commitlog
    found = []
    for base, data in sorted(files.items()):
        messages = decode_messages(data, read_body=False)
        found.extend(m.commit_log_offset for m in messages)
        assert all(m.commit_log_offset >= base for m in messages)
        end = sum(m.store_size for m in messages)
        if end < len(data):
            magic = int.from_bytes(data[end + 4 : end + 8], "big", signed=True)
            assert magic in (BLANK_MAGIC_CODE, 0), (base, end)
    assert found == sorted(m["commitLogOffset"] for m in expected["messages"])


def test_query_results_decode_as_query_bodies(expected: dict, commitlog: tuple) -> None:
    """Each stored query answer, rebuilt as a QUERY_MESSAGE body, decodes like the Java client would."""
    answered = [q for q in expected["queries"] if "results" in q]
    assert len(answered) > 400
    for query in answered:
        results = query["results"]
        chunks = []
        for result in results:
            buf, pos = _locate(commitlog, result["commitLogOffset"])
            size = decode_message(buf, pos, read_body=False).store_size
            chunks.append(buf[pos : pos + size])
        body = b"".join(chunks)
        assert len(body) == query["bufferTotalSize"]
        decoded = decode_messages(body)
        assert [m.commit_log_offset for m in decoded] == [r["commitLogOffset"] for r in results]
        assert [m.offset_msg_id for m in decoded] == [r["offsetMsgId"] for r in results]


def test_transaction_types_of_the_store(expected: dict, commitlog: tuple) -> None:
    """Prepared and rollback records are told apart by sysFlag & 0xC (only rollback is not indexed)."""
    seen: dict[TransactionType, int] = {}
    for exp in expected["messages"]:
        buf, pos = _locate(commitlog, exp["commitLogOffset"])
        msg = decode_message(buf, pos, read_body=False)
        seen[msg.transaction_type] = seen.get(msg.transaction_type, 0) + 1
        if "rollback" in exp["note"].lower():
            assert msg.transaction_type is TransactionType.ROLLBACK
        if msg.transaction_type is TransactionType.ROLLBACK:
            assert exp["sysFlag"] & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE
    assert seen[TransactionType.ROLLBACK] == 10
    assert seen[TransactionType.PREPARED] == 10
