"""The lifecycle of one server connection as one explicit state machine (sans-IO).

The remoting server (``server.remoting.connection``) used to carry its lifecycle in six flags (closing,
writing paused, draining, frames failed, a closer task, ...), whose combinations had to be read off
every method. Here it is one state, the events that move it, and an error for an event a state does
not allow, in the spirit of h11's ``_state.py``: no sockets, no asyncio, testable on its own. The
connection turns its transport's callbacks and its own decisions into events and drives the
transport from the state it lands in.

States (``State``):

- ``NEW`` — not connected yet.
- ``OPEN`` — reading requests and answering them.
- ``PEER_NOT_READING`` — our write buffer passed its high-water mark because the peer is not reading
  its answers: neither reading nor answering (requests already decoded wait) until it drains.
- ``DRAINING`` — nothing more will be read (a malformed frame, the shared buffer budget, the peer's
  EOF, a shutdown): answer what already arrived, then close.
- ``DRAINING_PEER_NOT_READING`` — draining, and the peer is not reading its answers either.
- ``CLOSING`` — asked the transport to close (it may still flush what was queued): nothing more is
  read or answered.
- ``CLOSED`` — the transport is gone.

Events (``Event``): ``CONNECTED``; ``PEER_NOT_READING`` and ``PEER_READING`` (the transport's
pause/resume of writing); ``INPUT_ENDED`` (read nothing more, answer what arrived); ``CLOSE`` (close
now: idle, stalled, drained, a malformed frame with nothing before it to answer, the shutdown
deadline); ``LOST`` (the transport's ``connection_lost``).

Refused (``ConnectionStateError``): anything before ``CONNECTED`` but ``CONNECTED``; a second
``CONNECTED``; a pause while paused or a resume while not paused (a transport reports each once);
``INPUT_ENDED`` once closed; anything but ``CLOSE`` once ``CLOSED`` (``connection_lost`` comes
once). Allowed without effect: ``INPUT_ENDED`` while draining or closing, ``CLOSE`` while closing or
closed, and the transport's pause/resume while closing (it keeps flushing after ``close()``).

Each state carries what the driver asks of it, as plain attributes read on the hot path:
``takes_input`` (decode what arrives), ``answering`` (answer decoded requests now), ``writable`` (an
answer may still be written), ``peer_not_reading``, ``draining``, ``closing``.
"""

from __future__ import annotations

import enum

from protocol.errors import ConnectionStateError


class State(enum.Enum):
    """Where one connection is in its life (module docstring)."""

    NEW = "new"
    OPEN = "open"
    PEER_NOT_READING = "peer not reading"
    DRAINING = "draining"
    DRAINING_PEER_NOT_READING = "draining, peer not reading"
    CLOSING = "closing"
    CLOSED = "closed"


class Event(enum.Enum):
    """What happens to a connection (module docstring)."""

    CONNECTED = "connected"
    PEER_NOT_READING = "peer not reading"
    PEER_READING = "peer reading"
    INPUT_ENDED = "input ended"
    CLOSE = "close"
    LOST = "lost"


_S, _E = State, Event

