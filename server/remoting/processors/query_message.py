"""QueryMessageProcessor: QUERY_MESSAGE (by key and by unique key) and VIEW_MESSAGE_BY_ID.

Answers exactly as the 4.9.x broker: a unique-key query (``_UNIQUE_KEY_QUERY == "true"``) uses the
store's ``defaultQueryMaxNum`` instead of the client's maxNum; both ``indexLastUpdate*`` response
fields are always present (the Java client silently drops a broker's results without them); no
record means QUERY_NOT_FOUND with the broker's remark. The body is whole raw CommitLog records in
ascending offset order, trimmed to whole records below the frame limit (a client closes the
connection on a frame over 16 MiB, and ``MessageDecoder.decodes`` stops at a partial record anyway).
A VIEW_MESSAGE_BY_ID "record" too large for a frame can only be a garbage size word read inside a
record: it is answered as no message. Under ``--acl`` the account must hold SUB (or GET) on the
record's topic (and its ``REAL_TOPIC``), checked once the record is read (``server.acl.record_access``,
tighter than 4.9.7); bytes that are no whole record cannot be checked and are refused.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable

from protocol.codes import RPC_TYPE_RESPONSE, LanguageCode, RequestCode, ResponseCode
from protocol.command import BROKER_VERSION, RemotingCommand
from protocol.custom_headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
    is_unique_key_query,
    java_string,
)
from protocol.errors import ProtocolError
from protocol.frame import DEFAULT_MAX_FRAME_LENGTH
from server.acl.record_access import RECORD_ACCESS, record_topics
from server.acl.validator import LOOKUP
from server.query_pool import DEFAULT_QUERY_BUDGET, INLINE_BUDGET, INLINE_SECONDS, OVERLOAD_REMARK, QueryPool
from server.remoting.reply import compiled_request, system_error
from server.store_api import QueryArgumentError, QueryResult, QueryStore

#: ``MessageStoreConfig.defaultQueryMaxNum``: maxNum of every unique-key query.
DEFAULT_QUERY_MAX_NUM = 32

#: The Java exception the store's argument errors are reported as (``exceptionSimpleDesc``).
ILLEGAL_ARGUMENT = "java.lang.IllegalArgumentException"

QUERY_NOT_FOUND_REMARK = "can not find message, maybe time range not correct"

_SUCCESS = ResponseCode.SUCCESS
_JAVA = LanguageCode.JAVA

#: Room kept in a frame for the length words and the response header (a few hundred bytes in practice).
HEADER_ALLOWANCE = 4096


def _response_field_order() -> tuple[str, str]:
    """The two response header keys in the order Java's HashMap emits them (it depends on keys only)."""
    keys = tuple(
        QueryMessageResponseHeader(
            index_last_update_timestamp=0, index_last_update_phyoffset=0
        ).to_ext_fields()
    )
    assert sorted(keys) == ["indexLastUpdatePhyoffset", "indexLastUpdateTimestamp"]
    return keys  # type: ignore[return-value]


#: Computed once: building the header through the dataclass on every query cost ~10 us.
_FIRST_FIELD, _SECOND_FIELD = _response_field_order()
_TIMESTAMP_FIRST = _FIRST_FIELD == "indexLastUpdateTimestamp"


def response_fields(timestamp: int, phyoffset: int) -> dict[str, str]:
    """``QueryMessageResponseHeader`` as extFields, in the broker's order."""
    if _TIMESTAMP_FIRST:
        return {"indexLastUpdateTimestamp": str(timestamp), "indexLastUpdatePhyoffset": str(phyoffset)}
    return {"indexLastUpdatePhyoffset": str(phyoffset), "indexLastUpdateTimestamp": str(timestamp)}


def view_not_found_remark(offset: int) -> str:
    """The broker's remark for an offset with no message."""
    return f"can not find message by the offset, {offset}"


def query_request(request: RemotingCommand | int) -> RemotingCommand:
    """``request``, or for an opaque a QUERY_MESSAGE request with that opaque, JSON: all an answer
    takes from its request (``make_response``) and all a failure's answer names (the code)."""
    if isinstance(request, RemotingCommand):
        return request
    return compiled_request(RequestCode.QUERY_MESSAGE, request)


def cap_records(buffers: list[memoryview], limit: int) -> list[memoryview]:
    """The longest prefix of ``buffers`` whose total size stays within ``limit`` bytes."""
    total = 0
    for index, buf in enumerate(buffers):
        total += buf.nbytes
        if total > limit:
            return buffers[:index]
    return buffers


