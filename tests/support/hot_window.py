"""A hot key over many IndexFiles, and the broker's rules for a key query with a time range.

``write_hot_window_store`` writes, deterministically (a fixed clock, no generated unique keys), a
store whose key ``hot`` of topic ``TopicW`` is written ``HOT_WRITES`` times among other keys, 37 ms
apart, into IndexFiles of ``MAX_INDEX_NUM`` entries: its chain crosses about ten files, shares its
slot with other keys (64 slots), and each file spans a few seconds, so a time range can cut through
a chain, start or end exactly on a file's begin or end, or hold nothing.

``java_query_offsets`` is the rule the 4.9.7 broker applies (``IndexService.queryOffset`` over
``IndexFile.selectPhyOffset``), written out here from its description so the tests can compare
the store's answers with it for any range: files newest first; a file is searched when its
``[beginTimestamp, endTimestamp]`` overlaps ``[begin, end]`` (``isTimeMatched``); its walk starts
at the key's slot and follows ``prevIndex``; an entry counts when its hash is the key's and its
time (``beginTimestamp + timeDiff * 1000``) lies in ``[begin, end]``; a walk ends at a negative time
diff, an invalid or self link, an entry older than ``begin``, or ``maxNum`` hits; the search ends
at a file that begins before ``begin`` or at ``maxNum`` hits. It is for intact files only (no
budget, no guard against loops).

Used by ``tests/store/index/test_time_window.py`` and the recorder of the real broker's answers,
``tests/server/golden/record_hot_window.py``.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

from protocol.index_key import build_index_key, index_key_hash
from store.config.store_config import StoreConfig
from store.write.writer import StoreWriter

TOPIC = "TopicW"
HOT = "hot"
T0 = 1_700_000_000_000
STEP_MS = 37
MESSAGES = 4_000
HOT_WRITES = MESSAGES // 2
MAX_HASH_SLOT_NUM = 64
MAX_INDEX_NUM = 600
COMMIT_LOG_FILE_SIZE = 1 << 20
MAX = 2**63 - 1

#: The geometry as the broker's configuration says it (``broker.conf`` beside the store).
BROKER_CONF = (
    f"mappedFileSizeCommitLog={COMMIT_LOG_FILE_SIZE}\n"
    f"maxHashSlotNum={MAX_HASH_SLOT_NUM}\n"
    f"maxIndexNum={MAX_INDEX_NUM}\n"
)

_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")


def hot_window_config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(
        root,
        broker_ip1="127.0.0.1",
        max_hash_slot_num=MAX_HASH_SLOT_NUM,
        max_index_num=MAX_INDEX_NUM,
        mapped_file_size_commit_log=COMMIT_LOG_FILE_SIZE,
    )


def write_hot_window_store(root: Path) -> StoreConfig:
    """Write the store at ``root`` (the same bytes every time) and return its configuration."""
    config = hot_window_config(root)
    now = [T0]

    def clock() -> int:
        value = now[0]
        now[0] += STEP_MS
        return value

    with StoreWriter(config, clock=clock) as w:
        for n in range(MESSAGES):
            keys = f"{HOT} k-{n % 50}" if n % 2 == 0 else f"k-{n % 50}"
            w.append(TOPIC, f"window body {n}".encode(), keys=keys, unique_key=False, queue_id=n % 4)
    return config


def index_paths(config: StoreConfig) -> list[Path]:
    """The store's IndexFiles, oldest first (their names order them)."""
    return sorted(p for p in config.index_dir.iterdir() if p.name.isdigit())


def fingerprint(config: StoreConfig) -> str:
    """sha256 over the IndexFiles' bytes (in order) and the CommitLog's: the same store, whatever
    its files' names (an IndexFile is named by the wall clock when it was created)."""
    digest = hashlib.sha256()
    for p in index_paths(config):
        digest.update(p.read_bytes())
    for p in sorted(config.store_path_commit_log.iterdir()):
        digest.update(p.read_bytes())
    return digest.hexdigest()


