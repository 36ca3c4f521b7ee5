"""Messages as JSON lines: what ``rmq-query make-store --from`` reads (and ``record_to_json`` writes).

One JSON object per line, one message per object. Only ``topic`` is required; every missing field
gets what the broker would have stored had the Java producer sent the message:

- ``body`` (UTF-8 text) or ``body_base64``; default empty. ``compression`` (``zlib``, ``lz4``,
  ``zstd``) stores it compressed with the matching sysFlag, as a client that compresses does.
- ``keys`` (a string of space-separated keys, or a list), ``tags``, ``properties`` (an object),
  ``unique_key`` (a string; default: one generated like the Java client's; ``false``: none),
  ``delay_level`` (the broker stores it in ``SCHEDULE_TOPIC_XXXX``, as for a real send).
  The stored properties follow the broker's rule (``server.broker.put_message``): the client's HashMap with
  ``CLUSTER`` added and ``WAIT`` dropped, in Java HashMap order.
- ``queue_id`` (0), ``flag`` (0), ``sys_flag`` (0; a transaction state such as 4 = prepared or
  12 = rollback is kept, and such a message gets no consume-queue entry), ``reconsume_times`` (0),
  ``prepared_transaction_offset`` (0).
- ``born_timestamp`` (the store timestamp), ``store_timestamp`` (the previous message's, else now),
  ``born_host`` (``"127.0.0.1:0"``), ``store_host`` (the store's ``brokerIP1:listenPort``).

For a byte-exact copy of an existing record two more fields bypass the broker's rules:
``properties_raw`` (the stored properties string, as is) and ``stored_body_base64`` (the stored
body, already compressed when ``sys_flag`` says so). ``record_to_json`` writes every field that way,
so a store dumped to JSONL and made again is byte-identical.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from protocol.compression import compress
from protocol.message import MessageExt
from protocol.message_flags import COMPRESSED_FLAG, COMPRESSION_TYPE_SHIFT, CompressionType
from protocol.message_id import UniqueIdGenerator
from protocol.send_message import SendMessageRequestHeader, client_properties
from server.broker.put_message import MAX_DELAY_LEVEL, PutContext, PutRefused, java_utf8, single_record
from store.errors import StoreError
from store.write.writer import StoreRecord

_CODECS = {"zlib": CompressionType.ZLIB, "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}
_KNOWN = frozenset(
    {
        "topic",
        "body",
        "body_base64",
        "stored_body_base64",
        "compression",
        "keys",
        "tags",
        "properties",
        "properties_raw",
        "unique_key",
        "delay_level",
        "queue_id",
        "flag",
        "sys_flag",
        "reconsume_times",
        "prepared_transaction_offset",
        "born_timestamp",
        "store_timestamp",
        "born_host",
        "store_host",
    }
)


class MessageLineError(StoreError):
    """A line of the JSONL file that does not describe a message; names the line."""


@dataclass(frozen=True, slots=True)
class FixtureMessage:
    """One parsed line: the record to store and its store timestamp."""

    record: StoreRecord
    store_timestamp: int


def _host(value: object, what: str, line: int) -> tuple[str, int]:
    if not isinstance(value, str):
        raise MessageLineError(f"line {line}: {what} must be a string 'host:port'")
    host, sep, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise MessageLineError(f"line {line}: {what} {value!r} is not 'host:port'")
    return host, int(port)


def _int(obj: dict, name: str, default: int, line: int) -> int:
    value = obj.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MessageLineError(f"line {line}: {name} must be an integer, got {value!r}")
    return value


def _str(obj: dict, name: str, line: int) -> str | None:
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise MessageLineError(f"line {line}: {name} must be a string, got {value!r}")
    return value


def _b64(obj: dict, name: str, line: int) -> bytes | None:
    value = _str(obj, name, line)
    if value is None:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise MessageLineError(f"line {line}: {name} is not base64: {exc}") from None


class MessageReader:
    """Turns JSON objects into records with the broker's defaults (stateful: clock, unique ids)."""

    def __init__(
        self,
        *,
        cluster: str,
        max_message_size: int,
        clock: Callable[[], int] | None = None,
        unique_ids: UniqueIdGenerator | None = None,
        max_delay_level: int = MAX_DELAY_LEVEL,
    ) -> None:
        self.cluster = cluster
        self.max_message_size = max_message_size
        self.max_delay_level = max_delay_level
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._ids = unique_ids or UniqueIdGenerator()
        self._last_store_ts: int | None = None

    def message(self, obj: object, line: int) -> FixtureMessage:
        if not isinstance(obj, dict):
            raise MessageLineError(f"line {line}: expected a JSON object")
        unknown = sorted(set(obj) - _KNOWN)
        if unknown:
            raise MessageLineError(f"line {line}: unknown field(s) {', '.join(unknown)}")
        topic = _str(obj, "topic", line)
        if not topic:
            raise MessageLineError(f"line {line}: topic is required")
        store_ts = obj.get("store_timestamp")
        if store_ts is None:
            store_ts = self._last_store_ts if self._last_store_ts is not None else self._clock()
        elif not isinstance(store_ts, int) or isinstance(store_ts, bool):
            raise MessageLineError(f"line {line}: store_timestamp must be an integer")
        self._last_store_ts = store_ts
        born_host, born_port = _host(obj.get("born_host", "127.0.0.1:0"), "born_host", line)
        store_host = _host(obj["store_host"], "store_host", line) if "store_host" in obj else (None, None)
        sys_flag = _int(obj, "sys_flag", 0, line)
        body = self._body(obj, line)
        codec = _str(obj, "compression", line)
        if codec is not None and "stored_body_base64" not in obj:
            if codec not in _CODECS:
                raise MessageLineError(f"line {line}: compression must be one of {', '.join(_CODECS)}")
            sys_flag = (sys_flag & ~(0x7 << COMPRESSION_TYPE_SHIFT)) | COMPRESSED_FLAG
            sys_flag |= _CODECS[codec] << COMPRESSION_TYPE_SHIFT
            body = compress(body, _CODECS[codec])
        raw = _str(obj, "properties_raw", line)
        if raw is not None:
            record = StoreRecord(
                topic, body, java_utf8(raw), queue_id=_int(obj, "queue_id", 0, line), sys_flag=sys_flag
            )
        else:
            record = self._as_sent(obj, topic, body, sys_flag, born_host, born_port, store_ts, line)
        record.flag = _int(obj, "flag", 0, line)
        record.reconsume_times = _int(obj, "reconsume_times", 0, line)
        record.prepared_transaction_offset = _int(obj, "prepared_transaction_offset", 0, line)
        record.born_timestamp = _int(obj, "born_timestamp", store_ts, line)
        record.born_host, record.born_port = born_host, born_port
        record.store_host, record.store_port = store_host
        return FixtureMessage(record, store_ts)

    @staticmethod
    def _body(obj: dict, line: int) -> bytes:
        given = [n for n in ("body", "body_base64", "stored_body_base64") if n in obj]
        if len(given) > 1:
            raise MessageLineError(f"line {line}: give one of body, body_base64, stored_body_base64")
        if "body" in obj:
            text = _str(obj, "body", line)
            return (text or "").encode("utf-8")
        return (_b64(obj, given[0], line) or b"") if given else b""

    def _as_sent(
        self,
        obj: dict,
        topic: str,
        body: bytes,
        sys_flag: int,
        born_host: str,
        born_port: int,
        store_ts: int,
        line: int,
    ) -> StoreRecord:
        """What the broker stores when a Java producer sends this message (``server.broker.put_message``)."""
        keys = obj.get("keys")
        if keys is not None and not (
            isinstance(keys, str) or (isinstance(keys, list) and all(isinstance(k, str) for k in keys))
        ):
            raise MessageLineError(f"line {line}: keys must be a string or a list of strings")
        props = obj.get("properties") or {}
        if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
            raise MessageLineError(f"line {line}: properties must be an object of strings")
        unique = obj.get("unique_key", True)
        if unique is True:
            unique = self._ids.next_id()
        elif unique is False:
            unique = None
        elif not isinstance(unique, str):
            raise MessageLineError(f"line {line}: unique_key must be a string, true or false")
        header = SendMessageRequestHeader(
            producer_group="make-store",
            topic=topic,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=_int(obj, "queue_id", 0, line),
            sys_flag=sys_flag,
            born_timestamp=_int(obj, "born_timestamp", store_ts, line),
            flag=_int(obj, "flag", 0, line),
            properties=client_properties(
                keys, _str(obj, "tags", line), props, unique, _int(obj, "delay_level", 0, line)
            ),
        )
        try:
            return single_record(
                header,
                body,
                PutContext(self.cluster, self.max_message_size, born_host, born_port, self.max_delay_level),
            )
        except PutRefused as refused:
            raise MessageLineError(
                f"line {line}: the broker would refuse this message: {refused.remark}"
            ) from None

    def read_file(self, path: Path) -> Iterator[FixtureMessage]:
        """Every message of a JSONL file (blank lines skipped); ``MessageLineError`` names a bad line."""
        decoder = msgspec.json.Decoder()
        with open(path, "rb") as f:
            for n, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    obj = decoder.decode(raw)
                except msgspec.DecodeError as exc:
                    raise MessageLineError(f"line {n}: not JSON: {exc}") from None
                yield self.message(obj, n)


def _host_text(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def record_to_json(msg: MessageExt, raw_properties: str) -> dict[str, object]:
    """A stored record as a JSONL object that ``make-store`` turns back into the same bytes.

    ``raw_properties`` is the properties string exactly as stored (a dict loses repeats and order).
    """
    stored = msg.stored_body if msg.stored_body is not None else msg.body
    return {
        "topic": msg.topic,
        "queue_id": msg.queue_id,
        "flag": msg.flag,
        "sys_flag": msg.sys_flag,
        "born_timestamp": msg.born_timestamp,
        "born_host": _host_text(msg.born_host, msg.born_port),
        "store_timestamp": msg.store_timestamp,
        "store_host": _host_text(msg.store_host, msg.store_port),
        "reconsume_times": msg.reconsume_times,
        "prepared_transaction_offset": msg.prepared_transaction_offset,
        "properties_raw": raw_properties,
        "stored_body_base64": base64.b64encode(stored).decode("ascii"),
    }
