"""Find a table read's records by key through the store's IndexFiles (the ``key`` option and a
``uniqueKey`` equality filter of ``format("rocketmq")``).

The broker indexes each message under ``topic#UNIQ_KEY`` and ``topic#k`` for every token ``k`` of
its KEYS (``IndexService.buildIndex``; rolled-back transaction records are not indexed). A lookup
walks every IndexFile's hash chain for each (topic, value): unlike the broker's QUERY_MESSAGE it is
not capped at ``maxMsgsNumBatch`` offsets, and it covers every file, whatever its time span. The
offsets found are candidates (hash chains hold other keys of the same hash too): the read decodes
each and keeps it only if its keys (or unique key) really hold a value asked for.

The topics to look in: the read's topic filter, else every topic the store knows (its consume queue
directories and ``config/topics.json``). Records past the index's end (``covered``: where the last
record it indexed ends) are not in it yet and are read in full.
"""

from __future__ import annotations

import bisect
import os
import struct

from protocol.index_key import build_index_key
from store.config.store_config import StoreConfig
from store.config.topics import TopicTable
from store.consumequeue.builder import safe_topic_dir
from store.index.index_file import UNBOUNDED
from store.index.service import IndexService
from store.spark.ranges import CommitLogFile

_TOTAL_SIZE = struct.Struct(">i")


def store_topics(config: StoreConfig) -> set[str]:
    """Every topic the store knows: its consume queue directories and ``config/topics.json``."""
    topics: set[str] = set()
    try:
        topics.update(
            e.name for e in os.scandir(config.consume_queue_dir) if e.is_dir() and safe_topic_dir(e.name)
        )
    except FileNotFoundError:
        pass
    table = config.store_path_root_dir / "config" / "topics.json"
    if table.is_file():
        topics.update(TopicTable.load(table).snapshot()[2])
    return topics


def index_offsets(
    config: StoreConfig, files: list[CommitLogFile], topics: set[str] | frozenset[str], values: frozenset[str]
) -> tuple[list[int], int] | None:
    """The CommitLog offsets the IndexFiles hold for ``topic#value`` (every topic, every value),
    sorted, and ``covered``: where the last indexed record ends (later records are not indexed yet).
    None when the store has no usable index (no files, or nothing indexed): the caller reads it all.
    """
    service = IndexService(config)
    try:
        index_files = service.files
        if not index_files:
            return None
        last_indexed = max(f.header.end_phy_offset for f in index_files)
        if last_indexed <= 0 and sum(f.header.index_count for f in index_files) <= 1:
            return None
        covered = last_indexed + _record_size(files, last_indexed)
        found: set[int] = set()
        for topic in sorted(topics):
            for value in sorted(values):
                key = build_index_key(topic, value)
                for f in index_files:
                    out: list[int] = []
                    f.select_phy_offsets(out, key, UNBOUNDED, 0, UNBOUNDED)
                    found.update(out)
        return sorted(found), covered
    finally:
        service.close()


def _record_size(files: list[CommitLogFile], offset: int) -> int:
    """TOTALSIZE of the record at ``offset`` (the last one indexed); 0 when it cannot be read, so the
    read goes on from its start instead (that record then read in full too)."""
    i = bisect.bisect_right([f.start for f in files], offset) - 1
    if i < 0:
        return 0
    try:
        fd = os.open(files[i].path, os.O_RDONLY)
    except OSError:
        return 0
    try:
        head = os.pread(fd, 4, offset - files[i].start)
    finally:
        os.close(fd)
    size = _TOTAL_SIZE.unpack(head)[0] if len(head) == 4 else 0
    return max(size, 0)
