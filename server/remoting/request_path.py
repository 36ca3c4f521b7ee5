"""The compiled request path (issue 22): a read's VIEW, QUERY, offset and PULL frames in one C call.

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

The offset family (GET_MAX/MIN_OFFSET, GET_EARLIEST_MSG_STORETIME, SEARCH_OFFSET_BY_TIMESTAMP) is
read in C from the store's opened consume queues (``_request_path_offsets.h``), and under ``serve
--writable`` (``answer_pulls``) the pulls that find messages for a known group are answered in C
with one call of ``PullMessageProcessor.plain_pull`` for the checks and, with the commit-offset
flag, one of its ``commit_offset`` (``_request_path_pull.h`` lists what is left to the Python path).
There too (``answer_sends``), a SEND's (V2, a batch, SEND_MESSAGE) frame is split, its header
read and its SUCCESS answer written in C, around one call of ``SendMessageProcessor.store_send``,
where the broker's checks and the append stay (``_request_path_send.h``). The SENDs of one C call
are settled together when it returns (one reput for all; ``send_group.py``), before any of their
answers leaves; after SENDs, a request that reads the store is answered from a fresh snapshot
(``answer`` calls the C side again).

What the Python path does besides answering is done here too: the store's served-bytes accounting
per batch (``MessageStore.served``, which may release pages; a query the callback runs counts its
own), the ``/metrics`` counts (VIEWs, compiled queries, offset requests and pulls per batch with
``RequestStats.observe_many``, each timed at the batch's mean; a query the callback runs, and a
SEND, on its own), a pull's ``PullStats`` and served bytes per batch, a query handed to the pool
answered from a task as ``Dispatcher`` answers it (``Dispatcher.finish``), and a processor failure
answered as ``Dispatcher`` answers it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple, Protocol

from protocol.accel import load
from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.custom_headers import PULL_COMMIT_OFFSET_FLAG, offset_response_fields, timestamp_response_fields
from protocol.frame import encode_frame
from protocol.header_json import encode_json_header
from protocol.send_message import SendMessageRequestHeader
from server.remoting.dispatch import Dispatcher
from server.remoting.processors.pull_message import PullMessageProcessor
from server.remoting.processors.pull_message import response_fields as pull_fields
from server.remoting.processors.query_message import (
    QUERY_NOT_FOUND_REMARK,
    QueryMessageProcessor,
    query_request,
    response_fields,
    view_not_found_remark,
)
from server.remoting.processors.send_message import SendMessageProcessor
from server.remoting.processors.woken_pull import WokenPull
from server.remoting.reply import compiled_request, system_error
from server.remoting.send_group import SendGroup
from server.request_stats import RequestStats
from server.store_api import RSS_CHECK_EVERY_RECORDS, QueryResume, ResumePoint, total_physical_memory

_fast = load("server.remoting._request_path_fast")

#: True when the compiled request path is built and allowed.
COMPILED = _fast is not None

_VIEW = RequestCode.VIEW_MESSAGE_BY_ID
_QUERY = RequestCode.QUERY_MESSAGE
_SYSTEM_ERROR = ResponseCode.SYSTEM_ERROR
_SUCCESS = ResponseCode.SUCCESS
_QUERY_NOT_FOUND = ResponseCode.QUERY_NOT_FOUND
_PULL = RequestCode.PULL_MESSAGE
_SEND = RequestCode.SEND_MESSAGE_V2
#: The remark of a pull that found messages (``GetMessageStatus.FOUND``'s name).
FOUND = "FOUND"
#: The offset family, in the order of the C side's counts (request codes 29..32).
OFFSET_CODES = (
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
    RequestCode.GET_MAX_OFFSET,
    RequestCode.GET_MIN_OFFSET,
    RequestCode.GET_EARLIEST_MSG_STORETIME,
)

#: Where the C side counts what the offset family and the pulls answered in a batch: per code of
#: ``OFFSET_CODES``, the total (pulls included), then the pulls' found, records, bytes, slowest scan
#: (ms) and SUCCESS answers.
_TOTAL = 4
_MAX_MS = _TOTAL + 4
_N_COUNTS = _TOTAL + 6

#: The numbers in an answer header (the C file's holes, same order) and the stand-in each is made
#: with in the templates: each occurs once in its header, and none inside another.
HOLES = {"opaque": 1234567891, "offset": 987654321987654321, "timestamp": 111122223333444455,
         "phyoffset": 555566667777888899, "queueid": 246813579, "msgid": 135792468013579246}  # fmt: skip
_HOLE_IDS = {name: i for i, name in enumerate(HOLES)}

#: How many bytes of answers a woken pull's call may make (one answer: never reached).
FLUSH_WOKEN = 1 << 62

#: Starts an answer's coroutine as the connection starts a coroutine processor's (a task).
Start = Callable[[Coroutine[Any, Any, RemotingCommand | None]], None]


class _StoredStandIn(NamedTuple):
    """What the SEND answer's template is made from: an ``AppendResult``'s two fields it shows."""

    offset_msg_id: str
    queue_offset: int


class ViewStore(Protocol):
    """What the path needs of the store: the CommitLog's read snapshot and the served accounting."""

    def view_snapshot(self) -> tuple[list[Any], list[int], list[int], Any, int]: ...

    def served(self, nbytes: int, records: int) -> None: ...


