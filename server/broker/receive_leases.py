"""What a SimpleConsumer has received and not yet acked: the leases of the 5.x ``pop`` consumption.

A 5.x broker serves ReceiveMessage by ``pop``: a message handed out stays invisible to the group for
the request's invisible duration; acked, it is done; not acked in time, the broker revives it and it
is handed out again with its delivery attempt one higher. This table keeps that state for one
broker, sans-IO (no files, no sockets): the store is read through a ``Reader`` and dead letters are
written through a ``DeadLetterWriter``, both given by the caller.

Per (group, topic, queue): a cursor (the first offset never handed out) and the outstanding leases
(offset -> lease). The group's committed offset (``BrokerController.commit_offset``, the same
``consumerOffset.json`` the remoting side uses) is the lowest outstanding offset, or the cursor when
nothing is outstanding: it only moves over an acked prefix. A queue seen for the first time starts
at the committed offset; a group that committed none starts at the queue's start while the queue
was never trimmed (min offset 0), else at its end: the broker's ``ConsumeInitMode.MAX`` with
``initPopOffsetByCheckMsgInMem`` (a new queue's first message still in memory), as the Proxy asks.

Leases live in memory only, as the broker keeps pop checkpoints in its revive topic we do not have:
after a restart every unacked message is handed out again from the committed offset, with the
delivery attempt counted again from the record (at-least-once, never lost; a redelivery may come
sooner than its invisible time said).

FIFO (an orderly group: the group's ``consumeMessageOrderly``, which the Proxy answers a consumer as
``Settings.subscription.fifo`` and then pops with ``order`` set): a queue with a lease not yet acked
and not yet due hands out nothing to the group, so a message group's next message (one group is one
queue) waits until every earlier message of the queue is acked or falls due again. That is the 5.x
broker's orderly pop: ``PopMessageProcessor.popMsgFromQueue`` skips a queue that
``ConsumerOrderInfoManager.checkBlock`` says is blocked (a message of its last orderly pop neither
acked nor past its next visible time); once unblocked the queue is read again from its first unacked
message, so a message that fell due comes back before any later one.

Auto-renewal (a PushConsumer's ReceiveMessage with ``auto_renew``): the Proxy's
``ReceiptHandleProcessor`` keeps such a message invisible while the client that received it is
alive, renewing its lease ``RENEW_AHEAD_MS`` before it runs out by ``RENEW_SLICE_MS`` at a time, for
at most ``RENEW_MAX_MS`` from the receive; the client's original receipt handle stays good for its ack.
Here the renewal is lazy: a lease is only ever looked at when a receive, an ack or a wait for the
next deadline needs it, and every such look first renews the auto-renew leases of live clients
(``alive(group, client_id)``, the broker's consumer-group membership) that are within
``RENEW_AHEAD_MS`` of their deadline. A client gone, the lease runs out and the message is due again.

Rules taken from the Proxy 5.1.4:
- the delivery attempt is the record's ``reconsumeTimes`` + 1, + 1 for each redelivery here
  (``GrpcConverter.buildSystemProperties``);
- a message whose next delivery would exceed the group's max attempts (``retryMaxTimes`` + 1, the
  backoff policy the Proxy answers a consumer with) goes to ``%DLQ%group`` and is acked instead
  (``PopMessageResultFilterImpl`` and ``ConsumerProcessor``'s TO_DLQ path);
- a receipt handle has ``ReceiptHandle.encode``'s nine space-separated fields (start offset,
  retrieve time, invisible time, revive queue id - here the lease id -, topic type, broker name,
  queue id, offset, commit log offset); one that does not decode, or whose lease was redelivered or
  acked since, is INVALID_RECEIPT_HANDLE; ChangeInvisibleDuration with an expired handle too
  (``ReceiptHandle.isExpired``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from store.consumequeue.get_message import RecordFilter

#: ``ReceiptHandle``'s topic types: a normal topic's handle is "N".
NORMAL_TOPIC = "N"
#: The separator of ``ReceiptHandle.encode`` (``MessageConst.KEY_SEPARATOR``).
SEPARATOR = " "

#: ``ProxyConfig``'s renewal of auto-renew leases: how long before the deadline a lease is renewed,
#: by how much, and for how long at most from the receive.
RENEW_AHEAD_MS = 10_000
RENEW_SLICE_MS = 60_000
RENEW_MAX_MS = 3 * 3600 * 1000
#: Record bytes (``held_bytes``) one receive hands out before it stops taking more (it may pass
#: them by one read of the store, itself bounded by ``maxTransferBytesOnMessageInMemory`` or one
#: message). The broker's pop reads each queue once (its transfer bound); reading one queue again
#: until the batch is full, as here, made a batch of 32 bodies of 4 MiB one call of 116 ms on the
#: event loop and 128 MiB held.
MAX_RECEIVE_BYTES = 4 * 1024 * 1024


class Record(Protocol):
    """A stored message as the table reads it (a ``MessageExt`` is one; the store's reader gives
    lighter records that keep the stored bytes, which the table hands out without looking at)."""

    @property
    def queue_offset(self) -> int: ...

    @property
    def commit_log_offset(self) -> int: ...

    @property
    def reconsume_times(self) -> int: ...


def held_bytes(record: Record) -> int:
    """What ``MAX_RECEIVE_BYTES`` counts of a record handed out: a read record's stored bytes
    (``raw``: its body and the rest of the record), else a decoded message's body."""
    raw = getattr(record, "raw", None)
    return len(raw) if raw is not None else len(getattr(record, "body", b""))


