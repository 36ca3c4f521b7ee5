"""Hypothesis: message ids survive make -> parse for any host, port, offset, pid, time and zone.

The golden vectors pin a handful of ids; these round trips cover the rest of the space (IPv4 and
IPv6 hosts, negative ports and offsets as Java's signed fields allow, month offsets past 2^31 late in
a month, zones other than UTC).
"""

from __future__ import annotations

import ipaddress
from datetime import UTC, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.message_id import (
    ID_LENGTH_V4,
    ID_LENGTH_V6,
    UniqueIdGenerator,
    create_offset_msg_id,
    decode_offset_msg_id,
    parse_unique_id,
)

_hosts = st.ip_addresses(v=4) | st.ip_addresses(v=6)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
#: 2001-01-01 .. 2099-12-31 in epoch ms.
_epoch_ms = st.integers(978_307_200_000, 4_102_358_400_000)
_zones = st.sampled_from([UTC] + [timezone(timedelta(hours=h)) for h in (8, -5, 5.5)])


@settings(max_examples=200, deadline=None)
@given(host=_hosts, port=_i32, offset=_i64)
def test_offset_id_round_trip(
    host: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int, offset: int
) -> None:
    msg_id = create_offset_msg_id(str(host), port, offset)
    assert len(msg_id) == (ID_LENGTH_V4 if host.version == 4 else ID_LENGTH_V6)
    assert msg_id == msg_id.upper()
    decoded = decode_offset_msg_id(msg_id)
    assert (ipaddress.ip_address(decoded.host), decoded.port, decoded.offset) == (host, port, offset)
    assert decode_offset_msg_id(msg_id.lower()) == decoded
    assert create_offset_msg_id(decoded.host, decoded.port, decoded.offset) == msg_id


@settings(max_examples=200, deadline=None)
@given(
    host=_hosts,
    pid=st.integers(0, 2**22),
    loader=_i32,
    made=_epoch_ms,
    later=st.integers(1, 20 * 86_400_000),
    zone=_zones,
    skip=st.integers(0, 3),
)
def test_unique_id_round_trip(
    host: ipaddress.IPv4Address | ipaddress.IPv6Address,
    pid: int,
    loader: int,
    made: int,
    later: int,
    zone: timezone,
    skip: int,
) -> None:
    gen = UniqueIdGenerator(str(host), pid=pid, class_loader_hash=loader, clock=lambda: made, tz=zone)
    for _ in range(skip):
        gen.next_id()
    unique_id = gen.next_id()
    assert len(unique_id) == (ID_LENGTH_V4 if host.version == 4 else ID_LENGTH_V6)
    parsed = parse_unique_id(unique_id)
    assert ipaddress.ip_address(parsed.ip) == host
    assert parsed.pid == pid & 0xFFFF  # Java writes (short) pid
    assert parsed.class_loader_hash == loader
    assert parsed.counter == skip
    # Read back any time within the following 20 days, Java's guess finds the moment it was made.
    assert parsed.approximate_timestamp(now_ms=made + later, tz=zone) == made
