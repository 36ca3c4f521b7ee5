"""Message ids: the broker's *offset* id and the client's *unique* id (``UNIQ_KEY``).

Offset id (``MessageDecoder.createMessageId``): upper-case hex of store IP (4 or 16 bytes) + port
(int32) + CommitLog offset (int64), so 32 or 56 characters; it is all a broker needs to find a record.

Unique id (``MessageClientIDSetter``): upper-case hex of IP (4 or 16 bytes) + pid (low 16 bits) +
class-loader hash (int32) + milliseconds since the start of the current month (32 bits) + counter
(16 bits), 32 or 56 characters. The time field is *relative to the start of the month in the
producer's local time zone*, and neither the month nor the zone is in the id: turning it back into
a timestamp is a guess. ``UniqueId.approximate_timestamp`` makes Java's guess
(``getNearlyTimeFromID``): the most recent month start, in the given zone, that puts the time in the
past. Past day ~24.8 of a month the field exceeds 2^31: Java writes it as a wrapped int and reads it
back unsigned, and so do we.

Both ids are the same length, so a unique id also "decodes" as an offset id to a garbage address:
callers that try both must expect that.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import struct
import threading
import time
from collections.abc import Callable
from datetime import datetime, tzinfo
from functools import lru_cache
from typing import NamedTuple

from protocol.errors import MessageIdError

_OFFSET_V4 = struct.Struct(">4siq")
_OFFSET_V6 = struct.Struct(">16siq")
_UNIQ_V4 = struct.Struct(">4sHiIH")
_UNIQ_V6 = struct.Struct(">16sHiIH")
_PORT_OFFSET = struct.Struct(">iq")
_UNIQ_TAIL = struct.Struct(">IH")

#: Lengths in hex characters for an IPv4 / IPv6 address.
ID_LENGTH_V4 = 32
ID_LENGTH_V6 = 56


class OffsetMsgId(NamedTuple):
    """What an offset message id holds: where the broker is and where the record starts."""

    host: str
    port: int
    offset: int


@lru_cache(maxsize=4096)
def pack_host(host: str) -> bytes:
    """The 4- or 16-byte form of an IP address string (``MessageIdError`` if it is not one)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).packed
    except ValueError:
        raise MessageIdError(f"not an IP address: {host!r}") from None


@lru_cache(maxsize=4096)
def host_to_str(packed: bytes) -> str:
    """The usual text form of a 4- or 16-byte address (IPv6 compressed, as Python writes it)."""
    return str(ipaddress.ip_address(packed))


def offset_msg_id_from_packed(packed_host: bytes, port: int, offset: int) -> str:
    """The offset id from an already packed address (the record decoder's fast path)."""
    try:
        return (packed_host + _PORT_OFFSET.pack(port, offset)).hex().upper()
    except struct.error as exc:
        raise MessageIdError(f"port {port} or offset {offset} out of range: {exc}") from None


def create_offset_msg_id(host: str, port: int, offset: int) -> str:
    """``MessageDecoder.createMessageId``: 32 hex chars for an IPv4 host, 56 for IPv6."""
    return offset_msg_id_from_packed(pack_host(host), port, offset)


def _unhex(msg_id: str) -> bytes:
    if len(msg_id) not in (ID_LENGTH_V4, ID_LENGTH_V6):
        raise MessageIdError(
            f"a message id has {ID_LENGTH_V4} or {ID_LENGTH_V6} hex characters, got {len(msg_id)}: {msg_id!r}"
        )
    try:
        if not msg_id.isascii():
            raise ValueError("non-ASCII")
        return bytes.fromhex(msg_id)
    except ValueError:
        raise MessageIdError(f"a message id is hexadecimal: {msg_id!r}") from None


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """``MessageDecoder.decodeMessageId``: host, port and CommitLog offset (any hex case accepted)."""
    raw = _unhex(msg_id)
    layout = _OFFSET_V4 if len(raw) == _OFFSET_V4.size else _OFFSET_V6
    packed, port, offset = layout.unpack(raw)
    return OffsetMsgId(host_to_str(packed), port, offset)


