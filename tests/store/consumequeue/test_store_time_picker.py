"""``store_time_picker`` (``CommitLog.pickupStoreTimestamp``) reads STORETIMESTAMP where the record's
sysflag puts it (issue 18, gaps): after an 8-byte BORNHOST at byte 56, after a 20-byte (IPv6) one at
byte 68. It used to accept any buffer of 72 bytes or more, so a consume-queue entry whose size is
72..75 for a record born on an IPv6 host raised ``struct.error`` out of the store (the answers of
SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME and GET_MESSAGE_STORE_TIMESTAMP), and one of
64..71 for an IPv4 record answered -1 where the broker reads the time.

The positions here are counted from the record layout by hand (``protocol/record_layout.py``'s
docstring): TOTALSIZE 4, MAGIC 4, BODYCRC 4, QUEUEID 4, FLAG 4, QUEUEOFFSET 8, PHYSICALOFFSET 8,
SYSFLAG 4, BORNTIMESTAMP 8, BORNHOST 8 or 20, then STORETIMESTAMP 8.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from store.config.store_config import StoreConfig
from store.consumequeue.consume_queue import store_time_picker
from store.message_store import MessageStore
from store.write.writer import StoreWriter

T_STORE = 1_800_000_123_456


def _store(root: Path, born_host: str) -> tuple[StoreConfig, int]:
    config = StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=200,
        max_hash_slot_num=64,
        max_index_num=256,
    )
    with StoreWriter(config) as writer:
        writer.append("T", b"x" * 40, born_host="127.0.0.1", store_timestamp=T_STORE - 1)
        done = writer.append("T", b"y" * 40, born_host=born_host, store_timestamp=T_STORE)
    return config, done.offset


@pytest.mark.parametrize("size", [72, 73, 75])
def test_a_short_read_of_an_ipv6_born_record_is_minus_one_not_struct_error(tmp_path: Path, size: int) -> None:
    config, offset = _store(tmp_path / "s", "2001:db8::7")
    with MessageStore.open(config) as store:
        pick = store_time_picker(store.commitlog)
        assert pick(offset, size) == -1  # the time ends at byte 76: not readable in `size` bytes
        assert pick(offset, 76) == T_STORE


def test_an_ipv4_record_is_read_from_64_bytes_as_the_broker_reads_it(tmp_path: Path) -> None:
    config, offset = _store(tmp_path / "s", "10.1.2.3")
    with MessageStore.open(config) as store:
        pick = store_time_picker(store.commitlog)
        assert pick(offset, 64) == T_STORE
        assert pick(offset, 63) == -1
        assert pick(offset, 39) == -1  # not even the sysflag


def test_a_queue_entry_with_a_short_size_answers_minus_one_through_the_store(tmp_path: Path) -> None:
    """The entry of the IPv6-born record (queue offset 1) with its size cut to 74 by hand."""
    config, offset = _store(tmp_path / "s", "::1")
    path = config.consume_queue_dir / "T" / "0" / ("0" * 20)
    data = bytearray(path.read_bytes())
    assert struct.unpack_from(">q", data, 20)[0] == offset
    struct.pack_into(">i", data, 28, 74)
    path.write_bytes(bytes(data))
    with MessageStore.open(config) as store:
        assert store.message_store_timestamp("T", 0, 1) == -1
        assert store.message_store_timestamp("T", 0, 0) == T_STORE - 1