class Reader(Protocol):
    """The store as the table reads it: up to ``n`` messages of a queue from ``offset``."""

    def read(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        n: int,
        tags_codes: frozenset[int] | None,
        record_filter: RecordFilter | None = None,
    ) -> tuple[Sequence[Record], int]:
        """The messages found (filtered by tags, or by ``record_filter`` on each record: an SQL92
        subscription's) and the offset after the last one looked at."""
        ...

    def bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        """The queue's (min offset, max offset)."""
        ...


#: Stores a message in the group's dead-letter topic (``send_back``'s record).
DeadLetterWriter = Callable[[str, Record], None]


class InvalidReceiptHandle(Exception):
    """A receipt handle that does not decode or names no current lease."""


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """``ReceiptHandle``'s fields; ``lease_id`` sits where the broker puts its revive queue id."""

    start_offset: int
    retrieve_time: int
    invisible_time: int
    lease_id: int
    topic_type: str
    broker_name: str
    queue_id: int
    offset: int
    commit_log_offset: int

    def encode(self) -> str:
        return SEPARATOR.join(
            str(v)
            for v in (
                self.start_offset,
                self.retrieve_time,
                self.invisible_time,
                self.lease_id,
                self.topic_type,
                self.broker_name,
                self.queue_id,
                self.offset,
                self.commit_log_offset,
            )
        )

    @staticmethod
    def encode_fields(
        offset: int,
        retrieve_time: int,
        invisible_time: int,
        lease_id: int,
        broker_name: str,
        queue_id: int,
        commit_log_offset: int,
    ) -> str:
        """``encode`` of a normal topic's handle whose start offset is its offset (every handle a
        receive hands out), written at once: no ``ReceiptHandle`` is built for each message."""
        return (
            f"{offset} {retrieve_time} {invisible_time} {lease_id} {NORMAL_TOPIC} {broker_name} {queue_id}"
            f" {offset} {commit_log_offset}"
        )

    @property
    def deadline(self) -> int:
        return self.retrieve_time + self.invisible_time

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        parts = text.split(SEPARATOR)
        if len(parts) != 9:
            raise InvalidReceiptHandle("parse failed")
        try:
            return cls(
                int(parts[0]),
                int(parts[1]),
                int(parts[2]),
                int(parts[3]),
                parts[4],
                parts[5],
                int(parts[6]),
                int(parts[7]),
                int(parts[8]),
            )
        except ValueError:
            raise InvalidReceiptHandle("parse failed") from None


@dataclass(slots=True)
class Lease:
    """One message handed out and not acked: its current lease and how often it was delivered."""

    lease_id: int
    deadline: int
    #: The delivery attempt of the current lease (what the client was told).
    attempt: int
    #: Auto-renewed (``auto_renew``) while its client is alive, until this time (ms); 0: never.
    renew_until: int = 0
    #: The client that received it (whose liveness keeps an auto-renew lease).
    client_id: str = ""
    #: The receipt handle the client was given for this lease.
    handle: str = ""


#: A time later than any deadline: a queue without leases has nothing falling due.
NEVER = 1 << 62


