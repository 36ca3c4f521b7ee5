"""Generate a synthetic multi-file CommitLog for pipeline tests and benchmarks.

Real stores are small or private; the pipeline needs CommitLogs of any size (several files, GiBs)
whose every record is known. Records are encoded with the project's codec and laid out the way the
broker appends them: each file is ``file_size`` bytes, a record that would leave fewer than 8 bytes
free moves to the next file after an end-of-file blank record, and the last file is zero past its
tail. The mix of keys exercises every indexing rule: unique keys on most messages, several keys,
repeated keys, no keys, doubled spaces, transaction rollbacks (not indexed) and prepared messages
(indexed), store times that repeat within a millisecond and cross whole seconds.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from protocol.message import MessageExt, body_crc, encode_message
from protocol.message_flags import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from protocol.record_layout import BLANK_MAGIC_CODE, BLANK_SIZE, MAGIC_CODE_WIDTH, TOTAL_SIZE_WIDTH

TOPICS = ("TopicA", "TopicB", "orders-eu", "\u4e3b\u9898")
_STORE_HOST = ("127.0.0.1", 10911)


@dataclass(frozen=True, slots=True)
class GeneratedLog:
    """What was written: the directory, record count, bytes of records and files."""

    directory: Path
    records: int
    record_bytes: int
    files: int
    end_offset: int


def _properties(rng: random.Random, i: int) -> dict[str, str]:
    props: dict[str, str] = {"TAGS": f"tag{i % 5}"}
    roll = rng.random()
    if roll < 0.1:
        pass  # no keys at all
    elif roll < 0.2:
        props["KEYS"] = f"order-{i % 997}  dup-{i % 13} "  # doubled and trailing spaces
    elif roll < 0.5:
        props["KEYS"] = f"order-{i % 997} user-{rng.randrange(50)} sku-{rng.randrange(5000)}"
    else:
        props["KEYS"] = f"order-{i % 997}"
    if rng.random() < 0.8:
        props["UNIQ_KEY"] = f"7F0000010A8C{i:020X}"
    return props


def write_commitlog(
    directory: str | os.PathLike[str],
    *,
    file_size: int,
    messages: int | None = None,
    total_bytes: int | None = None,
    body_size: tuple[int, int] = (64, 512),
    seed: int = 7,
    start_timestamp: int = 1_795_216_834_250,
    written: list[MessageExt] | None = None,
) -> GeneratedLog:
    """Write a CommitLog of ``messages`` records (or until ``total_bytes``) under ``directory``.

    ``written``, when given, receives every message as it was encoded (offset and size set), so a
    test can state what the CommitLog holds without decoding it.
    """
    if messages is None and total_bytes is None:
        raise ValueError("give messages or total_bytes")
    rng = random.Random(seed)
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    bodies = [rng.randbytes(body_size[1]) for _ in range(8)]
    offset = 0
    file_start = 0
    files = 1
    count = 0
    record_bytes = 0
    store_ts = start_timestamp
    fh = open(root / f"{file_start:020d}", "wb")
    try:
        while (messages is None or count < messages) and (total_bytes is None or record_bytes < total_bytes):
            if rng.random() < 0.7:
                store_ts += rng.choice((0, 1, 2, 5, 40, 1100))
            body = bodies[count % len(bodies)][: rng.randint(*body_size)]
            roll = rng.random()
            sys_flag = (
                TRANSACTION_ROLLBACK_TYPE if roll < 0.01 else TRANSACTION_PREPARED_TYPE if roll < 0.02 else 0
            )
            msg = MessageExt(
                body_crc=body_crc(body),
                queue_id=count % 4,
                queue_offset=count // 4,
                commit_log_offset=offset,
                sys_flag=sys_flag,
                born_timestamp=store_ts - 3,
                born_host="10.0.0.7",
                born_port=40000 + count % 100,
                store_timestamp=store_ts,
                store_host=_STORE_HOST[0],
                store_port=_STORE_HOST[1],
                body=body,
                topic=TOPICS[count % len(TOPICS)],
                properties=_properties(rng, count),
            )
            data = encode_message(msg)
            free = file_start + file_size - offset
            if len(data) + BLANK_SIZE > free:
                # The broker's end-of-file rule: a blank record (TOTALSIZE the free bytes, then
                # BLANK_MAGIC_CODE), then the message starts the next file.
                blank_magic = BLANK_MAGIC_CODE.to_bytes(MAGIC_CODE_WIDTH, "big", signed=True)
                fh.write(free.to_bytes(TOTAL_SIZE_WIDTH, "big") + blank_magic)
                fh.truncate(file_size)
                fh.close()
                file_start += file_size
                offset = file_start
                files += 1
                fh = open(root / f"{file_start:020d}", "wb")
                msg.commit_log_offset = offset
                data = encode_message(msg)
            fh.write(data)
            if written is not None:
                msg.store_size = len(data)
                written.append(msg)
            offset += len(data)
            record_bytes += len(data)
            count += 1
        fh.truncate(file_size)
    finally:
        fh.close()
    return GeneratedLog(root, count, record_bytes, files, offset)