#: (state, event) -> next state; a pair not listed is refused.
TRANSITIONS: dict[tuple[State, Event], State] = {
    (_S.NEW, _E.CONNECTED): _S.OPEN,
    # The peer stops and starts reading its answers.
    (_S.OPEN, _E.PEER_NOT_READING): _S.PEER_NOT_READING,
    (_S.PEER_NOT_READING, _E.PEER_READING): _S.OPEN,
    (_S.DRAINING, _E.PEER_NOT_READING): _S.DRAINING_PEER_NOT_READING,
    (_S.DRAINING_PEER_NOT_READING, _E.PEER_READING): _S.DRAINING,
    (_S.CLOSING, _E.PEER_NOT_READING): _S.CLOSING,
    (_S.CLOSING, _E.PEER_READING): _S.CLOSING,
    # Nothing more is read; what arrived is answered.
    (_S.OPEN, _E.INPUT_ENDED): _S.DRAINING,
    (_S.PEER_NOT_READING, _E.INPUT_ENDED): _S.DRAINING_PEER_NOT_READING,
    (_S.DRAINING, _E.INPUT_ENDED): _S.DRAINING,
    (_S.DRAINING_PEER_NOT_READING, _E.INPUT_ENDED): _S.DRAINING_PEER_NOT_READING,
    (_S.CLOSING, _E.INPUT_ENDED): _S.CLOSING,
    # Closed by us (or by the transport after an EOF with nothing to answer), then gone.
    (_S.OPEN, _E.CLOSE): _S.CLOSING,
    (_S.PEER_NOT_READING, _E.CLOSE): _S.CLOSING,
    (_S.DRAINING, _E.CLOSE): _S.CLOSING,
    (_S.DRAINING_PEER_NOT_READING, _E.CLOSE): _S.CLOSING,
    (_S.CLOSING, _E.CLOSE): _S.CLOSING,
    (_S.CLOSED, _E.CLOSE): _S.CLOSED,
    (_S.OPEN, _E.LOST): _S.CLOSED,
    (_S.PEER_NOT_READING, _E.LOST): _S.CLOSED,
    (_S.DRAINING, _E.LOST): _S.CLOSED,
    (_S.DRAINING_PEER_NOT_READING, _E.LOST): _S.CLOSED,
    (_S.CLOSING, _E.LOST): _S.CLOSED,
}

#: States in which received bytes are decoded (while the peer is not reading, reading is paused, but
#: anything a transport still delivers is decoded and waits).
TAKES_INPUT = frozenset({_S.OPEN, _S.PEER_NOT_READING})
#: States in which decoded requests are answered now.
ANSWERING = frozenset({_S.OPEN, _S.DRAINING})
#: States in which an answer may still be written.
WRITABLE = frozenset({_S.OPEN, _S.PEER_NOT_READING, _S.DRAINING, _S.DRAINING_PEER_NOT_READING})
#: States in which the peer is not reading its answers.
PEER_NOT_READING = frozenset({_S.PEER_NOT_READING, _S.DRAINING_PEER_NOT_READING})
#: States in which nothing more is read and the connection closes once what arrived is answered.
DRAINING = frozenset({_S.DRAINING, _S.DRAINING_PEER_NOT_READING})


class ConnectionState:
    """One connection's state; ``handle(event)`` moves it or raises ``ConnectionStateError``.

    What the state asks of the connection is kept in plain attributes (not properties), set on each
    transition, because the connection reads them once per received chunk and per request.
    """

    __slots__ = ("answering", "closing", "draining", "peer_not_reading", "state", "takes_input", "writable")

    def __init__(self) -> None:
        self.state = State.NEW
        #: Decode what arrives (``OPEN``; ``PEER_NOT_READING`` too, should a transport deliver).
        self.takes_input = False
        #: Answer decoded requests now (``OPEN``, ``DRAINING``).
        self.answering = False
        #: An answer may still be written (every state between ``CONNECTED`` and ``CLOSE``).
        self.writable = False
        #: The peer is not reading its answers (both ``*PEER_NOT_READING`` states).
        self.peer_not_reading = False
        #: Nothing more is read; close once what arrived is answered (both ``DRAINING*`` states).
        self.draining = False
        #: Closing or closed: nothing more is read or answered.
        self.closing = False

    def handle(self, event: Event) -> State:
        """Apply ``event``; return the new state. Raises ``ConnectionStateError`` if not allowed."""
        state = TRANSITIONS.get((self.state, event))
        if state is None:
            raise ConnectionStateError(f"event {event.value!r} is not allowed in state {self.state.value!r}")
        self.state = state
        self.takes_input = state in TAKES_INPUT
        self.answering = state in ANSWERING
        self.writable = state in WRITABLE
        self.peer_not_reading = state in PEER_NOT_READING
        self.draining = state in DRAINING
        self.closing = state is State.CLOSING or state is State.CLOSED
        return state

    def __repr__(self) -> str:
        return f"ConnectionState({self.state.value!r})"