@dataclass(slots=True)
class QueueState:
    """One (group, topic, queue): the first offset never handed out, and the outstanding leases.

    ``leases`` is kept in ascending offset order: a new lease is only ever taken at the cursor,
    above every offset leased before, and a lease handed out again replaces its own entry (a dict
    keeps a replaced key in place). So the lowest outstanding offset is the first key, found in
    constant time on every ack rather than by a walk over hundreds of leases.

    ``due_from`` and ``renew_from`` are lower bounds, kept so that a receive does not walk every
    outstanding lease to learn that none is due: no lease falls due before ``due_from``, and no
    auto-renew lease needs renewing before ``renew_from``. A new lease lowers them; a renewal or an
    ack leaves them lower than they need be (still bounds); a walk sets them exactly again."""

    cursor: int
    leases: dict[int, Lease] = field(default_factory=dict)
    due_from: int = NEVER
    renew_from: int = NEVER

    def committed(self) -> int:
        """The offset up to which everything is done: the lowest leased one, else the cursor."""
        return next(iter(self.leases)) if self.leases else self.cursor

    def blocked(self, now: int) -> bool:
        """``OrderInfo.needBlock``: a message handed out is neither acked nor due again yet."""
        return any(lease.deadline > now for lease in self.leases.values())

    def take(self, offset: int, lease: Lease) -> None:
        """``lease`` is the offset's lease now (a new one, or one replacing its own)."""
        self.leases[offset] = lease
        if lease.deadline < self.due_from:
            self.due_from = lease.deadline
        if lease.renew_until and lease.deadline - RENEW_AHEAD_MS < self.renew_from:
            self.renew_from = lease.deadline - RENEW_AHEAD_MS


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message handed out: the record, its receipt handle and delivery attempt."""

    message: Record
    handle: str
    attempt: int
    deadline: int


class ReceiveLeases:
    """Every group's leases on this broker; driven by calls with the time passed in (ms)."""

    def __init__(
        self,
        reader: Reader,
        *,
        broker_name: str,
        commit: Callable[[str, str, int, int], None],
        committed: Callable[[str, str, int], int],
        dead_letter: DeadLetterWriter,
        alive: Callable[[str, str], bool] | None = None,
        max_bytes: int = MAX_RECEIVE_BYTES,
    ) -> None:
        self._reader = reader
        #: Body bytes a receive stops at (``MAX_RECEIVE_BYTES``).
        self.max_bytes = max_bytes
        #: Whether (group, client id) is still a live member (keeps its auto-renew leases).
        self._alive = alive or (lambda group, client_id: False)
        self.broker_name = broker_name
        self._commit = commit
        self._committed = committed
        self._dead_letter = dead_letter
        self._queues: dict[tuple[str, str, int], QueueState] = {}
        self._ids = itertools.count(1)
        #: The handle text of every current lease -> (queue id, offset): an ack of a handle as it
        #: was handed out is one look-up, with no decoding. A handle not found here (changed by the
        #: client, or no longer current) is decoded as ``ReceiptHandle.decode`` says.
        self._issued: dict[str, tuple[int, int]] = {}

    def _state(self, group: str, topic: str, queue_id: int) -> QueueState:
        key = (group, topic, queue_id)
        state = self._queues.get(key)
        if state is None:
            start = self._committed(group, topic, queue_id)
            low, high = self._reader.bounds(topic, queue_id)
            if start < 0:
                start = low if low == 0 else high
            state = self._queues[key] = QueueState(max(start, low))
        return state

    def _advance(self, group: str, topic: str, queue_id: int, state: QueueState) -> None:
        committed = state.committed()
        if committed != self._committed(group, topic, queue_id):
            self._commit(group, topic, queue_id, committed)

    def _drop(self, state: QueueState, offset: int) -> None:
        """The offset's lease is gone (acked, dead-lettered, or its message gone from the store)."""
        lease = state.leases.pop(offset)
        self._issued.pop(lease.handle, None)

    def _renew(self, group: str, state: QueueState, now: int) -> None:
        """Renew the queue's auto-renew leases of live clients that are close to their deadline."""
        if state.renew_from > now:
            return
        renew_from = NEVER
        for lease in state.leases.values():
            if lease.renew_until > now and lease.deadline > now:
                if lease.deadline - now <= RENEW_AHEAD_MS and self._alive(group, lease.client_id):
                    lease.deadline = min(now + RENEW_SLICE_MS, lease.renew_until)
                if lease.deadline - RENEW_AHEAD_MS < renew_from:
                    renew_from = lease.deadline - RENEW_AHEAD_MS
        state.renew_from = renew_from

    def renew(self, group: str, topic: str, now: int) -> None:
        """Renew the group's auto-renew leases on the topic that are due for it (see the module doc)."""
        for (g, t, _), state in self._queues.items():
            if g == group and t == topic:
                self._renew(group, state, now)

    def renew_all(self, now: int) -> None:
        """Renew every auto-renew lease due for it: the periodic sweep, for leases nobody looks at
        (a client that stopped receiving while its listener works)."""
        for (group, _, _), state in self._queues.items():
            self._renew(group, state, now)

    def next_deadline(self, group: str, topic: str) -> int | None:
        """The earliest lease deadline of the group on the topic (when a redelivery becomes due)."""
        deadlines = [
            # an auto-renew lease needs a look before it runs out, to be renewed
            lease.deadline - RENEW_AHEAD_MS if lease.renew_until > lease.deadline else lease.deadline
            for (g, t, _), state in self._queues.items()
            if g == group and t == topic
            for lease in state.leases.values()
        ]
        return min(deadlines) if deadlines else None

    def _lease(
        self,
        group: str,
        topic: str,
        state: QueueState,
        message: Record,
        queue_id: int,
        attempt: int,
        invisible_ms: int,
        now: int,
        client_id: str = "",
        auto_renew: bool = False,
    ) -> Delivery:
        """A new lease of the message, taken in ``state`` (replacing the offset's old one)."""
        lease_id = next(self._ids)
        offset = message.queue_offset
        handle = ReceiptHandle.encode_fields(
            offset, now, invisible_ms, lease_id, self.broker_name, queue_id, message.commit_log_offset
        )
        deadline = now + invisible_ms
        old = state.leases.get(offset)
        if old is not None:
            self._issued.pop(old.handle, None)
        state.take(
            offset,
            Lease(lease_id, deadline, attempt, now + RENEW_MAX_MS if auto_renew else 0, client_id, handle),
        )
        self._issued[handle] = (queue_id, offset)
        return Delivery(message, handle, attempt, deadline)

    def _redeliver(
        self,
        group: str,
        topic: str,
        queue_id: int,
        state: QueueState,
        n: int,
        out: list[Delivery],
        invisible_ms: int,
        now: int,
        max_attempts: int,
        client_id: str,
        auto_renew: bool,
        taken: int,
    ) -> int:
        """The queue's leases that fell due, handed out again (in offset order) while ``out`` has
        room and fewer than ``max_bytes`` were handed out (``taken`` so far: returned, grown);
        ``state.due_from`` set to the earliest deadline of those left when all were seen."""
        if state.due_from > now:
            return taken
        due = sorted(o for o, lease in state.leases.items() if lease.deadline <= now)
        for offset in due:
            if len(out) >= n or taken >= self.max_bytes:
                return taken  # some may be left due: ``due_from`` stays at or before them
            lease = state.leases[offset]
            found, _ = self._reader.read(topic, queue_id, offset, 1, None)
            if not found or found[0].queue_offset != offset:
                self._drop(state, offset)  # gone from the store (trimmed): nothing to deliver
                continue
            attempt = lease.attempt + 1
            if attempt > max_attempts:
                self._dead_letter(group, found[0])
                self._drop(state, offset)
                continue
            out.append(
                self._lease(
                    group, topic, state, found[0], queue_id, attempt, invisible_ms, now, client_id, auto_renew
                )
            )
            taken += held_bytes(found[0])
        state.due_from = min((lease.deadline for lease in state.leases.values()), default=NEVER)
        return taken

    def receive(
        self,
        group: str,
        topic: str,
        queue_ids: Sequence[int],
        n: int,
        invisible_ms: int,
        now: int,
        *,
        max_attempts: int,
        tags_codes: frozenset[int] | None = None,
        record_filter: RecordFilter | None = None,
        orderly: bool = False,
        client_id: str = "",
        auto_renew: bool = False,
    ) -> list[Delivery]:
        """Up to ``n`` messages of the queues (in the order given): expired leases first, then new.

        A message due again past ``max_attempts`` is written to the dead-letter topic and acked
        instead of handed out. ``orderly`` (a FIFO group): a queue holding a lease not yet due is
        skipped. ``auto_renew``: the leases handed out are renewed while ``client_id`` is alive.
        Fewer than ``n`` once ``max_bytes`` of records are handed out (at least one message)."""
        out: list[Delivery] = []
        taken = 0  # bytes of the records handed out (``held_bytes``)
        limit = self.max_bytes
        for queue_id in queue_ids:
            if len(out) >= n or taken >= limit:
                break
            state = self._state(group, topic, queue_id)
            self._renew(group, state, now)
            if orderly and state.blocked(now):
                continue
            taken = self._redeliver(
                group,
                topic,
                queue_id,
                state,
                n,
                out,
                invisible_ms,
                now,
                max_attempts,
                client_id,
                auto_renew,
                taken,
            )
            while len(out) < n and taken < limit:
                found, next_offset = self._reader.read(
                    topic, queue_id, state.cursor, n - len(out), tags_codes, record_filter
                )
                for message in found:
                    attempt = message.reconsume_times + 1
                    if attempt > max_attempts:
                        self._dead_letter(group, message)
                        continue
                    # at or past the cursor: above every leased offset (``QueueState``'s order)
                    out.append(
                        self._lease(
                            group,
                            topic,
                            state,
                            message,
                            queue_id,
                            attempt,
                            invisible_ms,
                            now,
                            client_id,
                            auto_renew,
                        )
                    )
                    taken += held_bytes(message)
                if next_offset <= state.cursor:
                    break
                state.cursor = next_offset
            self._advance(group, topic, queue_id, state)
        return out

    def _find(self, group: str, topic: str, handle: str) -> tuple[int, int, QueueState, Lease]:
        """The handle's (queue id, offset, queue state, lease); ``InvalidReceiptHandle`` when it does
        not decode or names no current lease of the group on the topic.

        A handle as it was handed out is found by its text (``_issued``); any other is decoded and
        looked up by its queue id, offset and lease id, as the table always did: the answer is the
        same either way, the look-up by text only skips the decoding (a lease's handle names its
        lease id, unique to this table, so the lease found under the caller's group and topic
        holding that very text is the handle's)."""
        issued = self._issued.get(handle)
        if issued is not None:
            queue_id, offset = issued
            state = self._queues.get((group, topic, queue_id))
            if state is not None:
                lease = state.leases.get(offset)
                if lease is not None and lease.handle == handle:
                    return queue_id, offset, state, lease
        decoded = ReceiptHandle.decode(handle)
        state = self._queues.get((group, topic, decoded.queue_id))
        lease = state.leases.get(decoded.offset) if state is not None else None
        if state is None or lease is None or lease.lease_id != decoded.lease_id:
            raise InvalidReceiptHandle("the receipt handle names no message received and not acked")
        return decoded.queue_id, decoded.offset, state, lease

    def ack(self, group: str, topic: str, handle: str) -> None:
        """Done: the message is never handed out again; the committed offset moves over what is done.

        An expired lease not yet handed out again may still be acked (the broker's revive has not
        run); one handed out again has a new handle and the old one is refused."""
        queue_id, offset, state, _ = self._find(group, topic, handle)
        self._drop(state, offset)
        self._advance(group, topic, queue_id, state)

    def ack_all(self, group: str, topic: str, handles: Sequence[str]) -> tuple[list[str | None], set[int]]:
        """``ack`` of each handle in turn, each queue's committed offset moved once at the end:
        per handle None when acked, else why not (``InvalidReceiptHandle``'s text); and the queue ids
        of the messages acked."""
        results: list[str | None] = []
        touched: dict[int, QueueState] = {}
        for handle in handles:
            try:
                queue_id, offset, state, _ = self._find(group, topic, handle)
            except InvalidReceiptHandle as exc:
                results.append(str(exc))
                continue
            self._drop(state, offset)
            touched[queue_id] = state
            results.append(None)
        for queue_id, state in touched.items():
            self._advance(group, topic, queue_id, state)
        return results, set(touched)

    def change_invisible(
        self, group: str, topic: str, handle: str, invisible_ms: int, now: int
    ) -> Delivery | None:
        """A new lease of ``invisible_ms`` from ``now`` for the handle's message; its new handle.

        None when the message is no longer in the store (the lease is dropped)."""
        queue_id, offset, state, lease = self._find(group, topic, handle)
        if lease.deadline <= now:
            raise InvalidReceiptHandle("receipt handle is expired")
        found, _ = self._reader.read(topic, queue_id, offset, 1, None)
        if not found or found[0].queue_offset != offset:
            self._drop(state, offset)
            self._advance(group, topic, queue_id, state)
            return None
        return self._lease(group, topic, state, found[0], queue_id, lease.attempt, invisible_ms, now)

    def dead_letter(self, group: str, topic: str, handle: str) -> None:
        """ForwardMessageToDeadLetterQueue: the message to ``%DLQ%group``, then acked."""
        queue_id, offset, state, _ = self._find(group, topic, handle)
        found, _ = self._reader.read(topic, queue_id, offset, 1, None)
        if found and found[0].queue_offset == offset:
            self._dead_letter(group, found[0])
        self._drop(state, offset)
        self._advance(group, topic, queue_id, state)
