"""What the server needs from the store: the ``store.MessageStore`` facade, as a structural type.

Processors are written against this Protocol rather than the concrete class so that the server's
view of the store is exactly four calls (ARCHITECTURE.md) and nothing about file formats leaks in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


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

    def view_message(self, offset: int) -> memoryview | None: ...

    def topics(self) -> set[str]: ...
