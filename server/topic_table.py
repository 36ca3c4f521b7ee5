"""The store's topic table (topic -> read queue count), reused for a second between looks.

``MessageStore.queue_nums()`` reads ``config/topics.json`` or lists the consumequeue directories:
about 0.2 ms, more than the rest of a PULL_MESSAGE. Routes, the pull's queue-id check and the topic
list all need it, so the server asks the store at most once per ``ttl`` (a topic a live broker
creates shows up within that time, as with the name server's own refresh).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Protocol

#: Seconds the table is reused.
DEFAULT_TTL = 1.0


class QueueNumsSource(Protocol):
    def queue_nums(self) -> Mapping[str, int]: ...


class TopicTable:
    """A cached ``queue_nums()``."""

    __slots__ = ("_expire", "_source", "_table", "_ttl")

    def __init__(self, source: QueueNumsSource, ttl: float = DEFAULT_TTL) -> None:
        self._source = source
        self._ttl = ttl
        self._table: Mapping[str, int] = {}
        self._expire = float("-inf")

    def queue_nums(self) -> Mapping[str, int]:
        now = time.monotonic()
        if now >= self._expire:
            self._table = self._source.queue_nums()
            self._expire = now + self._ttl
        return self._table
