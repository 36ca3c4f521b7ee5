"""The compiled request path (issue 22): a read's VIEW and QUERY frames answered in one C call.

Per VIEW the Python path (``FrameDecoder``, ``Dispatcher``, ``QueryMessageProcessor``,
``encode_frame_parts``, the connection's loop) costs a few microseconds of interpreter work around
well under a microsecond of real work (find the record, copy it). On a slow core that glue is what
the throughput is made of, so for the common requests the whole of it is one compiled call per
received read (``server/remoting/_request_path_fast.c``): split the frames, read the JSON headers,
answer, and write every answer into one buffer that the connection hands to the transport as one
write. A VIEW's record is read in C from the CommitLog's maps. A QUERY_MESSAGE is run in C too
(``server/remoting/_query_loop.h``: ``MessageStore.query_message``'s rounds over the index walk and
the record reads, over the maps ``_query_snapshot`` gives once per batch); what the store would
report (damage, a file cut short) goes to ``QueryMessageProcessor.query_parts`` (``_answer_query``),
which runs the query the Python way, and a walk the inline budget or deadline stopped goes to the
pool with its resume point (``_handoff``). Each file's size is checked once per batch there (the
Python path checks once per query: both check before reading, neither can stop a cut after it).

The Python path stays the reference and the only path for anything else: the compiled call takes a
frame only when it is sure of it (the C file's header comment lists the shapes) and stops at the
first other one; the connection feeds the rest of the read to its ``FrameDecoder`` as before. The
answer headers are made by the Python encoder once (``_templates``), so the format is stated in one
place, and tests/server/remoting/test_request_path.py checks that a connection answers the same
bytes with and without this path. It is off when access control is on (every request must be
checked first, ``server.acl``), with ``RMQ_PURE_PYTHON=1``, when the extension is not built, and
for a code whose processor was replaced (``Dispatcher.register``).

What the Python path does besides answering is done here too: the store's served-bytes accounting
per batch (``MessageStore.served``, which may release pages; a query the callback runs counts its
own), the ``/metrics`` counts (per batch with ``RequestStats.observe_many``, each timed at the
batch's mean; a query the callback runs on its own), a query handed to the pool answered from a
task as ``Dispatcher`` answers it (``Dispatcher.finish``), and a processor failure answered as
``Dispatcher`` answers it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from protocol.accel import load
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.frame import encode_frame
from protocol.header_json import encode_json_header
from server.remoting.dispatch import Dispatcher
from server.remoting.processors.query_message import (
    QUERY_NOT_FOUND_REMARK,
    QueryMessageProcessor,
    query_request,
    response_fields,
    view_not_found_remark,
)
from server.remoting.reply import system_error
from server.request_stats import RequestStats
from store.index.service import ResumePoint
from store.message_store import QueryResume

_fast = load("server.remoting._request_path_fast")

#: True when the compiled request path is built and allowed.
COMPILED = _fast is not None

_VIEW = RequestCode.VIEW_MESSAGE_BY_ID
_QUERY = RequestCode.QUERY_MESSAGE
_SYSTEM_ERROR = ResponseCode.SYSTEM_ERROR
_SUCCESS = ResponseCode.SUCCESS
_QUERY_NOT_FOUND = ResponseCode.QUERY_NOT_FOUND

#: The numbers in an answer header (the C file's holes, same order) and the stand-in each is made
#: with in the templates: each occurs once in its header, and none inside another.
HOLES = {"opaque": 1234567891, "offset": 987654321987654321, "timestamp": 111122223333444455,
         "phyoffset": 555566667777888899}  # fmt: skip
_HOLE_IDS = {name: i for i, name in enumerate(HOLES)}

#: Starts an answer's coroutine as the connection starts a coroutine processor's (a task).
Start = Callable[[Coroutine[Any, Any, RemotingCommand | None]], None]


class ViewStore(Protocol):
    """What the path needs of the store: the CommitLog's read snapshot and the served accounting."""

    def view_snapshot(self) -> tuple[list[Any], list[int], list[int], Any, int]: ...

    def served(self, nbytes: int, records: int) -> None: ...


