"""The compiled request path (issue 22): a read's VIEW_MESSAGE_BY_ID frames answered in one C call.

Per VIEW the Python path (``FrameDecoder``, ``Dispatcher``, ``QueryMessageProcessor``,
``encode_frame_parts``, the connection's loop) costs a few microseconds of interpreter work around
well under a microsecond of real work (find the record, copy it). On a slow core that glue is what
the throughput is made of, so for the most common request the whole of it is one compiled call per
received read (``server/remoting/_request_path_fast.c``): split the frames, read the JSON headers,
read the records from the CommitLog's maps, write every answer into one buffer that the connection
hands to the transport as one write.

The Python path stays the reference and the only path for anything else: the compiled call takes a
frame only when it is sure of it (the C file's header comment lists the shape) and stops at the
first other one; the connection feeds the rest of the read to its ``FrameDecoder`` as before. The
answer bytes are made by the Python encoder once (``_templates``), so the format is stated in one
place, and tests/server/remoting/test_request_path.py checks that a connection answers the same
bytes with and without this path. It is off when access control is on (every request must be
checked first, ``server.acl``), with ``RMQ_PURE_PYTHON=1``, when the extension is not built, and for
a code whose processor was replaced (``Dispatcher.register``).

What the Python path does besides answering is done here per batch: the store's served-bytes
accounting (``MessageStore.served``, which may release pages) and, with ``/metrics`` on, the
request counts (``RequestStats.observe_many``, each answer timed at the batch's mean).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from protocol.accel import load
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.header_json import encode_json_header
from server.remoting.processors.query_message import view_not_found_remark
from server.remoting.reply import system_error
from server.request_stats import RequestStats

_fast = load("server.remoting._request_path_fast")

#: True when the compiled request path is built and allowed.
COMPILED = _fast is not None

_VIEW = RequestCode.VIEW_MESSAGE_BY_ID
_SYSTEM_ERROR = ResponseCode.SYSTEM_ERROR
_SUCCESS = ResponseCode.SUCCESS

#: Stand-ins for the opaque and the offset in the template answers: each occurs once in its header.
_OPAQUE = 1234567891
_OFFSET = 987654321987654321


class ViewStore(Protocol):
    """What the path needs of the store: the CommitLog's read snapshot and the served accounting."""

    def view_snapshot(self) -> tuple[list[Any], list[int], list[int], Any, int]: ...

    def served(self, nbytes: int, records: int) -> None: ...


def _split(header: bytes, marker: bytes) -> tuple[bytes, bytes]:
    before, found, after = header.partition(marker)
    if not found or marker in after:
        raise AssertionError(f"template marker {marker!r} must occur once in {header!r}")
    return before, after


def _templates() -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """The answers' JSON headers around the opaque (and the offset), made by the Python encoder from
    the commands ``QueryMessageProcessor.view_message_by_id`` answers with."""
    request = RemotingCommand(_VIEW, opaque=_OPAQUE)
    found = encode_json_header(request.make_response(_SUCCESS))
    missing = encode_json_header(system_error(request, view_not_found_remark(_OFFSET)))
    ok_a, ok_b = _split(found, b"%d" % _OPAQUE)
    err_a, rest = _split(missing, b"%d" % _OPAQUE)
    err_b, err_c = _split(rest, b"%d" % _OFFSET)
    return ok_a, ok_b, err_a, err_b, err_c


if _fast is not None:
    _fast.bind(*_templates())


class ViewPath:
    """VIEW_MESSAGE_BY_ID answered by the compiled path for one store (one per dispatcher)."""

    __slots__ = ("_max_size", "_store", "codes")

    def __init__(self, store: ViewStore, max_size: int) -> None:
        self._store = store
        #: The processor's ``view_message_copy`` limit (a bigger "record" is answered as none).
        self._max_size = max_size
        #: The request codes this path answers (``Dispatcher.register`` drops it when one is replaced).
        self.codes = frozenset((_VIEW,))

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
    ) -> tuple[bytes | None, int, int]:
        """(answers, where it stopped, how many): the VIEW frames of ``data[pos:]`` answered in order
        up to the first frame the compiled path is not sure of, an incomplete frame, or
        ``flush_bytes`` of answers."""
        maps, starts, lengths, shrunk, max_offset = self._store.view_snapshot()
        started = time.perf_counter() if stats is not None else 0.0
        out, pos, answered, found, found_bytes = _fast.answer_views(  # type: ignore[union-attr]
            data, pos, maps, starts, lengths, max_offset, self._max_size, shrunk,
            max_frame_length, max_header_length, flush_bytes,
        )  # fmt: skip
        if answered:
            # view_message_copy's accounting: each answer counts its record and a page.
            self._store.served(found_bytes + 4096 * answered, answered)
            if stats is not None:
                each = (time.perf_counter() - started) / answered
                if found:
                    stats.observe_many(_VIEW, _SUCCESS, found, each)
                if answered > found:
                    stats.observe_many(_VIEW, _SYSTEM_ERROR, answered - found, each)
        return out, pos, answered
