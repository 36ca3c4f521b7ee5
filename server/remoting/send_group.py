"""The SENDs of one compiled call, acknowledged together (issue 22: SEND in the test kit).

A put is the append and then the work that makes the record acknowledged: the reput (both
dispatchers), the CommitLog refresh that makes it readable, the check that the log reads to its
end, and the index audit (``WritableStore.put``). That second half costs about as much per put
whether it settles one record or eight, so when one read brings several SENDs (a client with
requests in flight on one connection, as the Java producer multiplexes its threads), the compiled
request path appends each SEND as it comes (``SendMessageProcessor.store_send(settle=False)``: its
checks, refusals and store timestamp are its own) and settles them once, when its C call returns
and before any answer is written to the socket or any later request of the read is answered
(``RequestPath.answer`` calls the C side again after SENDs, with a fresh snapshot).

The C side writes each SUCCESS answer as soon as the callback returns; none leaves before the settle.
If the settle fails (a file cut under the writer, a dispatch error other than a full disk), none of
the SENDs it covered is acknowledged: their answers are replaced, in the call's output, by the
refusal the Python path gives a put that fails the same way (``Dispatcher.finish``). Each SEND's
answer starts where the C side says its output stood when it called back, and the SENDs of a call
are its last frames, so each answer is the output from there to the next SEND's.

A SEND that created its topic is answered from a task once the topic table is saved (as
``SendMessageProcessor.process``): it settles at once, so the answer its task gives is final.

A plain SEND (issue 33: ``_request_path_plain.h`` says which) costs no callback: the C side encodes
it and writes its SUCCESS answer itself, from the state ``plain_begin`` gives, and hands the call's
plain SENDs to ``flush_plain`` as one buffer, written with one ``pwrite`` before any other Python of
the call runs (``SendMessageProcessor.append_encoded``). They are held and settled as the others
are; a failed write or settle replaces each of their answers by the refusal the Python path gives.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.frame import encode_frame
from protocol.send_message import SendMessageRequestHeader
from server.broker.put_message import PutRefused
from server.remoting.dispatch import Dispatcher
from server.remoting.processors.send_message import SendMessageProcessor
from server.remoting.reply import compiled_request
from server.request_stats import RequestStats

log = logging.getLogger(__name__)

_SUCCESS = ResponseCode.SUCCESS
#: The sender's address when the connection set none (``SendMessageProcessor.process``'s default).
_NO_PEER = ("127.0.0.1", 0)


@dataclass(slots=True)
class _Answered:
    """One SEND the C call answered: where its answer starts in the call's output, and, for a held
    one (SUCCESS written, not yet settled), what it is answered with instead if its settle failed."""

    at: int
    opaque: int
    code: int
    started: float
    held: bool
    failure: PutRefused | Exception | None = None


@dataclass(slots=True)
class _Plain:
    """The plain SENDs of one ``flush_plain``: where each answer starts, its opaque and request code,
    when the group began, and what they are answered with instead if their write or settle failed."""

    ats: list[int]
    opaques: list[int]
    codes: list[int]
    started: float
    failure: PutRefused | Exception | None = None

    def answered(self) -> list[_Answered]:
        """Each SEND as the callback's are kept (only when an answer must be replaced)."""
        started, failure = self.started, self.failure
        return [
            _Answered(at, opaque, code, started, True, failure)
            for at, opaque, code in zip(self.ats, self.opaques, self.codes, strict=True)
        ]


