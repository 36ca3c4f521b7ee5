"""The life of one half (transactional) message, as one sans-IO state machine.

A producer's transactional SEND stores a half message; what becomes of it is decided later by an
END_TRANSACTION (commit or rollback) or, when the producer stays silent, by the broker's check-back,
which asks the producer again and again up to ``transactionCheckMax`` times and then gives up on it.
The broker keeps no table of these states: they are spread over the half queue (the message and its
re-put copies, each carrying ``TRANSACTION_CHECK_TIMES``) and the op queue (one ``d`` record once it
is decided). This module names them, so that every rule that moves a half message says which move it
makes, and a move the broker never makes is an error here rather than a silent surprise:

    PREPARED --check--> CHECKING(1) --check--> CHECKING(2) ... CHECKING(max)
    PREPARED / CHECKING(n) --commit--> COMMITTED       (the real message written, then the op)
    PREPARED / CHECKING(n) --rollback--> ROLLED_BACK   (the op only)
    CHECKING(n >= max) --discard--> DISCARDED          (moved to TRANS_CHECK_MAX_TIME_TOPIC)
    PREPARED / CHECKING(n) --expire--> DISCARDED       (older than the CommitLog is kept)

COMMITTED, ROLLED_BACK and DISCARDED are final. No sockets, no clock: the caller supplies the events.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from protocol.custom_header_fields import java_parse_int


class HalfState(Enum):
    PREPARED = "prepared"
    CHECKING = "checking"
    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"
    DISCARDED = "discarded"


class HalfEvent(Enum):
    CHECK = "check"
    COMMIT = "commit"
    ROLLBACK = "rollback"
    DISCARD = "discard"
    EXPIRE = "expire"


FINAL_STATES = frozenset({HalfState.COMMITTED, HalfState.ROLLED_BACK, HalfState.DISCARDED})


class HalfStateError(ValueError):
    """An event the half message's state does not allow (a bug in the caller, never a client's)."""


@dataclass(frozen=True, slots=True)
class HalfMessageState:
    """A half message's state and how many check-backs it had (``TRANSACTION_CHECK_TIMES``)."""

    state: HalfState = HalfState.PREPARED
    checks: int = 0

    @classmethod
    def from_check_times(cls, check_times: str | None) -> HalfMessageState:
        """The state a stored half message is in, by its ``TRANSACTION_CHECK_TIMES`` property.

        Absent: never checked. Present: checked that many times; a value Java's ``Integer.parseInt``
        refuses counts as -1, as the broker's ``getInt`` reads it.
        """
        if check_times is None:
            return cls()
        parsed = java_parse_int(check_times)
        return cls(HalfState.CHECKING, -1 if parsed is None else parsed)

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    def must_discard(self, check_max: int) -> bool:
        """``needDiscard``: checked ``check_max`` times already, so the next check is never sent."""
        return self.state is HalfState.CHECKING and self.checks >= check_max

    def apply(self, event: HalfEvent, check_max: int) -> HalfMessageState:
        """The state after ``event``; ``HalfStateError`` if the broker never makes that move."""
        if self.final:
            raise HalfStateError(f"a {self.state.value} half message takes no {event.value}")
        if event is HalfEvent.CHECK:
            if self.must_discard(check_max):
                raise HalfStateError(f"checked {self.checks} times of {check_max}: discard it instead")
            # needDiscard: a first check sets 1, a later one adds one to what was stored.
            return HalfMessageState(
                HalfState.CHECKING, 1 if self.state is HalfState.PREPARED else self.checks + 1
            )
        if event is HalfEvent.COMMIT:
            return HalfMessageState(HalfState.COMMITTED, self.checks)
        if event is HalfEvent.ROLLBACK:
            return HalfMessageState(HalfState.ROLLED_BACK, self.checks)
        if event is HalfEvent.DISCARD:
            if not self.must_discard(check_max):
                raise HalfStateError(f"checked {self.checks} times of {check_max}: not yet discarded")
            return HalfMessageState(HalfState.DISCARDED, self.checks)
        # EXPIRE: older than fileReservedTime, whatever its checks (``needSkip``).
        return HalfMessageState(HalfState.DISCARDED, self.checks)

    def check_times_property(self) -> str:
        """The ``TRANSACTION_CHECK_TIMES`` value a re-put copy in this state carries."""
        if self.state is not HalfState.CHECKING:
            raise HalfStateError(f"a {self.state.value} half message is not re-put for a check")
        return str(self.checks)
