"""The store's topics and queues: which exist, how many each has, and their opened ConsumeQueues.

Queue counts come from the store itself, never a constant: ``config/topics.json`` (the broker's
TopicConfigManager file: ``readQueueNums`` / ``writeQueueNums``), else the ``consumequeue``
directories (highest queue id + 1, as a broker that registers a topic from its consume queues does).

Like the broker's ``findConsumeQueue``, asking for an unknown topic or queue id gives an empty queue
(min 0, max 0); unlike it, such a queue is not kept, so lookups of made-up names hold no memory.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.consumequeue.consume_queue import ConsumeQueue, RebuildRequest
from store.consumequeue.topic_counts import TopicCounts, TopicQueueNums, read_topics_json

__all__ = ["QueueTable", "TopicQueueNums", "read_topics_json"]

#: Opened queues refreshed per ``refresh`` at most; past that they take turns (and a queue asked for
#: is refreshed when its last refresh is older than ``STALE_AFTER`` seconds).
REFRESH_BUDGET = 4096
STALE_AFTER = 1.0
#: Seconds one ``refresh`` spends on the queues at most (at least one queue), the rest taking turns
#: as past ``REFRESH_BUDGET``: a queue's refresh (its directory listed, its files looked at) is about
#: 20 us, so the periodic refresh of 4,000 opened queues (1,000 topics written to) held the event
#: loop 80-90 ms every second, and 100-144 ms at 8,000. About 1,000 queues fit: up to there each is
#: still refreshed every pass. (The compiled request path reads an opened queue as its last refresh
#: left it, as it did past ``REFRESH_BUDGET``: a store written by another process is seen that late.)
REFRESH_SECONDS = 0.020
#: A put's refresh of a queue takes the builder's own appends as written (``refresh_some``) only
#: within this many seconds of the queue's last full refresh; past that it refreshes in full (the
#: CommitLog's ``FULL_CHECK_EVERY`` rule): a file added, deleted or replaced beside the one written
#: is seen at most this late under a stream of SENDs (and by the server's periodic refresh anyway).
FULL_LOOK_EVERY = 0.05
#: (Opening a queue is a full refresh too: the first put right after a read opened it takes the
#: shortcut rather than listing the directory the open just listed.)


class QueueTable:
    """The ConsumeQueues of a store, opened on first use and refreshed together."""

    def __init__(self, config: StoreConfig, commitlog: CommitLog) -> None:
        self.config = config
        self.commitlog = commitlog
        self.root = config.consume_queue_dir
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        #: Queues holding files to rebuild (``take_rebuilds``).
        self._rebuilds: list[ConsumeQueue] = []
        self._lock = threading.RLock()
        #: The opened queues in the order they were opened (the round of ``refresh``), where the
        #: round stands, and when each was last refreshed.
        self._keys: list[tuple[str, int]] = []
        self._cursor = 0
        self._refreshed: dict[tuple[str, int], float] = {}
        #: Whether the queues take turns (more than ``REFRESH_BUDGET``, or the last ``refresh`` ran
        #: out of ``REFRESH_SECONDS``): a queue asked for is then refreshed when stale.
        self._over_budget = False
        self._short = False
        #: The store's consume queue builder's ``written_tail`` (set by the store that builds them):
        #: where its appends to a queue went, for ``refresh_some``'s shortcut.
        self.written_tail: Callable[[tuple[str, int]], tuple[int, int, int] | None] | None = None
        #: topic -> queue counts, kept current (``TopicCounts``: re-read only when a source changed).
        self.counts = TopicCounts(config.store_path_root_dir / "config" / "topics.json", self.root)

    def directory_queue_ids(self) -> dict[str, list[int]]:
        """topic -> queue ids present as ``consumequeue/TOPIC/QID`` directories."""
        out: dict[str, list[int]] = {}
        try:
            topics = [e for e in os.scandir(self.root) if e.is_dir()]
        except OSError:
            return out
        for t in topics:
            try:
                ids = [int(e.name) for e in os.scandir(t.path) if e.is_dir() and e.name.isdigit()]
            except OSError:
                continue
            if ids:
                out[t.name] = sorted(ids)
        return out

    def queue_nums(self) -> dict[str, TopicQueueNums]:
        """topic -> (read, write) queue counts: topics.json, else highest consumequeue id + 1. Shared
        and kept current (``TopicCounts``): do not change it."""
        return self.counts.counts()

    def get(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue (an empty, unkept one when it has no directory)."""
        key = (topic, queue_id)
        with self._lock:
            queue = self._queues.get(key)
            if queue is not None:
                if self._over_budget:
                    self._refresh_if_stale(key, queue)
                return queue
            exists = (
                queue_id >= 0
                and _safe_name(topic)
                # a topic with no directory at all needs no look at its queue's (issue 30)
                and self.counts.has_dir(topic)
                and _is_dir(self.root / topic / str(queue_id))
            )
            # opening refreshes it in full (the constructor lists and maps its files): the look a
            # put's shortcut needs within ``FULL_LOOK_EVERY``, dated from before it began
            opened_at = time.monotonic()
            queue = ConsumeQueue(
                self.root if exists else None,
                topic,
                queue_id,
                self.config.consume_queue_file_size,
                self.commitlog,
                repair=True,
            )
            if not exists:
                return queue
            self._queues[key] = queue
            self._keys.append(key)
            self._refreshed[key] = opened_at
            self._over_budget = self._short or len(self._keys) > REFRESH_BUDGET
            return queue

    def opened(self) -> dict[tuple[str, int], ConsumeQueue]:
        """The queues opened so far, by (topic, queue id): what ``get`` answers first. The dict
        itself, not a copy (the compiled request path looks a queue up in it per request, on the
        thread that opens queues; ``server/remoting/_request_path_offsets.h``)."""
        return self._queues

    def refresh(self) -> None:
        """Refresh the opened queues: all of them while they are at most ``REFRESH_BUDGET`` and take
        at most ``REFRESH_SECONDS``; past either, as many as fit, the next ones in turn at the next
        call, and any other one when it is asked for and was last refreshed over ``STALE_AFTER`` ago
        (issue 30: a store with 50,000 topics opened by a scrape made every refresh list 200,000
        directories on the event loop)."""
        with self._lock:
            keys = self._keys
            total = len(keys)
            if not total:
                return
            count = min(total, REFRESH_BUDGET)
            start = self._cursor % total
            now = time.monotonic()
            clock = time.perf_counter
            deadline = clock() + REFRESH_SECONDS
            queues = self._queues
            done = 0
            while done < count:
                key = keys[(start + done) % total]
                self._refresh_one(key, queues[key], now)
                done += 1
                if clock() >= deadline:
                    break
            self._cursor = start + done
            self._short = done < count
            self._over_budget = self._short or total > REFRESH_BUDGET

    def _refresh_one(self, key: tuple[str, int], queue: ConsumeQueue, now: float) -> None:
        queue.refresh()
        self._refreshed[key] = now
        if queue.rebuilds:
            self._rebuilds.append(queue)

    def _refresh_if_stale(self, key: tuple[str, int], queue: ConsumeQueue) -> None:
        now = time.monotonic()
        if now - self._refreshed.get(key, 0.0) > STALE_AFTER:
            self._refresh_one(key, queue, now)

    def take_rebuilds(self) -> list[tuple[ConsumeQueue, RebuildRequest]]:
        """The files the queues' refreshes found overwritten, to rebuild from the CommitLog
        (``ConsumeQueue.rebuilds``), each given out once."""
        with self._lock:
            out: list[tuple[ConsumeQueue, RebuildRequest]] = []
            for queue in self._rebuilds:
                out.extend((queue, item) for item in queue.rebuilds)
                queue.rebuilds.clear()
            self._rebuilds.clear()
            return out

    def refresh_some(self, keys: set[tuple[str, int]]) -> None:
        """Refresh the opened queues among ``keys`` only: after a put, the queues it wrote (every
        opened queue per put grew with the topics: 4,000 directory listings at 1,000 topics).

        A queue refreshed in full within ``FULL_LOOK_EVERY`` takes the store's own builder's
        appends as written (``written_tail``, ``ConsumeQueue.refresh_written``: one ``fstat`` and
        a look at the new entries instead of a directory listing and a ``stat`` per file); any
        case that shortcut does not take, and every queue past that age, is refreshed in full."""
        with self._lock:
            queues = self._queues
            now = time.monotonic()
            tail_of = self.written_tail
            refreshed = self._refreshed
            for key in keys:
                queue = queues.get(key)
                if queue is None:
                    continue
                if tail_of is not None and now - refreshed.get(key, -FULL_LOOK_EVERY) < FULL_LOOK_EVERY:
                    tail = tail_of(key)
                    if tail is not None and queue.refresh_written(*tail):
                        continue  # the time of the last full look stays: it bounds the shortcut
                self._refresh_one(key, queue, now)

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's queues (their directory is removed by the builder): no longer answered
        from the opened ones, nor counted. They are not closed here: a reader on another thread may
        hold one, and its maps stay valid over the removed files until the last reference goes."""
        with self._lock:
            dropped = [key for key in self._keys if key[0] == topic]
            if dropped:
                for key in dropped:
                    self._queues.pop(key, None)
                    self._refreshed.pop(key, None)
                self._keys = [key for key in self._keys if key[0] != topic]
                self._cursor = 0
                self._over_budget = self._short or len(self._keys) > REFRESH_BUDGET
            self._rebuilds = [q for q in self._rebuilds if q.topic != topic]
        self.counts.forget_dirs(topic)

    def close(self) -> None:
        with self._lock:
            for queue in self._queues.values():
                queue.close()
            self._queues.clear()
            self._keys.clear()
            self._refreshed.clear()
            self._over_budget = self._short = False


def _is_dir(path: Path) -> bool:
    """``path.is_dir()``, false also where the name cannot exist (ENAMETOOLONG from a request)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _safe_name(topic: str) -> bool:
    """A topic usable as one directory name (no path tricks from a request)."""
    return bool(topic) and topic not in (".", "..") and "/" not in topic and "\0" not in topic