def template(header: bytes, holes: tuple[str, ...]) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
    """``header`` cut at the stand-ins of ``holes``: (text pieces, which number goes between them)."""
    found = []
    for name in holes:
        marker = b"%d" % HOLES[name]
        at = header.find(marker)
        if at < 0 or header.find(marker, at + 1) >= 0:
            raise AssertionError(f"template marker {marker!r} must occur once in {header!r}")
        found.append((at, len(marker), _HOLE_IDS[name]))
    found.sort()
    pieces, ids, pos = [], [], 0
    for at, size, hole in found:
        pieces.append(header[pos:at])
        ids.append(hole)
        pos = at + size
    pieces.append(header[pos:])
    return tuple(pieces), tuple(ids)


def _templates() -> tuple[tuple[tuple[bytes, ...], tuple[int, ...]], ...]:
    """The answers' JSON headers, made by the Python encoder from the commands the processors answer
    with (``QueryMessageProcessor.view_message_by_id`` and ``_answer``), as templates."""
    view = RemotingCommand(_VIEW, opaque=HOLES["opaque"])
    query = RemotingCommand(_QUERY, opaque=HOLES["opaque"])
    fields = response_fields(HOLES["timestamp"], HOLES["phyoffset"])
    return (
        template(encode_json_header(view.make_response(_SUCCESS)), ("opaque",)),
        template(
            encode_json_header(system_error(view, view_not_found_remark(HOLES["offset"]))),
            ("opaque", "offset"),
        ),
        template(
            encode_json_header(query.make_response(_SUCCESS, ext_fields=fields)),
            ("opaque", "timestamp", "phyoffset"),
        ),
        template(
            encode_json_header(
                query.make_response(_QUERY_NOT_FOUND, remark=QUERY_NOT_FOUND_REMARK, ext_fields=fields)
            ),
            ("opaque", "timestamp", "phyoffset"),
        ),
    )


if _fast is not None:
    _fast.bind(*_templates())