class QueueStore(ViewStore, Protocol):
    """What the offset family needs besides: the opened consume queues and their CommitLog."""

    commitlog: Any

    def opened_queues(self) -> dict[tuple[str, int], Any]: ...


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


def _offset_templates() -> tuple[tuple[tuple[bytes, ...], tuple[int, ...]], ...]:
    """The offset family's answers (``QueueOffsetProcessor``: SUCCESS with ``offset``, or with
    ``timestamp`` for GET_EARLIEST_MSG_STORETIME), as templates; the request code does not show in
    an answer, so one request stands for the four. Then a pull's FOUND answer
    (``PullMessageProcessor._read``, JSON), whose nextBeginOffset, minOffset and maxOffset take the
    holes named offset, timestamp and phyoffset."""
    request = RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=HOLES["opaque"])
    offset = request.make_response(_SUCCESS, ext_fields=offset_response_fields(HOLES["offset"]))
    timestamp = request.make_response(_SUCCESS, ext_fields=timestamp_response_fields(HOLES["timestamp"]))
    pull = RemotingCommand(RequestCode.PULL_MESSAGE, opaque=HOLES["opaque"]).make_response(
        _SUCCESS,
        remark=FOUND,
        ext_fields=pull_fields(HOLES["offset"], HOLES["timestamp"], HOLES["phyoffset"], SerializeType.JSON),
    )
    return (
        template(encode_json_header(offset), ("opaque", "offset")),
        template(encode_json_header(timestamp), ("opaque", "timestamp")),
        template(encode_json_header(pull), ("opaque", "offset", "timestamp", "phyoffset")),
    )


if _fast is not None:
    _fast.bind(*_templates())
    _fast.bind_offsets(*_offset_templates())


def _add_counts(total: list[int] | None, counts: list[int]) -> list[int]:
    """Two calls' offset and pull counts (``_N_COUNTS``) as one batch's: sums, the slowest scan's max."""
    if total is None:
        return list(counts)
    added = [a + b for a, b in zip(total, counts, strict=True)]
    added[_MAX_MS] = max(total[_MAX_MS], counts[_MAX_MS])
    return added