class UniqueId(NamedTuple):
    """The fields of a client unique id."""

    ip: str
    pid: int
    class_loader_hash: int
    #: Milliseconds since the start of the month the id was made in (producer's local time).
    month_offset_ms: int
    counter: int

    def approximate_timestamp(self, now_ms: int | None = None, tz: tzinfo | None = None) -> int:
        """Java's ``getNearlyTimeFromID`` guess in epoch ms: the latest month start that is in the past.

        ``tz`` is the producer's zone (default: this machine's local zone, which is what Java uses);
        ``now_ms`` defaults to the wall clock.
        """
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        start = _month_start_ms(now, tz, months_back=0)
        if start + self.month_offset_ms >= now:
            start = _month_start_ms(now, tz, months_back=1)
        return start + self.month_offset_ms


def parse_unique_id(unique_id: str) -> UniqueId:
    """Split a client unique id (32 or 56 hex chars) into its fields."""
    raw = _unhex(unique_id)
    layout = _UNIQ_V4 if len(raw) == _UNIQ_V4.size else _UNIQ_V6
    packed, pid, loader_hash, month_offset, counter = layout.unpack(raw)
    return UniqueId(host_to_str(packed), pid, loader_hash, month_offset, counter)


def _local_datetime(ms: int, tz: tzinfo | None) -> datetime:
    seconds = ms / 1000
    return datetime.fromtimestamp(seconds, tz) if tz is not None else datetime.fromtimestamp(seconds)


def _month_start_ms(ms: int, tz: tzinfo | None, months_back: int) -> int:
    """Epoch ms of 00:00:00.000 on the 1st of the month containing ``ms`` (minus ``months_back``)."""
    local = _local_datetime(ms, tz)
    month_index = local.year * 12 + (local.month - 1) - months_back
    start = local.replace(
        year=month_index // 12, month=month_index % 12 + 1, day=1, hour=0, minute=0, second=0, microsecond=0
    )
    return round(start.timestamp() * 1000)


def _month_bounds_ms(ms: int, tz: tzinfo | None) -> tuple[int, int]:
    return _month_start_ms(ms, tz, 0), _month_start_ms(ms, tz, -1)


class UniqueIdGenerator:
    """Makes unique ids laid out exactly like the Java client's ``MessageClientIDSetter.createUniqID``.

    ``ip`` defaults to 4 bytes taken from the clock, which is Java's own fallback when it cannot find
    an address (this package never looks at network interfaces); ``pid`` to this process's id;
    ``class_loader_hash`` to a per-process random int32 (Java's class loader identity hash is just as
    arbitrary). ``clock`` returns epoch ms and ``tz`` is the zone whose month starts count (default
    local time, as in Java). Thread-safe.
    """

    def __init__(
        self,
        ip: str | None = None,
        pid: int | None = None,
        class_loader_hash: int | None = None,
        *,
        clock: Callable[[], int] | None = None,
        tz: tzinfo | None = None,
    ) -> None:
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._tz = tz
        packed = pack_host(ip) if ip is not None else struct.pack(">q", self._clock())[4:]
        pid_value = (os.getpid() if pid is None else pid) & 0xFFFF
        loader = (
            int.from_bytes(os.urandom(4), "big", signed=True)
            if class_loader_hash is None
            else class_loader_hash
        )
        try:
            self._prefix = (packed + struct.pack(">Hi", pid_value, loader)).hex().upper()
        except struct.error as exc:
            raise MessageIdError(f"class loader hash out of int32 range: {exc}") from None
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._start = 0
        self._next_start = 0

    @property
    def prefix(self) -> str:
        """The fixed part (ip, pid, class-loader hash) every id of this generator starts with."""
        return self._prefix

    def next_id(self) -> str:
        """A new unique id: the fixed prefix, ms since this month's start, and a 16-bit counter."""
        with self._lock:
            now = self._clock()
            if now >= self._next_start or now < self._start:
                self._start, self._next_start = _month_bounds_ms(now, self._tz)
            tail = _UNIQ_TAIL.pack((now - self._start) & 0xFFFFFFFF, next(self._counter) & 0xFFFF)
        return self._prefix + tail.hex().upper()
