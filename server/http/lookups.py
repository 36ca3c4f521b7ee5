"""The API's questions, answered from the store through ``server.store_api``'s calls.

Every answer is bounded before it is computed: a count of messages (``limit``), of index entries a
key query may visit (the query pool's budget), of consume-queue entries a time-range page may walk
(``limit`` per page, then a cursor), of topics an id search tries. Records are decoded here into
JSON-ready dicts; a record that does not decode is the store's damage (``StoreDamaged``), which the
app answers 503, never a 500 with a traceback.

Time-range pages walk the topic's queues in queue-id order, each from the first entry stored at or
after ``begin`` (``offset_by_time``, the broker's SEARCH_OFFSET_BY_TIMESTAMP) to the first entry
stored after ``end``; the cursor ``<queue id>:<queue offset>`` says where the next page starts. So
a page costs at most ``limit`` records plus one per queue, whatever the topic's size, and pages
together return every message of the range exactly once (sorted by queue, then offset, not
interleaved by time: the merge would need every queue's head on every page).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ProtocolError
from protocol.message import MessageExt, decode_message
from protocol.message_id import decode_offset_msg_id
from server.broker.topic_validator import is_system_topic
from server.http.errors import bad_parameter, store_damaged
from server.http.trace import decode_trace_body
from server.store_api import ConsumeQueueStore, StoreError

#: Characters of a body shown inline in JSON; the whole body is the ``/body`` route's.
BODY_PREVIEW_BYTES = 4096

#: Messages a key query may return (the broker's ``maxNum`` is capped the same way by defaultQueryMaxNum).
MAX_KEY_RESULTS = 64

#: Topics an id search (unique key without a topic) may try; a store with more names a topic.
MAX_TOPICS_SEARCHED = 10_000

#: Consume-queue entries read per ``get_message`` call while walking a queue.
WALK_BATCH = 32

#: Largest record copied for a lookup by offset id: RocketMQ's own maxMessageSize ceiling (4 MiB)
#: plus room for the header; larger is not a record.
MAX_RECORD_BYTES = 4 * 1024 * 1024 + 64 * 1024

#: Binary searches over one queue's store times a histogram may make (one per queue and bucket edge):
#: the buckets shrink to fit a topic's queues within it, so a chart costs at most this many searches of
#: log2(queue length) entry reads each, whatever the topic's size.
MAX_HISTOGRAM_SEARCHES = 4096

#: Most buckets of a histogram, and the narrowest bucket (a minute).
MAX_BUCKETS = 240
MINUTE_MILLIS = 60_000

#: ``KeyQuery(topic, key, max_num, begin, end)``: the thread-safe index query, run off the loop.
KeyQuery = Callable[[str, str, int, int, int], Any]


class StoreDamaged(Exception):
    """A record or file that should be readable was not."""


def decode_record(buf: bytes | memoryview) -> MessageExt:
    """One raw CommitLog record; bodies decompressed when the codec is installed."""
    try:
        return decode_message(buf, 0, decompress=True)
    except ImportError:
        return decode_message(buf, 0, decompress=False)
    except (ProtocolError, StoreError, ValueError) as exc:
        # The codec may refuse a body (an lz4 record without lz4 installed says so by ValueError
        # in some versions): try once more without inflating, else the record is damaged.
        try:
            return decode_message(buf, 0, decompress=False)
        except (ProtocolError, StoreError, ValueError):
            raise store_damaged(f"a record does not decode: {exc}") from None


def message_json(msg: MessageExt, *, preview: int = BODY_PREVIEW_BYTES) -> dict[str, Any]:
    """The fields an operator reads, with the body as text (first ``preview`` bytes) and base64."""
    body = msg.body
    shown = body[:preview]
    return {
        "offsetMsgId": msg.offset_msg_id,
        "msgId": msg.msg_id,
        "uniqueKey": msg.unique_key,
        "topic": msg.topic,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "storeSize": msg.store_size,
        "tags": msg.tags,
        "keys": msg.keys,
        "flag": msg.flag,
        "sysFlag": msg.sys_flag,
        "bornTimestamp": msg.born_timestamp,
        "bornHost": f"{msg.born_host}:{msg.born_port}",
        "storeTimestamp": msg.store_timestamp,
        "storeHost": f"{msg.store_host}:{msg.store_port}",
        "reconsumeTimes": msg.reconsume_times,
        "preparedTransactionOffset": msg.prepared_transaction_offset,
        "transactionType": msg.transaction_type.name,
        "properties": dict(msg.properties),
        "bodyLength": len(body),
        "bodyCompressed": msg.is_compressed and msg.stored_body is None and not body,
        "bodyText": shown.decode("utf-8", errors="replace"),
        "bodyBase64": base64.b64encode(shown).decode("ascii"),
        "bodyTruncated": len(body) > preview,
    }


@dataclass(slots=True)
class Page:
    """One page of a listing: the records, and where the next page starts (None: no more)."""

    messages: list[MessageExt] = field(default_factory=list)
    next_cursor: str | None = None
    #: For key queries: the index walk stopped at its budget, so more may match.
    truncated: bool = False


def parse_cursor(cursor: str | None) -> tuple[int, int] | None:
    """``<queue id>:<queue offset>``, both non-negative; None for the first page."""
    if cursor is None or cursor == "":
        return None
    queue_text, sep, offset_text = cursor.partition(":")
    try:
        if not sep:
            raise ValueError
        queue_id, offset = int(queue_text), int(offset_text)
    except ValueError:
        raise bad_parameter("cursor", "expected <queue id>:<queue offset> from a previous page") from None
    if queue_id < 0 or offset < 0:
        raise bad_parameter("cursor", "queue id and offset must not be negative")
    return queue_id, offset


class Lookups:
    """The lookups over one store (read on the event loop; key queries through ``key_query``)."""

    def __init__(
        self, store: ConsumeQueueStore, key_query: KeyQuery | None = None, system_topics: Collection[str] = ()
    ) -> None:
        self.store = store
        #: The names the broker registers as system topics at start-up besides the fixed set (its
        #: cluster and broker names, the reply topic): marked ``system`` with the fixed ones.
        self.system_topics = system_topics
        self._key_query = key_query or self._inline_key_query
        self._topics_seen: object = None
        self._topics_sorted: list[str] = []

    def _inline_key_query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> Any:
        return self.store.query_message(topic, key, max_num, begin, end)

    # -- single records --------------------------------------------------------------------------

    def by_commitlog_offset(self, offset: int) -> MessageExt | None:
        raw = self.store.view_message_copy(offset, MAX_RECORD_BYTES)
        return None if raw is None else decode_record(raw)

    def by_offset_id(self, msg_id: str) -> MessageExt | None:
        """The record an offset id names, when the id is one (32 or 56 hex digits) and points at a
        record that is the one the id names (same store host, port and offset); else None."""
        if len(msg_id) not in (32, 56):
            return None
        try:
            decoded = decode_offset_msg_id(msg_id)
        except (ProtocolError, ValueError):
            return None
        if decoded.offset < 0:
            return None
        msg = self.by_commitlog_offset(decoded.offset)
        if msg is None or msg.commit_log_offset != decoded.offset:
            return None
        return msg

    def by_queue_offset(self, topic: str, queue_id: int, offset: int, count: int) -> list[MessageExt]:
        """Up to ``count`` messages of one queue from ``offset``."""
        return self._walk_queue(topic, queue_id, offset, count, None)[0]

    # -- key and id queries ------------------------------------------------------------------------

    async def by_key(
        self, topic: str, key: str, begin: int, end: int, limit: int, *, run: Callable[..., Any]
    ) -> Page:
        """Messages of ``topic`` with ``key`` among their keys or as their unique key."""
        result = await run(self._key_query, topic, key, limit, begin, end)
        messages = [decode_record(buf) for buf in result.buffers]
        matching = [m for m in messages if m.topic == topic and (key in m.keys or m.unique_key == key)]
        return Page(matching, None, bool(result.budget_exhausted))

    async def copies(
        self, unique_key: str, topics: Iterable[str], limit: int, *, run: Callable[..., Any]
    ) -> list[MessageExt]:
        """Every record with this unique key in any of ``topics`` (a retry or DLQ copy keeps the
        original's UNIQ_KEY), oldest first."""
        found: dict[int, MessageExt] = {}
        for topic in sorted(topics)[:MAX_TOPICS_SEARCHED]:
            result = await run(self._key_query, topic, unique_key, limit, 0, 2**63 - 1)
            for buf in result.buffers:
                msg = decode_record(buf)
                if msg.unique_key == unique_key:
                    found[msg.commit_log_offset] = msg
            if len(found) >= limit:
                break
        return [found[o] for o in sorted(found)][:limit]

    async def trace(
        self, msg_id: str, trace_topic: str, limit: int, *, run: Callable[..., Any]
    ) -> list[dict[str, Any]]:
        """The trace contexts of ``msg_id`` in ``trace_topic``, by time (SubAfter without a time last)."""
        if trace_topic not in self.store.topics():
            return []
        result = await run(self._key_query, trace_topic, msg_id, limit, 0, 2**63 - 1)
        events: list[dict[str, Any]] = []
        for buf in result.buffers:
            msg = decode_record(buf)
            for event in decode_trace_body(msg.body.decode("utf-8", errors="replace")):
                if event.get("msgId") == msg_id or event.get("offsetMsgId") == msg_id:
                    event["traceOffsetMsgId"] = msg.offset_msg_id
                    event["traceStoreTimestamp"] = msg.store_timestamp
                    events.append(event)
        events.sort(key=lambda e: (e.get("timestamp", e["traceStoreTimestamp"]), e["traceStoreTimestamp"]))
        return events

    # -- queue walks -------------------------------------------------------------------------------

    def _walk_queue(
        self, topic: str, queue_id: int, offset: int, count: int, end: int | None, begin: int = 0
    ) -> tuple[list[MessageExt], int | None]:
        """Up to ``count`` messages of one queue from ``offset`` (skipping any stored before ``begin``,
        stopping at the first stored after ``end``); and the offset to go on from, or None when the
        queue (or the range) is done. Skipped records do not count: a page is full only of matches."""
        store = self.store
        found: list[MessageExt] = []
        max_offset = store.max_offset(topic, queue_id)
        offset = max(offset, store.min_offset(topic, queue_id))
        while offset < max_offset and len(found) < count:
            result = store.get_message(topic, queue_id, offset, min(WALK_BATCH, count - len(found)))
            if not result.buffers:
                if result.next_begin_offset <= offset:
                    return found, None
                offset = result.next_begin_offset
                continue
            for buf in result.buffers:
                msg = decode_record(buf)
                if end is not None and msg.store_timestamp > end:
                    return found, None
                offset = msg.queue_offset + 1
                if msg.store_timestamp < begin:
                    continue
                found.append(msg)
                if len(found) >= count:
                    break
            if result.next_begin_offset > offset and len(found) < count:
                offset = result.next_begin_offset
        return found, (offset if offset < max_offset else None)

    def queue_ids(self, topic: str) -> list[int]:
        return list(range(self.store.queue_nums().get(topic, 0)))

    def by_time(self, topic: str, begin: int, end: int, limit: int, cursor: tuple[int, int] | None) -> Page:
        """One page of ``topic``'s messages stored in [begin, end] (see the module's docstring)."""
        queues = self.queue_ids(topic)
        page = Page()
        start_queue, start_offset = cursor if cursor is not None else (0, -1)
        for queue_id in queues:
            if queue_id < start_queue:
                continue
            first = self.store.offset_by_time(topic, queue_id, begin)
            # A cursor is the caller's text: one far before the range (``0:0``) would have the walk
            # skip every entry stored before ``begin``, the whole queue. The walk starts no earlier
            # than the range does, so a page costs ``limit`` records whatever the cursor says.
            offset = max(start_offset, first) if queue_id == start_queue and start_offset >= 0 else first
            found, resume = self._walk_queue(topic, queue_id, offset, limit - len(page.messages), end, begin)
            page.messages.extend(found)
            if len(page.messages) >= limit:
                if resume is not None:
                    page.next_cursor = f"{queue_id}:{resume}"
                else:
                    following = [q for q in queues if q > queue_id]
                    if following:
                        first = self.store.offset_by_time(topic, following[0], begin)
                        page.next_cursor = f"{following[0]}:{first}"
                break
        return page

    def by_queue_cursor(self, topic: str, limit: int, cursor: tuple[int, int] | None) -> Page:
        """One page of every message of ``topic`` in queue order (a DLQ's listing)."""
        queues = self.queue_ids(topic)
        page = Page()
        start_queue, start_offset = cursor if cursor is not None else (0, 0)
        for queue_id in queues:
            if queue_id < start_queue:
                continue
            offset = start_offset if queue_id == start_queue else 0
            found, resume = self._walk_queue(topic, queue_id, offset, limit - len(page.messages), None)
            page.messages.extend(found)
            if len(page.messages) >= limit:
                following = [q for q in queues if q > queue_id]
                if resume is not None:
                    page.next_cursor = f"{queue_id}:{resume}"
                elif following:
                    page.next_cursor = f"{following[0]}:0"
                break
        return page

    # -- histograms -------------------------------------------------------------------------------

    def first_stored_at_or_after(self, topic: str, queue_id: int, timestamp: int, low: int, high: int) -> int:
        """The first queue offset in [low, high) stored at or after ``timestamp`` (``high``: none).

        A binary search over the entries' store times (one consume-queue entry and one CommitLog field
        read per step). It assumes store times ascend along a queue, as appends do; the broker stamps
        a record just before taking the append lock, so two writers may swap neighbours by a
        millisecond, which can move a message into the next bucket at an edge, never lose it. An
        entry whose record is gone (-1: below the CommitLog's first file) counts as earlier than any
        time, as it is: such entries are only at a queue's start.
        """
        store = self.store
        while low < high:
            mid = (low + high) // 2
            if store.message_store_timestamp(topic, queue_id, mid) < timestamp:
                low = mid + 1
            else:
                high = mid
        return low

    def histogram(self, topic: str, begin: int | None, end: int | None, buckets: int) -> dict[str, Any]:
        """Messages of ``topic`` per bucket of whole minutes over [begin, end] (default: the topic's
        first to last store time), counted exactly from queue offsets: a bucket's count is the
        difference of the offsets its edges fall at, per queue. Reading no message bodies, a chart of
        a topic of millions of messages costs a few thousand entry reads
        (``MAX_HISTOGRAM_SEARCHES``). The range is widened to whole buckets, aligned on a minute."""
        stats = [(q, lo, hi, last) for q, lo, hi, last in self.store.topic_stats(topic) if hi > lo]
        if begin is None:
            firsts = [self.store.earliest_message_time(topic, q) for q, _, _, _ in stats]
            begin = min((t for t in firsts if t >= 0), default=0)
        if end is None:
            end = max((last for _, _, _, last in stats), default=0)
        start = begin // MINUTE_MILLIS * MINUTE_MILLIS
        if not stats or end < begin:
            return {"topic": topic, "begin": start, "end": start, "bucketMillis": MINUTE_MILLIS,
                    "counts": [], "total": 0}  # fmt: skip
        buckets = max(1, min(buckets, MAX_HISTOGRAM_SEARCHES // len(stats) - 1))
        span = end + 1 - start
        width = max(1, -(-span // (buckets * MINUTE_MILLIS))) * MINUTE_MILLIS
        count = -(-span // width)
        edges = [start + i * width for i in range(count + 1)]
        counts = [0] * count
        for queue_id, low, high, last in stats:
            if last < start:
                continue  # the whole queue is older than the range: nothing to count
            at = [self.first_stored_at_or_after(topic, queue_id, edges[0], low, high)]
            for edge in edges[1:]:
                at.append(self.first_stored_at_or_after(topic, queue_id, edge, at[-1], high))
            for i in range(count):
                counts[i] += at[i + 1] - at[i]
        return {
            "topic": topic,
            "begin": start,
            "end": edges[-1] - 1,
            "bucketMillis": width,
            "counts": counts,
            "total": sum(counts),
        }

    # -- topics ------------------------------------------------------------------------------------

    def topic_json(self, topic: str) -> dict[str, Any]:
        """Per queue: min and max offsets and the store time of its last message (GET_TOPIC_STATS_INFO)."""
        queues = [
            {"queueId": q, "minOffset": lo, "maxOffset": hi, "lastStoreTimestamp": last}
            for q, lo, hi, last in self.store.topic_stats(topic)
        ]
        return {
            "topic": topic,
            # a topic the broker keeps for itself (TBW102, BenchmarkTest's 1024 queues, the cluster's
            # name, rmq_sys_*...): the page hides them unless asked, they crowd out the user's topics
            "system": is_system_topic(topic, self.system_topics),
            "queues": queues,
            "messages": sum(q["maxOffset"] - q["minOffset"] for q in queues),
            "lastStoreTimestamp": max((q["lastStoreTimestamp"] for q in queues), default=0),
        }

    def topic_names(self) -> Sequence[str]:
        """The store's topics, sorted; kept while the store's set is the same object (the store
        makes a new one only when a topic came or went)."""
        topics = self.store.topics()
        if topics is not self._topics_seen:
            self._topics_sorted = sorted(topics | set(self.store.queue_nums()))
            self._topics_seen = topics
        return self._topics_sorted