class QueryMessageProcessor:
    """The two message lookups a broker answers from its store.

    With a ``pool``, a key query runs inline with ``inline_budget`` index entries and
    ``inline_seconds`` of walking, whichever ends first; one that needs more is handed to the pool
    (the answer then comes from a task, and may overtake later answers on the connection: clients
    pair answers by opaque), which continues it from where it stopped, up to ``budget`` entries in
    all. Without a pool it runs inline with ``budget``.
    """

    __slots__ = (
        "_body_limit",
        "_budget",
        "_default_query_max_num",
        "_inline_budget",
        "_inline_ns",
        "_pool",
        "_store",
    )

    def __init__(
        self,
        store: QueryStore,
        *,
        default_query_max_num: int = DEFAULT_QUERY_MAX_NUM,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        pool: QueryPool | None = None,
        budget: int = DEFAULT_QUERY_BUDGET,
        inline_budget: int = INLINE_BUDGET,
        inline_seconds: float = INLINE_SECONDS,
    ) -> None:
        self._store = store
        self._default_query_max_num = default_query_max_num
        self._body_limit = max_frame_length - HEADER_ALLOWANCE
        self._pool = pool
        self._budget = budget
        self._inline_budget = min(inline_budget, budget) if pool is not None else budget
        #: The inline walk's time limit in ns (0: none, without a pool the walk is the whole query).
        self._inline_ns = int(inline_seconds * 1e9) if pool is not None else 0

    def query_message(self, request: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        header = QueryMessageRequestHeader.from_ext_fields(request.ext_fields)
        max_num = header.max_num
        if is_unique_key_query(request.ext_fields):
            max_num = self._default_query_max_num
        # A null topic or key is queried as "null", as the broker's `topic + "#" + key` does.
        args = (java_string(header.topic), java_string(header.key), max_num, header.begin_timestamp,
                header.end_timestamp)  # fmt: skip
        outcome = self._query(request, args)
        if type(outcome) is RemotingCommand or not hasattr(outcome, "buffers"):
            return outcome  # type: ignore[return-value]
        return self._answer(request, outcome)  # type: ignore[arg-type]

    def query_parts(
        self, opaque: int, topic: str, key: str, max_num: int, begin: int, end: int, unique: bool
    ) -> tuple[int, int, list[memoryview]] | RemotingCommand | Awaitable[RemotingCommand]:
        """``query_message`` for the compiled request path (``server.remoting.request_path``), which
        read the header itself (every field present, plain digits): the answer's index timestamp,
        phyoffset and records for it to encode (not yet capped: it caps them to ``view_max_size``
        as ``_answer`` does, without a list copy and a Python loop per record), or the answer
        command, or the awaitable of a query handed to the pool, exactly as ``query_message``."""
        if unique:
            max_num = self._default_query_max_num
        outcome = self._query(opaque, (topic, key, max_num, begin, end))
        if type(outcome) is RemotingCommand or not hasattr(outcome, "buffers"):
            return outcome  # type: ignore[return-value]
        result: QueryResult = outcome  # type: ignore[assignment]
        buffers = result.buffers
        if type(buffers) is not list:
            buffers = list(buffers)
        return result.index_last_update_timestamp, result.index_last_update_phyoffset, buffers

    def compiled_parameters(self, store: object) -> tuple[int, int, int, bool] | None:
        """What the compiled request path's query loop (``server/remoting/_query_loop.h``) needs to
        run ``_query`` itself over ``store`` (the path's): (defaultQueryMaxNum, the inline budget, the
        inline time limit in ns (0: none), whether a query the inline walk stops can be handed to the
        pool to continue); None when ``store`` is not this processor's store or not one the loop can
        read (the Python path then answers every query)."""
        if store is not self._store or not hasattr(store, "query_snapshot"):
            return None
        handoff = self._pool is not None and self._inline_budget < self._budget
        return self._default_query_max_num, self._inline_budget, self._inline_ns, handoff

    def handoff(
        self, opaque: int, args: tuple[str, str, int, int, int], resume: object
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """``_query``'s hand-off for a query the compiled loop's inline walk stopped (its budget or
        deadline): refused SYSTEM_BUSY when the pool is full, else continued on the pool from
        ``resume`` (a ``QueryResume``; None starts it over), exactly as ``_query`` hands it off."""
        pool = self._pool
        assert pool is not None  # compiled_parameters says no hand-off without one
        request = query_request(opaque)
        if pool.full:
            return request.make_response(ResponseCode.SYSTEM_BUSY, remark=OVERLOAD_REMARK)
        return self._query_in_pool(request, pool, args, resume)

    def _query(
        self, request: RemotingCommand | int, args: tuple[str, str, int, int, int]
    ) -> QueryResult | RemotingCommand | Awaitable[RemotingCommand]:
        """The store's query with the inline budget, or its hand-off to the pool, or the answer to a
        refused one; ``request`` may be just the opaque of one (the compiled path's): the answers
        need no more of it."""
        try:
            if self._inline_ns:
                deadline = time.monotonic_ns() + self._inline_ns
                result = self._store.query_message(*args, budget=self._inline_budget, deadline=deadline)
            else:
                result = self._store.query_message(*args, budget=self._inline_budget)
        except QueryArgumentError as exc:
            # Where Java's store throws on the arguments (a negative maxNum sizes an ArrayList): the
            # broker answers with the exception's description. A client error: no traceback logged.
            return system_error(query_request(request), f"{ILLEGAL_ARGUMENT}: {exc}")
        # Stopped short of the whole budget (the inline budget or deadline): the pool finishes it.
        if result.budget_exhausted and self._pool is not None and result.visited < self._budget:
            request = query_request(request)
            if self._pool.full:
                # As the broker answers a query its executor's full queue rejects.
                return request.make_response(ResponseCode.SYSTEM_BUSY, remark=OVERLOAD_REMARK)
            return self._query_in_pool(request, self._pool, args, getattr(result, "resume", None))
        return result

    async def _query_in_pool(
        self, request: RemotingCommand, pool: QueryPool, args: tuple[str, str, int, int, int], resume: object
    ) -> RemotingCommand:
        """The same query on a pool thread, with the whole per-request budget.

        With the inline walk's ``resume`` point the pool continues where that walk stopped instead
        of reading its entries again (the same answer: ``MessageStore.query_message``). Without
        one (a store that gives none, or a corrupt chain that linked forwards) it starts over.
        """
        if resume is None:
            result = await pool.run(self._store.query_message, *args, budget=self._budget)
        else:
            result = await pool.run(self._store.query_message, *args, budget=self._budget, resume=resume)
        return self._answer(request, result)

    def _answer(self, request: RemotingCommand, result: QueryResult) -> RemotingCommand:
        response_header = response_fields(
            result.index_last_update_timestamp, result.index_last_update_phyoffset
        )
        buffers = cap_records(list(result.buffers), self._body_limit)
        if not buffers:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                remark=QUERY_NOT_FOUND_REMARK,
                ext_fields=response_header,
            )
        # Always a copy: a memoryview would pin the store's mmap while the answer waits in a write
        # buffer, and the store could then not close or remap that file.
        body = b"".join(buffers)
        return request.make_response(ResponseCode.SUCCESS, ext_fields=response_header, body=body)

    @property
    def view_max_size(self) -> int:
        """The largest record ``view_message_by_id`` answers with (a bigger one is no message)."""
        return self._body_limit

    def view_message_by_id(self, request: RemotingCommand) -> RemotingCommand:
        offset = ViewMessageRequestHeader.offset_from(request.ext_fields)
        # A copy (see _answer), read and copied in one call. Over the frame limit it cannot be a
        # record (the broker's maxMessageSize is 4 MiB): it is a garbage size word read at an offset
        # inside a record, which could claim up to the rest of a 1 GiB CommitLog file. Answering it
        # would copy that much and send a frame the client refuses by closing the connection, so the
        # store refuses it before copying and it is answered as no message.
        record = self._store.view_message_copy(offset, self._body_limit)
        if record is None:
            return system_error(request, view_not_found_remark(offset))
        access = RECORD_ACCESS.get()
        if access is not None:  # under ``--acl``: the account must be let read the record's topic
            try:
                remark = access.denial(record_topics(record), LOOKUP)
            except ProtocolError:
                remark = f"the bytes at offset {offset} are no message, so their topic cannot be checked"
            if remark is not None:
                return request.make_response(ResponseCode.NO_PERMISSION, remark=remark)
        # ``request.make_response(ResponseCode.SUCCESS, body=record)`` spelled out: the same command
        # (tests/server/remoting/processors/test_processors.py compares them), one Python call fewer per
        # VIEW (5% of its in-process instructions).
        return RemotingCommand(
            _SUCCESS, _JAVA, BROKER_VERSION, request.opaque, RPC_TYPE_RESPONSE, None, None, record,
            request.serialize_type,
        )  # fmt: skip