class SendGroup:
    """The compiled path's SENDs for one processor: answered by ``answer`` (the C side's callback),
    settled and, if need be, answered again by ``finish`` after each C call."""

    __slots__ = ("_answered", "_begun", "_dispatcher", "_held", "_held_plain", "_plain", "peer", "sends")

    def __init__(self, sends: SendMessageProcessor, dispatcher: Dispatcher) -> None:
        self.sends = sends
        self._dispatcher = dispatcher
        #: The SENDs of the current C call the callback answered, in order.
        self._answered: list[_Answered] = []
        #: Those of them whose SUCCESS is written and not yet settled.
        self._held: list[_Answered] = []
        #: The plain SENDs of the current C call, per flush; those written and not yet settled.
        self._plain: list[_Plain] = []
        self._held_plain: list[_Plain] = []
        #: When the open plain group began (``plain_begin``).
        self._begun = 0.0
        #: The sender of the read being answered (its SENDs' born host), set by the request path
        #: per call: handed over, not read from ``CURRENT_PEER``, which a read of lookups would
        #: otherwise have to set and reset for SENDs it does not hold.
        self.peer: tuple[str, int] | None = None

    def plain_begin(self) -> tuple[Any, ...] | None:
        """The C side's first plain SEND of a group: the state it stores them from
        (``SendMessageProcessor.plain_state``), or None to leave every SEND of the call to ``answer``."""
        self._begun = time.perf_counter()
        return self.sends.plain_state(self.peer or _NO_PEER)

    def flush_plain(
        self,
        data: bytes,
        position: int,
        now: int,
        count: int,
        last_offset: int,
        last_size: int,
        keys: list[tuple[str, int]],
        ats: list[int],
        opaques: list[int],
        codes: list[int],
    ) -> None:
        """The C side's plain SENDs since ``plain_begin``, encoded and answered SUCCESS: written now,
        held until ``finish`` settles them (their answers replaced if the write or the settle fails)."""
        group = _Plain(ats, opaques, codes, self._begun)
        try:
            group.failure = self.sends.append_encoded(
                data, position, now, count, (last_offset, last_size), keys
            )
        except Exception as exc:  # as Dispatcher answers a processor's failure
            group.failure = exc
        self._plain.append(group)
        if group.failure is None:
            self._held_plain.append(group)

    def answer(
        self,
        opaque: int,
        code: int,
        header: SendMessageRequestHeader,
        body: bytes,
        at: int,
        stats: RequestStats | None,
        start: Any,
    ) -> Any:
        """One SEND (``code``: SEND_MESSAGE_V2, SEND_BATCH_MESSAGE or SEND_MESSAGE), ``at`` the length
        of the C call's output so far: False (left to the Python path, nothing done), (msgId, queueId,
        queueOffset) for SUCCESS (held until ``finish``), a whole answer frame, or None when a task
        answers (the SEND created its topic)."""
        sends = self.sends
        if not sends.takes_compiled(header):
            return False
        started = time.perf_counter()
        store = sends.store
        before = store.topic_changes()
        failure: Exception | None = None
        try:
            # version 0: only a consumer's retry reads the request's version, and it is left above
            outcome: Any = sends.store_send(header, body, self.peer or _NO_PEER, 0, settle=False)
        except Exception as exc:  # as Dispatcher answers a processor's failure
            failure = exc
        after = store.topic_changes()
        if failure is None and type(outcome) is tuple:
            if after == before:
                answered = _Answered(at, opaque, code, started, True)
                self._answered.append(answered)
                self._held.append(answered)
                appended, queue_id = outcome
                ids = ",".join(a.offset_msg_id for a in appended)  # as SendMessageProcessor._success
                return (ids, queue_id, appended[0].queue_offset)
            # answered from a task once the topic table is saved: settled now, so that answer is final
            settled = self._settle(stats)
            if isinstance(settled, PutRefused):
                outcome = settled
            elif settled is not None:
                failure = settled
        self._answered.append(_Answered(at, opaque, code, started, False))
        request = compiled_request(code, opaque)
        answered_with: Any = failure
        if failure is None:
            answered_with = sends.answer_outcome(request, outcome)
            if after != before:
                answered_with = sends.when_saved(after, answered_with)
        answer = self._dispatcher.finish(request, answered_with, started)
        if type(answer) is RemotingCommand:
            return encode_frame(answer)
        start(answer)
        return None

    def finish(self, out: bytes | None, stats: RequestStats | None) -> bytes | None:
        """After a C call: settle its held SENDs, and give the call's output with the answer of each
        SEND a failed settle covered replaced by its refusal."""
        answered, plain = self._answered, self._plain
        if not answered and not plain:
            return out
        self._answered = []
        self._plain = []
        if self._held or self._held_plain:
            # Every plain group written (none failed its write) and no callback's SEND: when the
            # settle goes through too, the output is final as the C side wrote it (a lone SEND).
            written = not answered and len(self._held_plain) == len(plain)
            if self._settle(stats) is None and written:
                return out
        if any(group.failure is not None for group in plain):
            answered = sorted(
                answered + [one for group in plain for one in group.answered()], key=lambda a: a.at
            )
        first = next((i for i, a in enumerate(answered) if a.failure is not None), None)
        if first is None or out is None:
            return out
        parts = [out[: answered[first].at]]
        for i in range(first, len(answered)):
            one = answered[i]
            if one.failure is None:
                end = answered[i + 1].at if i + 1 < len(answered) else len(out)
                parts.append(out[one.at : end])
            else:
                parts.append(self._refusal(one))
        return b"".join(parts)

    def abandon(self) -> None:
        """The C call failed after SENDs were appended and its answers are dropped: settle them
        (nothing is acknowledged; they are dispatched as any stored record is) and forget the call."""
        self._answered = []
        self._plain = []
        held, self._held = self._held, []
        held_plain, self._held_plain = self._held_plain, []
        if held or held_plain:
            try:
                self.sends.settle()
            except Exception:
                log.exception("settling the SENDs of a failed read")

    def _settle(self, stats: RequestStats | None) -> PutRefused | Exception | None:
        """Settle the held SENDs (and the store's other unsettled appends): None, or what each of
        them is answered with instead (marked on them for ``finish``)."""
        held, self._held = self._held, []
        held_plain, self._held_plain = self._held_plain, []
        failure: PutRefused | Exception | None
        try:
            failure = self.sends.settle()
        except Exception as exc:  # as Dispatcher answers a processor's failure
            failure = exc
        if failure is None:
            if stats is not None:
                now = time.perf_counter()
                for one in held:
                    stats.observe(one.code, _SUCCESS, now - one.started)
                for group in held_plain:
                    codes = group.codes
                    if len(codes) == 1:
                        stats.observe_many(codes[0], _SUCCESS, 1, now - group.started)
                        continue
                    for code in set(codes):
                        stats.observe_many(code, _SUCCESS, codes.count(code), now - group.started)
        else:
            for one in held:
                one.failure = failure
            for group in held_plain:
                group.failure = failure
        return failure

    def _refusal(self, one: _Answered) -> bytes:
        """The answer frame of a held SEND whose settle failed, as the Python path answers a put
        that fails so (``store_send``'s refusal, or a processor's failure)."""
        request = compiled_request(one.code, one.opaque)
        failure = one.failure
        answered = self.sends.answer_outcome(request, failure) if isinstance(failure, PutRefused) else failure
        answer = self._dispatcher.finish(request, answered, one.started)
        assert type(answer) is RemotingCommand  # neither is awaited
        return encode_frame(answer)