class RequestPath:
    """VIEW_MESSAGE_BY_ID (and, given its processor, QUERY_MESSAGE) answered by the compiled path,
    for one store and one dispatcher."""

    __slots__ = (
        "_compiled",
        "_counts",
        "_dispatcher",
        "_max_size",
        "_offsets",
        "_offsets_arg",
        "_pull_context",
        "_pulls",
        "_query",
        "_query_arg",
        "_send_context",
        "_sends",
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
        *,
        offsets: bool = False,
    ) -> None:
        self._store = store
        #: Whether the offset family is answered here (``QueueOffsetProcessor``'s four codes over
        #: ``store``, which must then offer ``QueueStore``'s calls).
        self._offsets = offsets
        #: Where the C side counts the offset family per batch: per code (``OFFSET_CODES``), total.
        self._counts = [0] * _N_COUNTS
        #: The pull processor whose plain pulls are answered here (``answer_pulls``), or None.
        self._pulls: PullMessageProcessor | None = None
        self._pull_context: tuple[Any, ...] | None = None
        #: The offsets context handed to the C side (``_answer_once``), made at the first call.
        self._offsets_arg: tuple[Any, ...] | None = None
        #: The plain SENDs answered here (``answer_sends``), held and settled per C call.
        self._sends: SendGroup | None = None
        self._send_context: tuple[Any, ...] | None = None
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
        codes = (_VIEW, _QUERY) if query is not None else (_VIEW,)
        self.codes = frozenset(codes + OFFSET_CODES if offsets else codes)

    @staticmethod
    def usable(store: object) -> bool:
        """Whether the compiled path is built and ``store`` offers what it reads."""
        return _fast is not None and hasattr(store, "view_snapshot") and hasattr(store, "served")

    @staticmethod
    def answers_offsets(store: object) -> bool:
        """Whether ``store`` offers what the offset family reads (``QueueStore``)."""
        return hasattr(store, "opened_queues") and hasattr(store, "commitlog")

    def answer(
        self,
        data: bytes | bytearray | memoryview,
        pos: int,
        max_frame_length: int,
        max_header_length: int,
        flush_bytes: int,
        stats: RequestStats | None,
        start: Start,
        peer: tuple[str, int] | None = None,
    ) -> tuple[bytes | None, int, int]:
        """(answers, where it stopped, how many): the frames of ``data[pos:]`` answered in order up to
        the first frame the compiled path is not sure of, an incomplete frame, or ``flush_bytes`` of
        answers. A query handed to the pool is answered later, from a task ``start`` starts. ``peer``:
        the sender, a SEND's born host (handed to the SENDs' group, which alone reads it)."""
        started = time.perf_counter() if stats is not None else 0.0
        self._start = start
        self._stats = stats
        if self._sends is not None:
            self._sends.peer = peer
        counts = self._counts
        try:
            # _answer_once's call written out here: the first call of a read is its only one but
            # after SENDs, and a read of one VIEW is a few microseconds (each Python call a visible share).
            maps, starts, lengths, shrunk, max_offset = self._store.view_snapshot()
            offsets = self._offsets_arg
            if offsets is None and self._offsets:
                offsets = self._offsets_context()
            result = _fast.answer_batch(  # type: ignore[union-attr]
                data, pos, maps, starts, lengths, max_offset, self._max_size, shrunk, max_frame_length,
                max_header_length, flush_bytes, self._query_arg, offsets, self._send_context,
            )  # fmt: skip
            if result[10]:  # SENDs answered: settle them before their answers or the next call
                result = (self._sends.finish(result[0], stats), *result[1:])  # type: ignore[union-attr]
            if result[11]:
                result = self._answer_again(result, data, max_frame_length, max_header_length, flush_bytes)
        except BaseException:
            if self._sends is not None:
                self._sends.abandon()
            raise
        finally:
            self._start = self._stats = self._snapshot = None
        (out, pos, views, found, found_bytes, queries, query_bytes, query_records, queries_found,
         queries_not_found, sends, _) = result  # fmt: skip
        compiled = queries_found + queries_not_found
        if views or query_records or compiled:
            # view_message_copy's accounting: each answer counts its record and a page; a compiled
            # query counts as MessageStore.query_message counts (records, a page each, entries read,
            # and RSS_CHECK_EVERY_RECORDS: every key query is due a look at resident memory; one
            # handed to the pool is counted by ``_handoff``).
            looks = RSS_CHECK_EVERY_RECORDS * compiled
            self._store.served(found_bytes + 4096 * views + query_bytes, views + query_records + looks)
        family = counts[_TOTAL]
        each = 0.0
        if stats is not None and (views or compiled or family):
            # Each timed at the batch's mean (the Python callback's queries included: an upper bound).
            each = (time.perf_counter() - started) / (views + compiled + family)
            if found:
                stats.observe_many(_VIEW, _SUCCESS, found, each)
            if views > found:
                stats.observe_many(_VIEW, _SYSTEM_ERROR, views - found, each)
            if queries_found:
                stats.observe_many(_QUERY, _SUCCESS, queries_found, each)
            if queries_not_found:
                stats.observe_many(_QUERY, _QUERY_NOT_FOUND, queries_not_found, each)
        answered = views + queries + sends
        if family:
            answered += self._count_family(counts, stats, each)
        return out, pos, answered

    def _offsets_context(self) -> tuple[Any, ...] | None:
        """The offsets context handed to the C side (None: the offset family and pulls are left to
        the Python path), made at the first call: the store's opened-queue table and CommitLog are the same
        objects for its life, the counts list is reset in place; ``answer_pulls`` drops it (a new
        pull context). Building it per call was ~10% of a read that holds one VIEW."""
        offsets = self._offsets_arg
        if offsets is None and self._offsets:
            store = self._store
            commitlog = store.commitlog  # type: ignore[attr-defined]
            offsets = self._offsets_arg = (
                store.opened_queues(),  # type: ignore[attr-defined]
                commitlog,
                commitlog.mapped_file_size,
                self._counts,
                self._pull_context,
            )
        return offsets

    def _answer_once(
        self,
        data: bytes | bytearray | memoryview,
        pos: int,
        max_frame_length: int,
        max_header_length: int,
        flush_bytes: int,
    ) -> tuple[Any, ...]:
        """One ``answer_batch`` call over a fresh snapshot of the store (``answer`` makes the first
        of a read itself, the same way)."""
        maps, starts, lengths, shrunk, max_offset = self._store.view_snapshot()
        result = _fast.answer_batch(  # type: ignore[union-attr]
            data, pos, maps, starts, lengths, max_offset, self._max_size, shrunk, max_frame_length,
            max_header_length, flush_bytes, self._query_arg, self._offsets_context(), self._send_context,
        )  # fmt: skip
        if result[10]:  # SENDs answered: settle them before their answers or the next call
            result = (self._sends.finish(result[0], self._stats), *result[1:])  # type: ignore[union-attr]
        return result  # type: ignore[no-any-return]

    def _answer_again(
        self,
        first: tuple[Any, ...],
        data: bytes | bytearray | memoryview,
        max_frame_length: int,
        max_header_length: int,
        flush_bytes: int,
    ) -> tuple[Any, ...]:
        """After SENDs the C side stopped at a frame that must read what they stored (``again``):
        call it again from there with a fresh snapshot, as often as that happens in the read, and
        add the calls' results up (the answers joined; the offset and pull counts each call wrote
        summed, the slowest scan's max)."""
        counts = self._counts
        totals = list(first)
        parts = [first[0]] if first[0] is not None else []
        flush_bytes -= len(first[0] or b"")
        family: list[int] | None = None
        result = first
        while result[11] and flush_bytes > 0:
            if counts[_TOTAL]:
                family = _add_counts(family, counts)
                counts[:] = [0] * _N_COUNTS
            result = self._answer_once(data, result[1], max_frame_length, max_header_length, flush_bytes)
            if result[0] is not None:
                parts.append(result[0])
                flush_bytes -= len(result[0])
            totals[1] = result[1]
            for k in range(2, 11):
                totals[k] += result[k]
        if family is not None:
            counts[:] = _add_counts(family, counts)
        totals[0] = b"".join(parts) if parts else None
        return tuple(totals)

    def _count_family(self, counts: list[int], stats: RequestStats | None, each: float) -> int:
        """The offset family's and the pulls' answers of the batch: counted for ``/metrics`` (each
        timed at the batch's mean ``each``, as VIEWs are; all SUCCESS, but a pull whose commit
        failed, which ``Dispatcher.finish`` counted), the pulls' records in ``PullStats`` and in the
        store's served-bytes accounting (``get_message``'s); how many; ``counts`` is reset."""
        total = counts[_TOTAL]
        found, records, nbytes, max_ms, success = counts[_TOTAL + 1 :]
        if stats is not None:
            for code, n in zip(OFFSET_CODES, counts, strict=False):
                if n:
                    stats.observe_many(code, _SUCCESS, n, each)
            if success:
                stats.observe_many(_PULL, _SUCCESS, success, each)
        if found:
            self._pulls.stats.record_many(found, records, max_ms)  # type: ignore[union-attr]
            self._store.served(nbytes + 4096 * records, records)
        counts[:] = [0] * _N_COUNTS
        return total

    def answer_pulls(self, pulls: PullMessageProcessor, store: object, config: Any) -> None:
        """Answer the plain pulls ``pulls`` would answer (a registered server's: ``serve
        --writable``; see ``_request_path_pull.h``) with ``config``'s transfer limits; ``store`` is
        what ``pulls`` reads, which must be what this path reads (else nothing changes)."""
        if store is not self._store or not self._offsets:
            return
        memory = int(total_physical_memory() * (config.access_message_in_memory_max_ratio / 100.0))
        limits = (
            config.max_transfer_bytes_on_message_in_memory,
            config.max_transfer_count_on_message_in_memory,
            config.max_transfer_bytes_on_message_in_disk,
            config.max_transfer_count_on_message_in_disk,
            memory,
        )
        self._pulls = pulls
        self._pull_context = (pulls.plain_pull, self._commit, limits)
        self._offsets_arg = None
        self.codes = self.codes | {_PULL}
        pulls.compiled_woken = self.answer_woken

    def answer_woken(self, waiting: WokenPull) -> bytes | None:
        """A held pull's pass when a SEND woke it (``PullMessageProcessor.answer_woken``), on this
        path as the pull would be answered if it came now: its answer frame when it finds messages,
        else None (nothing done: the Python pass answers). The request goes in as the JSON frame a
        Java client sends, its commit-offset flag cleared (only a pull's first pass commits), made
        once per hold; its answer is JSON whatever the request's serialization, as ``woken_answer``
        makes it. Counted as the batch's pulls are (``PullStats``, served bytes), but for the
        request counts: the held request's coroutine counts its answer when it ends."""
        frame = waiting.frame
        if frame is None:
            request = waiting.request
            fields = dict(request.ext_fields or {})
            fields["sysFlag"] = str(waiting.header.sys_flag & ~PULL_COMMIT_OFFSET_FLAG)
            command = RemotingCommand(
                _PULL,
                request.language,
                request.version,
                request.opaque,
                0,
                None,
                fields,
                None,
                SerializeType.JSON,
            )
            frame = waiting.frame = encode_frame(command)
        maps, starts, lengths, shrunk, max_offset = self._store.view_snapshot()
        result = _fast.answer_batch(  # type: ignore[union-attr]
            frame, 0, maps, starts, lengths, max_offset, self._max_size, shrunk, len(frame), len(frame),
            FLUSH_WOKEN, None, self._offsets_context(), None,
        )  # fmt: skip
        counts = self._counts
        if result[1] != len(frame):
            counts[:] = [0] * _N_COUNTS  # left (nothing was answered, nothing counted)
            return None
        self._count_family(counts, None, 0.0)
        return result[0]  # type: ignore[no-any-return]

    def answer_sends(self, sends: SendMessageProcessor) -> None:
        """Answer the plain SENDs (V2, batches, SEND_MESSAGE) ``sends`` would answer (``serve
        --writable``; see ``_request_path_send.h``): the frame and the answer here, the checks and
        the append in ``SendMessageProcessor.store_send``, but for the plain SENDs, stored by the C
        side itself and written once per call (``_request_path_plain.h``, ``SendGroup.flush_plain``).
        Its SUCCESS header is made here by the processor's own encoder, with its region and trace flag."""
        if not self._offsets:
            return  # the sends context goes to the C side with the offsets context
        request = RemotingCommand(_SEND, opaque=HOLES["opaque"])
        stored = [_StoredStandIn(str(HOLES["msgid"]), HOLES["offset"])]
        success = encode_json_header(sends.answer_outcome(request, (stored, HOLES["queueid"])))  # type: ignore[arg-type]
        group = self._sends = SendGroup(sends, self._dispatcher)
        self._send_context = (
            self._answer_send,
            SendMessageRequestHeader,
            template(success, ("opaque", "queueid", "offset", "msgid")),
            group.plain_begin,
            group.flush_plain,
        )
        self.codes = self.codes | {_SEND, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_MESSAGE}

    def _answer_send(
        self, opaque: int, code: int, header: SendMessageRequestHeader, body: bytes, at: int
    ) -> Any:
        """One SEND for the C loop (``SendGroup.answer``); ``at``: the length of its output so far."""
        return self._sends.answer(opaque, code, header, body, at, self._stats, self._start)  # type: ignore[union-attr]

    def _commit(self, group: str, topic: str, queue_id: int, offset: int, opaque: int) -> bytes | None:
        """A plain pull's commit-offset flag, for the C loop: None, or the answer frame the Python
        path gives when the commit fails (``Dispatcher`` answering the processor's failure)."""
        started = time.perf_counter()
        try:
            self._pulls.commit_offset(group, topic, queue_id, offset)  # type: ignore[union-attr]
        except Exception as exc:
            answer = self._dispatcher.finish(compiled_request(_PULL, opaque), exc, started)
            return encode_frame(answer)  # type: ignore[arg-type]
        return None

    def _query_snapshot(self) -> tuple[Any, ...] | None:
        """The compiled query loop's snapshot for this batch (asked at its first QUERY): the store's
        index maps and geometry and the processor's parameters (``_query_loop.h``'s ``QS_*`` order),
        or None to leave every query of the batch to the Python callback."""
        snapshot = self._store.query_snapshot()  # type: ignore[attr-defined]
        if snapshot is None or self._compiled is None:
            return None
        self._snapshot = snapshot
        _, maps, fds, headers, size, slots, index_num, batch_max, caches = snapshot
        default_max_num, inline_budget, inline_ns, handoff = self._compiled
        return (maps, fds, headers, size, slots, index_num, batch_max, default_max_num, inline_budget,
                inline_ns, int(handoff), caches)  # fmt: skip

    def _handoff(
        self, opaque: int, topic: str, key: str, max_num: int, begin: int, end: int, state: tuple[Any, ...]
    ) -> bytes | None:
        """A query the compiled loop's inline walk stopped, handed to the pool to continue from where
        it stopped (``QueryMessageProcessor.handoff``): the refusal's frame, or None (a task answers)."""
        # The inline query_message the Python path runs first counts its look at resident memory
        # (its records and entries are in the batch's counts).
        self._store.served(0, RSS_CHECK_EVERY_RECORDS)
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
