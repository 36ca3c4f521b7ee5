"""The server connection's state machine without sockets: every (state, event) pair, allowed or refused.

The expected table is written out here from the lifecycle the connection must have (module docstring
of ``protocol.connection_state``), not read from the module: each state is reached from ``NEW`` by
real events, then every event is applied to a fresh copy.
"""

from __future__ import annotations

import pytest

from protocol.connection_state import ConnectionState, Event, State
from protocol.errors import ConnectionStateError

C, PNR, PR, END, CLOSE, LOST = (
    Event.CONNECTED,
    Event.PEER_NOT_READING,
    Event.PEER_READING,
    Event.INPUT_ENDED,
    Event.CLOSE,
    Event.LOST,
)

#: How each state is reached from NEW.
PATHS: dict[State, list[Event]] = {
    State.NEW: [],
    State.OPEN: [C],
    State.PEER_NOT_READING: [C, PNR],
    State.DRAINING: [C, END],
    State.DRAINING_PEER_NOT_READING: [C, END, PNR],
    State.CLOSING: [C, CLOSE],
    State.CLOSED: [C, LOST],
}

_ = None  # refused
N, OP, P, D, DP, CG, CD = (
    State.NEW,
    State.OPEN,
    State.PEER_NOT_READING,
    State.DRAINING,
    State.DRAINING_PEER_NOT_READING,
    State.CLOSING,
    State.CLOSED,
)

#: state -> the next state for CONNECTED, PEER_NOT_READING, PEER_READING, INPUT_ENDED, CLOSE, LOST.
EXPECTED: dict[State, tuple[State | None, ...]] = {
    #    CONNECTED  PNR  PR  END  CLOSE  LOST
    N:  (OP,        _,   _,  _,   _,     _),
    OP: (_,         P,   _,  D,   CG,    CD),
    P:  (_,         _,   OP, DP,  CG,    CD),
    D:  (_,         DP,  _,  D,   CG,    CD),
    DP: (_,         _,   D,  DP,  CG,    CD),
    CG: (_,         CG,  CG, CG,  CG,    CD),
    CD: (_,         _,   _,  _,   CD,    _),
}  # fmt: skip

EVENTS = [C, PNR, PR, END, CLOSE, LOST]
PAIRS = [(state, event, EXPECTED[state][i]) for state in PATHS for i, event in enumerate(EVENTS)]


def reach(state: State) -> ConnectionState:
    machine = ConnectionState()
    for event in PATHS[state]:
        machine.handle(event)
    assert machine.state is state
    return machine


@pytest.mark.parametrize(
    ("state", "event", "expected"), PAIRS, ids=[f"{s.name}-{e.name}" for s, e, _ in PAIRS]
)
def test_every_transition(state: State, event: Event, expected: State | None) -> None:
    machine = reach(state)
    if expected is None:
        with pytest.raises(
            ConnectionStateError, match=f"{event.value!r} is not allowed in state {state.value!r}"
        ):
            machine.handle(event)
        assert machine.state is state  # a refused event changes nothing
    else:
        assert machine.handle(event) is expected
        assert machine.state is expected


#: state -> (takes_input, answering, writable, peer_not_reading, draining, closing)
FLAGS = {
    N: (False, False, False, False, False, False),
    OP: (True, True, True, False, False, False),
    P: (True, False, True, True, False, False),
    D: (False, True, True, False, True, False),
    DP: (False, False, True, True, True, False),
    CG: (False, False, False, False, False, True),
    CD: (False, False, False, False, False, True),
}


@pytest.mark.parametrize("state", list(FLAGS), ids=[s.name for s in FLAGS])
def test_what_each_state_asks_of_the_connection(state: State) -> None:
    machine = reach(state)
    flags = (
        machine.takes_input,
        machine.answering,
        machine.writable,
        machine.peer_not_reading,
        machine.draining,
        machine.closing,
    )
    assert flags == FLAGS[state]


def test_a_slow_reader_then_a_malformed_frame_then_the_peer_reads_again() -> None:
    """The connection's longest path: paused, input ends while paused, resumed, drained, closed, lost."""
    machine = ConnectionState()
    walk = [C, PNR, PR, PNR, END, PR, PNR, PR, CLOSE, PR, CLOSE, LOST, CLOSE]
    states = [machine.handle(event) for event in walk]
    assert states == [OP, P, OP, P, DP, D, DP, D, CG, CG, CG, CD, CD]
