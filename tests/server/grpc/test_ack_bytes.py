"""An AckMessageResponse written as bytes (``server/grpc/ack_bytes.py``) against the protobuf objects
``AckMessage`` built before (``ack_response_message``) and against statuses written out here.

Each case's bytes must be the objects' deterministic serialization byte for byte and parse back to
the answer the Proxy gives: one status per entry echoing its message id and handle, and the
response's status the entry's for one entry, OK when all are OK, else MULTIPLE_RESULTS.
"""

from __future__ import annotations

import pytest

from server.grpc.ack_bytes import ack_response, ack_response_message
from server.grpc.v2 import Code, service

HANDLE = "7 1764434400000 30000 123456 N broker-a 3 7 987654321"
NAMES = "the receipt handle names no message received and not acked"

CASES = [
    ([("01A", HANDLE)], [None]),
    ([("x", "garbage")], ["parse failed"]),
    ([("01A", HANDLE), ("01B", HANDLE + "0")], [None, None]),
    ([("01A", HANDLE), ("bad-id", "garbage"), ("01C", HANDLE)], [None, "parse failed", NAMES]),
    ([("", HANDLE), ("01B", "")], [None, "parse failed"]),
    ([("", "")], [""]),
    ([("ид-é", "h" * 200), ("m" * 130, HANDLE)], [None, None]),
    ([(f"id{i}", f"{HANDLE}{i}") for i in range(32)], [None] * 31 + [NAMES]),
]


@pytest.mark.parametrize(("entries", "results"), CASES)
def test_the_bytes_are_the_objects_serialization(entries: list, results: list) -> None:
    written = ack_response(entries, results)
    assert written == ack_response_message(entries, results).SerializeToString(deterministic=True)
    parsed = service.AckMessageResponse.FromString(written)
    assert [(e.message_id, e.receipt_handle) for e in parsed.entries] == entries
    expected = [
        (Code.OK, "OK") if result is None else (Code.INVALID_RECEIPT_HANDLE, result) for result in results
    ]
    assert [(e.status.code, e.status.message) for e in parsed.entries] == expected


def test_the_answers_status_is_the_lone_entrys_else_ok_else_multiple_results() -> None:
    def status(results: list) -> tuple[int, str]:
        entries = [(f"m{i}", f"h{i}") for i in range(len(results))]
        parsed = service.AckMessageResponse.FromString(ack_response(entries, results))
        return parsed.status.code, parsed.status.message

    assert status([None]) == (Code.OK, "OK")
    assert status(["parse failed"]) == (Code.INVALID_RECEIPT_HANDLE, "parse failed")
    assert status([None, None, None]) == (Code.OK, "OK")
    assert status([None, "parse failed"]) == (Code.MULTIPLE_RESULTS, "ack has multiple results")
    assert status(["parse failed", "parse failed"]) == (Code.MULTIPLE_RESULTS, "ack has multiple results")
