"""How long an empty ReceiveMessage waits: ``ReceiveMessageActivity``'s rule (``polling_time_ms``).

The expected values are worked out by hand from the Proxy's rule: the request's long polling
timeout, else the time remaining minus half the client's request timeout; clamped to 5..20 s; inside
the deadline with the answer's margin (0.5 s), or under 5 s left ILLEGAL_POLLING_TIME (BAD_REQUEST
for a client older than 5.0.3, by Java's string comparison).
"""

from __future__ import annotations

import pytest
from google.protobuf.duration_pb2 import Duration

from server.grpc.receiving import polling_time_ms, request_timeout_ms
from server.grpc.v2 import Code, definition
from server.grpc.validation import GrpcStatusError


@pytest.mark.parametrize(
    ("long_polling", "request_timeout", "remaining", "expected"),
    [
        (None, 3_000, 8_000, 6_500),  # the Go client: await 5 s + request timeout 3 s
        (None, 5_000, 8_000, 5_500),
        (None, 3_000, 30_000, 20_000),  # at most 20 s
        (None, 3_000, 6_000, 5_000),  # at least 5 s (6 - 1.5 = 4.5)
        (None, 3_000, None, 20_000),  # no deadline: the longest
        (5_000, 3_000, 8_000, 5_000),  # the Python client: its await duration
        (20_000, 3_000, 23_000, 20_000),
        (1_000, 3_000, 8_000, 5_000),
        (60_000, 3_000, None, 20_000),
        (20_000, 3_000, 12_000, 11_500),  # the deadline first, with the answer's margin
        (20_000, 3_000, 5_000, 4_500),
    ],
)
def test_polling_time(
    long_polling: int | None, request_timeout: int, remaining: int | None, expected: int
) -> None:
    assert polling_time_ms(long_polling, request_timeout, remaining) == expected


@pytest.mark.parametrize("long_polling", [None, 5_000, 20_000])
@pytest.mark.parametrize(
    ("version", "code"),
    [
        ("5.1.2", Code.ILLEGAL_POLLING_TIME),
        ("5.0.3", Code.ILLEGAL_POLLING_TIME),
        ("5.0.10", Code.BAD_REQUEST),  # Java's String.compareTo: "5.0.3" > "5.0.10"
        ("5.0.2", Code.BAD_REQUEST),
        ("", Code.BAD_REQUEST),  # no version: an old client
    ],
)
def test_under_five_seconds_left_is_illegal_polling_time_for_the_clients_that_know_it(
    long_polling: int | None, version: str, code: int
) -> None:
    with pytest.raises(GrpcStatusError) as refused:
        polling_time_ms(long_polling, 3_000, 4_999, version)
    assert refused.value.code == code
    assert refused.value.message.startswith("The deadline time remaining is not enough for polling")


def test_request_timeout_is_the_clients_else_three_seconds() -> None:
    assert request_timeout_ms(None) == 3_000
    assert request_timeout_ms(definition.Settings()) == 3_000
    assert request_timeout_ms(definition.Settings(request_timeout=Duration(seconds=10))) == 10_000