def headers(config: StoreConfig) -> list[tuple[int, int, int, int, int, int]]:
    """Each IndexFile's header: beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset,
    hashSlotCount, indexCount."""
    out = []
    for p in index_paths(config):
        with open(p, "rb") as f:
            out.append(_HEADER.unpack(f.read(_HEADER.size)))
    return out


def windows(config: StoreConfig) -> list[tuple[int, int, int]]:
    """(maxNum, begin, end) of the queries the tests ask: ranges on and around every file's begin
    and end, narrow ranges through the chain, begin > end, ranges outside every file, the whole
    range; each with maxNum 64 and some with a maxNum the range's hits exceed."""
    spans = [(h[0], h[1]) for h in headers(config)]
    ranges: list[tuple[int, int]] = [(0, MAX), (0, T0 - 1), (T0 - 10_000, T0 - 5_000)]
    last_end = spans[-1][1]
    ranges += [(last_end + 1, MAX), (last_end + 1_000, last_end + 2_000), (last_end, last_end)]
    for i, (b, e) in enumerate(spans):
        ranges += [
            (b, e),
            (b - 1, b),
            (b, b),
            (e, e),
            (e, e + 1),
            (b + 1, e - 1),
            (b + 500, b + 1_499),
            (e - 999, e),
            (e, b),  # begin > end
            (b - 1_000, b - 1),
        ]
        if i + 1 < len(spans):
            nb = spans[i + 1][0]
            ranges += [(e - 1_000, nb + 1_000), (e, nb), (e + 1, nb - 1)]
    for k in range(0, (last_end - T0) // 1_000, 7):  # 1 s and 100 ms ranges through the chain
        ranges += [(T0 + k * 1_000, T0 + k * 1_000 + 999), (T0 + k * 1_000 + 450, T0 + k * 1_000 + 549)]
    ranges += [(T0 + 60_000, T0 + 30_000), (MAX, 0), (T0 + 40_000, T0 + 40_000)]
    out = [(64, b, e) for b, e in ranges]
    out += [(n, b, e) for n in (1, 3) for b, e in ranges[::5]]
    out += [(64, T0 + 20_000, T0 + 29_999), (16, T0 + 20_000, T0 + 129_999), (0, 0, MAX)]
    return out


def java_query_offsets(
    config: StoreConfig, topic: str, key: str, max_num: int, begin: int, end: int, max_batch: int = 64
) -> tuple[list[int], int, int]:
    """The broker's ``queryOffset``: (offsets in the order found, indexLastUpdateTimestamp,
    indexLastUpdatePhyoffset), over the intact IndexFiles of ``config``'s store."""
    key_hash = index_key_hash(build_index_key(topic, key))
    max_num = min(max_num, max_batch)
    slot_num = config.max_hash_slot_num
    entries_at = 40 + slot_num * 4
    found: list[int] = []
    last_ts = last_phy = 0
    paths = index_paths(config)
    for i in range(len(paths) - 1, -1, -1):
        data = paths[i].read_bytes()
        begin_ts, end_ts, _begin_phy, end_phy, _slots, count = _HEADER.unpack_from(data, 0)
        if i == len(paths) - 1:
            last_ts, last_phy = end_ts, end_phy
        overlaps = (
            (begin < begin_ts and end > end_ts) or begin_ts <= begin <= end_ts or begin_ts <= end <= end_ts
        )
        if overlaps:
            slot = struct.unpack_from(">i", data, 40 + (key_hash % slot_num) * 4)[0]
            if 0 < slot <= count and count > 1:
                n = slot
                while len(found) < max_num:
                    hash_read, phy, diff, prev = _ENTRY.unpack_from(data, entries_at + n * 20)
                    if diff < 0:
                        break
                    time_read = begin_ts + diff * 1000
                    if hash_read == key_hash and begin <= time_read <= end:
                        found.append(phy)
                    if prev <= 0 or prev > count or prev == n or time_read < begin:
                        break
                    n = prev
        if begin_ts < begin or len(found) >= max_num:
            break
    return found, last_ts, last_phy
