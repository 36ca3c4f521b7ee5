"""What the server needs from the store, and the one place outside ``server.broker`` that names it.

The processors are written against the Protocols below, not against ``store.MessageStore``, so a
test can stand in any object with the calls a processor makes, and no file format leaks into the
server (``tests/test_layers.py`` fails on any other ``server`` module importing ``store``). They
declare, as structural types:

- ``QueryStore``: ``query_message`` (with its ``QueryResult``), ``view_message_copy``, ``topics``;
- ``ConsumeQueueStore`` adds the consume-queue reads: ``queue_nums``, ``min_offset``,
  ``max_offset``, ``earliest_message_time``, ``offset_by_time``, ``message_store_timestamp``,
  ``get_message`` (with its
  ``GetMessageResult``), ``topic_stats``, ``store_earliest_message_time``;
- ``StoreWithCommitLog`` adds ``commitlog`` (``CommitLogBounds``: its first and end offsets);
- ``AppendResult``: what the write path's ``put`` answers per record (the SEND's answer).

``refresh`` is declared where it is called (``server.refresh.Refreshable``); the write path's
calls are the broker's (``server.broker.writable_store``). Besides the calls, four facts of the
store the server needs are re-exported here: ``QueryArgumentError`` (what ``query_message`` raises
where Java's store throws on its arguments), ``QUERY_WALK_COMPILED`` (whether the key query's chain
walk is the compiled twin, which sizes the query pool's inline budget),
``total_physical_memory`` (``StoreUtil``'s RAM figure, for ``checkInDiskByConsumeOffset``) and
``disk_used_ratio`` (``UtilAll.getDiskPartitionSpaceUsedPercent``, for the runtime info's disk ratios).
The HTTP side (``server.http``) also reads ``ConsumerOffsetTable`` (``config/consumerOffset.json``, the
committed offsets a live broker saves, re-read when the file changes) and tells a damaged store by
``StoreError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Protocol

from store.config.consumer_offsets import ConsumerOffsetTable
from store.config.store_config import StoreConfig
from store.consumequeue.get_message import RecordFilter, total_physical_memory
from store.errors import DispatchWriteError, StoreError
from store.index.query_walk import COMPILED as QUERY_WALK_COMPILED
from store.index.service import ResumePoint
from store.message_store import RSS_CHECK_EVERY_RECORDS, QueryArgumentError, QueryResume
from store.platform.disk import disk_used_ratio
from store.write.writer import StoreRecord

__all__ = [
    "QUERY_WALK_COMPILED",
    "RSS_CHECK_EVERY_RECORDS",
    "AppendResult",
    "CommitLogBounds",
    "ConsumeQueueStore",
    "ConsumerOffsetTable",
    "DispatchWriteError",
    "GetMessageResult",
    "IndexedStore",
    "QueryArgumentError",
    "QueryResult",
    "QueryResume",
    "QueryStore",
    "RecordFilter",
    "ResumePoint",
    "StoreError",
    "StoreRecord",
    "StoreWithCommitLog",
    "disk_used_ratio",
    "total_physical_memory",
]


class QueryResult(Protocol):
    """``store.QueryMessageResult``: raw records in ascending offset order plus the index watermark."""

    buffers: Sequence[memoryview]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int
    budget_exhausted: bool
    #: Index entries the walks read (all rounds).
    visited: int


class QueryStore(Protocol):
    """The read side of ``MessageStore`` that the processors call."""

    def query_message(
        self,
        topic: str,
        key: str,
        max_num: int,
        begin: int,
        end: int,
        *,
        budget: int = ...,
        resume: Any = ...,
        deadline: int = ...,
    ) -> QueryResult:
        """Thread-safe (the server calls it from its query pool); ``budget`` bounds entries visited.

        ``resume``: a result's ``resume`` (when it has one), to finish that same query from where its
        budget stopped it. ``deadline`` (``time.monotonic_ns()``): the walks stop there as at a spent
        budget.
        """
        ...

    def view_message_copy(self, offset: int, max_size: int) -> bytes | None:
        """The record at ``offset`` copied out of the store, or None (also for one over ``max_size``)."""
        ...

    def topics(self) -> AbstractSet[str]:
        """The store's topics: a set kept by the store, a new object only when a topic came or went."""
        ...


class GetMessageResult(Protocol):
    """``store.consumequeue.consume_queue.GetMessageResult``: ``DefaultMessageStore.getMessage``'s answer."""

    @property
    def status(self) -> Any: ...  # a GetMessageStatus member: ``.name`` is the broker's remark

    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: Sequence[memoryview]
    suggest_pulling_from_slave: bool


class ConsumeQueueStore(QueryStore, Protocol):
    """The consume-queue reads: offsets per queue, offset by time, pulls, the figures of topic stats."""

    def queue_nums(self) -> Mapping[str, int]:
        """topic -> read queue count: a view of the kept table (O(1) per lookup)."""
        ...

    def min_offset(self, topic: str, queue_id: int) -> int: ...

    def max_offset(self, topic: str, queue_id: int) -> int: ...

    def earliest_message_time(self, topic: str, queue_id: int) -> int: ...

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int: ...

    def message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """``getMessageStoreTimeStamp``: store time of the entry at queue ``offset``, -1 when none."""
        ...

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        tags_codes: frozenset[int] | None = None,
        record_filter: RecordFilter | None = None,
    ) -> GetMessageResult: ...

    def topic_stats(self, topic: str) -> list[tuple[int, int, int, int]]: ...

    def store_earliest_message_time(self) -> int: ...

    def first_message_time(self) -> int: ...


class CommitLogBounds(Protocol):
    """The CommitLog's first and end byte offsets (runtime info, QUERY_CONSUMER_OFFSET)."""

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...


class StoreWithCommitLog(ConsumeQueueStore, Protocol):
    """The store as the runtime-info and consumer-offset answers see it."""

    commitlog: CommitLogBounds
    #: Its broker.conf (runtime info's paths, the consumer offset's in-memory ratio).
    config: StoreConfig


class IndexedStore(StoreWithCommitLog, Protocol):
    """The store as ``/metrics`` sees it: also where its index stands."""

    def index_last_update(self) -> tuple[int, int]:
        """(last indexed store time, CommitLog offset of the last indexed record); (0, 0) for none."""
        ...

    def view_message_copy(self, offset: int, max_size: int) -> bytes | None: ...

    def file_checks(self) -> dict[str, tuple[int, int]]:
        """kind ("index", "consume_queue") -> (files that failed their checks while served, files
        rebuilt from the CommitLog)."""
        ...


class AppendResult(Protocol):
    """``store.write.writer.Appended``: where one record of a SEND went (the SEND's answer)."""

    @property
    def offset(self) -> int: ...

    @property
    def offset_msg_id(self) -> str: ...

    @property
    def queue_offset(self) -> int: ...