class RequestPath:
    """VIEW_MESSAGE_BY_ID (and, given its processor, QUERY_MESSAGE) answered by the compiled path,
    for one store and one dispatcher."""

    __slots__ = (
        "_compiled",
        "_dispatcher",
        "_max_size",
        "_query",
        "_query_arg",
        "_snapshot",
        "_start",
        "_stats",
        "_store",
        "codes",
    )

    def __init__(
        self,
        store: ViewStore,
        max_size: int,
        dispatcher: Dispatcher,
        query: QueryMessageProcessor | None = None,
    ) -> None:
        self._store = store
        #: The processor's ``view_message_copy`` limit (a bigger "record" is answered as none).
        self._max_size = max_size
        self._dispatcher = dispatcher
        self._query = query
        self._start: Start | None = None  # the connection's, during ``answer``
        self._stats: RequestStats | None = None
        #: The processor's parameters for the compiled query loop (None: every query is a Python call).
        self._compiled = query.compiled_parameters(store) if query is not None else None
        #: The store's query snapshot of the batch being answered (``_query_snapshot``), for hand-offs.
        self._snapshot: tuple[Any, ...] | None = None
        #: What ``answer_batch`` is given for QUERYs: None (left to the Python path), the callback
        #: alone, or (callback, hand-off, snapshot) for the compiled query loop.
        self._query_arg: Any = None
        if query is not None:
            compiled = self._compiled is not None
            self._query_arg = (
                (self._answer_query, self._handoff, self._query_snapshot) if compiled else self._answer_query
            )
        #: The request codes this path answers (``Dispatcher.register`` drops it when one is replaced).
        self.codes = frozenset((_VIEW, _QUERY) if query is not None else (_VIEW,))

    @staticmethod
    def usable(store: object) -> bool:
        """Whether the compiled path is built and ``store`` offers what it reads."""
        return _fast is not None and hasattr(store, "view_snapshot") and hasattr(store, "served")

    def answer(
        self,
        data: bytes | bytearray | memoryview,
        pos: int,
        max_frame_length: int,
        max_header_length: int,
        flush_bytes: int,
        stats: RequestStats | None,
        start: Start,
    ) -> tuple[bytes | None, int, int]:
        """(answers, where it stopped, how many): the frames of ``data[pos:]`` answered in order up to
        the first frame the compiled path is not sure of, an incomplete frame, or ``flush_bytes`` of
        answers. A query handed to the pool is answered later, from a task ``start`` starts."""
        maps, starts, lengths, shrunk, max_offset = self._store.view_snapshot()
        started = time.perf_counter() if stats is not None else 0.0
        self._start = start
        self._stats = stats
        try:
            (out, pos, views, found, found_bytes, queries, query_bytes, query_records, queries_found,
             queries_not_found) = _fast.answer_batch(  # type: ignore[union-attr]
                data, pos, maps, starts, lengths, max_offset, self._max_size, shrunk,
                max_frame_length, max_header_length, flush_bytes, self._query_arg,
            )  # fmt: skip
        finally:
            self._start = self._stats = self._snapshot = None
        if views or query_records:
            # view_message_copy's accounting: each answer counts its record and a page; a compiled
            # query counts as MessageStore.query_message counts (records, a page each, entries read).
            self._store.served(found_bytes + 4096 * views + query_bytes, views + query_records)
        compiled = queries_found + queries_not_found
        if stats is not None and (views or compiled):
            # Each timed at the batch's mean (the Python callback's queries included: an upper bound).
            each = (time.perf_counter() - started) / (views + compiled)
            if found:
                stats.observe_many(_VIEW, _SUCCESS, found, each)
            if views > found:
                stats.observe_many(_VIEW, _SYSTEM_ERROR, views - found, each)
            if queries_found:
                stats.observe_many(_QUERY, _SUCCESS, queries_found, each)
            if queries_not_found:
                stats.observe_many(_QUERY, _QUERY_NOT_FOUND, queries_not_found, each)
        return out, pos, views + queries

    def _query_snapshot(self) -> tuple[Any, ...] | None:
        """The compiled query loop's snapshot for this batch (asked at its first QUERY): the store's
        index maps and geometry and the processor's parameters (``_query_loop.h``'s ``QS_*`` order),
        or None to leave every query of the batch to the Python callback."""
        snapshot = self._store.query_snapshot()  # type: ignore[attr-defined]
        if snapshot is None or self._compiled is None:
            return None
        self._snapshot = snapshot
        _, maps, fds, headers, size, slots, index_num, batch_max = snapshot
        default_max_num, inline_budget, inline_ns, handoff = self._compiled
        return (maps, fds, headers, size, slots, index_num, batch_max, default_max_num, inline_budget,
                inline_ns, int(handoff))  # fmt: skip

    def _handoff(
        self, opaque: int, topic: str, key: str, max_num: int, begin: int, end: int, state: tuple[Any, ...]
    ) -> bytes | None:
        """A query the compiled loop's inline walk stopped, handed to the pool to continue from where
        it stopped (``QueryMessageProcessor.handoff``): the refusal's frame, or None (a task answers)."""
        round_, last_query_time, visited, timestamp, phyoffset, key_hash, capped, point = state
        resume = None
        if point is not None:
            files, maps, fds, headers = self._snapshot[:4]  # type: ignore[index]
            query = (key_hash, capped, begin, last_query_time)
            offsets = ResumePoint(files, maps, fds, headers, query, point)
            resume = QueryResume(round_, last_query_time, visited, timestamp, phyoffset, offsets)
        started = time.perf_counter()
        outcome = self._query.handoff(opaque, (topic, key, max_num, begin, end), resume)  # type: ignore[union-attr]
        answer = self._dispatcher.finish(query_request(opaque), outcome, started)
        if type(answer) is RemotingCommand:
            return encode_frame(answer)
        self._start(answer)  # type: ignore[misc, arg-type]
        return None

    def _answer_query(
        self, opaque: int, topic: str, key: str, max_num: int, begin: int, end: int, unique: bool
    ) -> tuple[int, int, list[memoryview]] | bytes | None:
        """One QUERY_MESSAGE for the C loop: its parts to encode, or a whole answer frame, or None
        when the answer will come from a task (the query went to the pool)."""
        stats = self._stats
        started = time.perf_counter() if stats is not None else 0.0
        try:
            outcome: Any = self._query.query_parts(opaque, topic, key, max_num, begin, end, unique)  # type: ignore[union-attr]
        except Exception as exc:  # as Dispatcher answers a processor's failure
            outcome = exc
        if type(outcome) is tuple:
            if stats is not None:
                # SUCCESS unless no record fits the frame (the C side caps them: cap_records).
                records = outcome[2]
                code = _SUCCESS if records and len(records[0]) <= self._max_size else _QUERY_NOT_FOUND
                stats.observe(_QUERY, code, time.perf_counter() - started)
            return outcome
        answer = self._dispatcher.finish(query_request(opaque), outcome, started)
        if type(answer) is RemotingCommand:
            return encode_frame(answer)
        self._start(answer)  # type: ignore[misc, arg-type]
        return None
