"""A store writer for tests, the demo and benchmarks: appends records the way the broker does.

Records are encoded by ``protocol.message.encode_message`` with the broker's fields filled in: the
physical offset, queue offset per (topic, queue), BODYCRC, store host and store timestamp, and a
``UNIQ_KEY`` generated like the Java client's (``UniqueIdGenerator``) unless one is given.
CommitLog files are created preallocated to ``mappedFileSizeCommitLog`` and a record that does not
fit (with room for the 8-byte end marker) ends the file with a blank record, as the broker does.
``index()`` runs the index builder over what was appended, so the IndexFiles are the broker's too,
and (unless ``consume_queues=False``) the ConsumeQueue builder, so are the consume queues. As in the
broker, PREPARED and ROLLBACK transaction records carry queue offset 0 and take no queue position.

The store directory gets the broker's layout: ``commitlog/``, ``index/``, ``checkpoint``, ``abort``
while open, and ``config/topics.json`` listing the topics written (the topic table the broker keeps).
This is not a broker: one writer per store, no flush policy beyond ``close()``.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import msgspec

from protocol.message import (
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MessageExt,
    body_crc,
    encode_message,
    read_index_fields,
)
from protocol.message_flags import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    STOREHOST_V6_FLAG,
    TRANSACTION_TYPE_MASK,
)
from protocol.message_id import UniqueIdGenerator, create_offset_msg_id, pack_host
from store.checkpoint import Checkpoint, create_abort_marker, remove_abort_marker
from store.commitlog import CommitLog
from store.config import StoreConfig
from store.consume_queue_builder import ConsumeQueueBuilder
from store.errors import StoreError
from store.index_builder import IndexBuilder

_BLANK = struct.Struct(">ii")
_PREPARED, _ROLLBACK = 0x4, 0xC


def _takes_no_queue_position(sys_flag: int) -> bool:
    """PREPARED and ROLLBACK records: queue offset 0, no consume queue entry (CommitLog.doAppend)."""
    return sys_flag & TRANSACTION_TYPE_MASK in (_PREPARED, _ROLLBACK)


_PHYSICAL_OFFSET = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class Appended:
    """Where one appended record went and the ids a client would print for it."""

    offset: int
    size: int
    offset_msg_id: str
    unique_key: str | None
    store_timestamp: int


class StoreWriter:
    """Appends records to a store directory and keeps its index up to date."""

    def __init__(
        self,
        config: StoreConfig,
        *,
        store_host: str | None = None,
        store_port: int | None = None,
        clock: Callable[[], int] | None = None,
        unique_ids: UniqueIdGenerator | None = None,
        index_now: Callable[[], int] | None = None,
        consume_queues: bool = True,
    ) -> None:
        self.config = config
        self.store_host = store_host or config.broker_ip1
        self.store_port = store_port if store_port is not None else config.listen_port
        self._store_v6 = len(pack_host(self.store_host)) == 16
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._unique_ids = unique_ids or UniqueIdGenerator()
        self.file_size = config.mapped_file_size_commit_log
        root = config.store_path_root_dir
        root.mkdir(parents=True, exist_ok=True)
        config.store_path_commit_log.mkdir(parents=True, exist_ok=True)
        self._reader = CommitLog(config.store_path_commit_log, self.file_size)
        self._position = self._reader.max_offset
        self._queue_offsets: dict[tuple[str, int], int] = {}
        self._topics: dict[str, int] = {}
        for _offset, buf in self._reader.iter_records():
            fields = read_index_fields(buf, 0)
            queue_id = int.from_bytes(buf[12:16], "big", signed=True)
            if not _takes_no_queue_position(fields.sys_flag):
                self._note(fields.topic, queue_id)
        self._fd: int | None = None
        self._fd_start = -1
        self._last_store_ts = 0
        self.builder: IndexBuilder | None = (
            IndexBuilder(config, self._reader, now_millis=index_now) if config.message_index_enable else None
        )
        self.cq_builder: ConsumeQueueBuilder | None = (
            ConsumeQueueBuilder(config, self._reader) if consume_queues else None
        )
        # Marked in use only now: the builder above must see only a marker a crashed writer left.
        create_abort_marker(root)

    def _note(self, topic: str, queue_id: int) -> int:
        key = (topic, queue_id)
        q = self._queue_offsets.get(key, 0)
        self._queue_offsets[key] = q + 1
        self._topics[topic] = max(self._topics.get(topic, 0), queue_id + 1)
        return q

    # -- files ---------------------------------------------------------------------------------------

    def _file_for(self, start: int) -> int:
        if self._fd is not None and self._fd_start == start:
            return self._fd
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        path = self.config.store_path_commit_log / f"{start:020d}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(fd).st_size < self.file_size:
            os.ftruncate(fd, self.file_size)
        self._fd, self._fd_start = fd, start
        return fd

    def _write(self, data: bytes) -> int:
        """Write one record at the current position (rolling to a new file if needed); its offset."""
        if len(data) + 8 > self.file_size:
            raise StoreError(
                f"a record of {len(data)} bytes cannot fit a {self.file_size}-byte CommitLog file"
            )
        start = self._position - self._position % self.file_size
        pos = self._position - start
        free = self.file_size - pos
        if len(data) + 8 > free:
            if free >= 8:
                os.pwrite(self._file_for(start), _BLANK.pack(free, BLANK_MAGIC_CODE), pos)
            start += self.file_size
            pos = 0
            self._position = start
        os.pwrite(self._file_for(start), data, pos)
        offset = self._position
        self._position += len(data)
        return offset

    # -- appending -----------------------------------------------------------------------------------

    def append(
        self,
        topic: str,
        body: bytes,
        *,
        keys: str | Iterable[str] | None = None,
        tags: str | None = None,
        properties: Mapping[str, str] | None = None,
        unique_key: str | bool = True,
        queue_id: int = 0,
        sys_flag: int = 0,
        flag: int = 0,
        born_host: str = "127.0.0.1",
        born_port: int = 50000,
        born_timestamp: int | None = None,
        store_timestamp: int | None = None,
    ) -> Appended:
        """Append one message; ``unique_key`` True generates one, False omits it, a str sets it.

        A compressed ``sys_flag`` (0x1 plus a codec in bits 8-10) compresses ``body`` with that codec.
        """
        now = self._clock() if store_timestamp is None else store_timestamp
        props: dict[str, str] = {}
        if keys is not None:
            props[PROPERTY_KEYS] = keys if isinstance(keys, str) else " ".join(keys)
        if tags is not None:
            props[PROPERTY_TAGS] = tags
        if properties:
            props.update(properties)
        uniq: str | None = None
        if unique_key is True:
            uniq = self._unique_ids.next_id()
        elif isinstance(unique_key, str):
            uniq = unique_key
        if uniq is not None:
            props[PROPERTY_UNIQ_KEY] = uniq
        sys_flag &= ~(STOREHOST_V6_FLAG | BORNHOST_V6_FLAG)
        if self._store_v6:
            sys_flag |= STOREHOST_V6_FLAG
        if len(pack_host(born_host)) == 16:
            sys_flag |= BORNHOST_V6_FLAG
        topic_bytes = topic.encode("utf-8")
        msg = MessageExt(
            magic=MAGIC_CODE_V2 if len(topic_bytes) > 127 else MAGIC_CODE_V1,
            queue_id=queue_id,
            flag=flag,
            sys_flag=sys_flag,
            born_timestamp=now if born_timestamp is None else born_timestamp,
            born_host=born_host,
            born_port=born_port,
            store_timestamp=now,
            store_host=self.store_host,
            store_port=self.store_port,
            body=body,
            topic=topic,
            properties=props,
        )
        if sys_flag & COMPRESSED_FLAG:
            from protocol.compression import compress
            from protocol.message_flags import compression_type_value

            msg.stored_body = compress(body, compression_type_value(sys_flag))
        msg.body_crc = body_crc(msg.stored_body if msg.stored_body is not None else body)
        no_position = _takes_no_queue_position(sys_flag)
        msg.queue_offset = 0 if no_position else self._queue_offsets.get((topic, queue_id), 0)
        data = bytearray(encode_message(msg))
        # PHYSICALOFFSET is where the record lands, which depends on whether it still fits this file.
        start = self._position - self._position % self.file_size
        fits = len(data) + 8 <= self.file_size - (self._position - start)
        _PHYSICAL_OFFSET.pack_into(data, 28, self._position if fits else start + self.file_size)
        offset = self._write(bytes(data))
        if no_position:
            self._topics[topic] = max(self._topics.get(topic, 0), queue_id + 1)
        else:
            self._note(topic, queue_id)
        self._last_store_ts = now
        return Appended(
            offset, len(data), create_offset_msg_id(self.store_host, self.store_port, offset), uniq, now
        )

    @property
    def position(self) -> int:
        """The CommitLog offset the next record will be written at."""
        return self._position

    @property
    def topics(self) -> set[str]:
        return set(self._topics)

    def index(self) -> int:
        """Index everything appended so far; returns the number of records read."""
        self._reader.refresh()
        if self.cq_builder is not None:
            self.cq_builder.run_once()
        return self.builder.run_once() if self.builder is not None else 0

    def close(self) -> None:
        """Index what is left, write the checkpoint and topic table, and remove the abort marker."""
        self.index()
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        if self.builder is not None:
            self.builder.close()
        if self.cq_builder is not None:
            self.cq_builder.close()
        root = self.config.store_path_root_dir
        checkpoint = Checkpoint.read_or_default(self.config.checkpoint_path)
        checkpoint.physic_msg_timestamp = max(checkpoint.physic_msg_timestamp, self._last_store_ts)
        if self.cq_builder is None:
            checkpoint.logics_msg_timestamp = checkpoint.physic_msg_timestamp
        checkpoint.write(self.config.checkpoint_path)
        self._write_topics(root / "config" / "topics.json")
        self._reader.close()
        remove_abort_marker(root)

    def _write_topics(self, path: Path) -> None:
        table: dict[str, dict[str, object]] = {}
        try:
            existing = msgspec.json.decode(path.read_bytes())
            if isinstance(existing, dict) and isinstance(existing.get("topicConfigTable"), dict):
                table.update(existing["topicConfigTable"])
        except (OSError, msgspec.DecodeError):
            pass
        for topic, queues in sorted(self._topics.items()):
            nums = max(queues, 4)
            table.setdefault(
                topic,
                {
                    "topicName": topic,
                    "readQueueNums": nums,
                    "writeQueueNums": nums,
                    "perm": 6,
                    "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": 0,
                    "order": False,
                },
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "topicConfigTable": table,
            "dataVersion": {"counter": len(table), "timestamp": self._last_store_ts},
        }
        tmp = path.with_suffix(".json.tmp")
        tmp.write_bytes(msgspec.json.format(msgspec.json.encode(doc), indent=1))
        tmp.replace(path)

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
