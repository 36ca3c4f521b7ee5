"""What the server needs from the store: the ``store.MessageStore`` facade, as a structural type.

Processors are written against this Protocol rather than the concrete class so that the server's
view of the store is exactly four calls (ARCHITECTURE.md) and nothing about file formats leaks in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class QueryResult(Protocol):
    """``store.QueryMessageResult``: raw records in ascending offset order plus the index watermark."""

    buffers: Sequence[memoryview]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int
    budget_exhausted: bool


class QueryStore(Protocol):
    """The read side of ``MessageStore`` that the processors call."""

    def query_message(
        self, topic: str, key: str, max_num: int, begin: int, end: int, *, budget: int = ...
    ) -> QueryResult:
        """Thread-safe (the server calls it from its query pool); ``budget`` bounds entries visited."""
        ...

    def view_message_copy(self, offset: int, max_size: int) -> bytes | None:
        """The record at ``offset`` copied out of the store, or None (also for one over ``max_size``)."""
        ...

    def topics(self) -> set[str]: ...


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

    def queue_nums(self) -> dict[str, int]: ...

    def min_offset(self, topic: str, queue_id: int) -> int: ...

    def max_offset(self, topic: str, queue_id: int) -> int: ...

    def earliest_message_time(self, topic: str, queue_id: int) -> int: ...

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int: ...

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        tags_codes: frozenset[int] | None = None,
    ) -> GetMessageResult: ...

    def topic_stats(self, topic: str) -> list[tuple[int, int, int, int]]: ...

    def store_earliest_message_time(self) -> int: ...


class CommitLogBounds(Protocol):
    """The CommitLog's first and end byte offsets (runtime info, QUERY_CONSUMER_OFFSET)."""

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...


class StoreWithCommitLog(ConsumeQueueStore, Protocol):
    """The store as the runtime-info and consumer-offset answers see it."""

    commitlog: CommitLogBounds
