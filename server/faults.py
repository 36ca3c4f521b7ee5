"""Faults on demand for one broker of an in-process cluster: what is in force, read from JSON.

A test asks a broker to misbehave as a real one does under trouble, so that what the official
clients then do can be watched (issue 34):

- ``down``: the broker stops listening and closes its connections, and the name server forgets its
  routes (a broker process gone; ``server.cluster`` does it);
- ``busy``: this fraction (0-1) of SENDs and pulls is answered SYSTEM_BUSY, the broker's flow
  control (``BrokerFastFailure``'s answer when its queues are full);
- ``delayMs``: every answer waits this long (0-60000 ms) first;
- ``drop``: this fraction (0-1) of requests is not answered: the connection is reset instead.

The JSON body of ``POST /api/brokers/{brokerName}/faults`` is the whole state in force afterwards
(a field left out is off), so a test states what it wants rather than patching what was there.
Sans-IO: the decisions draw from a ``random.Random`` the caller may seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from protocol.codes import RequestCode

#: The longest ``delayMs``: past a minute every client has timed out long ago.
MAX_DELAY_MS = 60_000

#: The requests ``busy`` answers SYSTEM_BUSY: the broker's flow control covers sends and pulls.
BUSY_CODES = frozenset(
    {
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.PULL_MESSAGE,
    }
)

#: The remark of a SYSTEM_BUSY answer ``busy`` gives (the broker's fast-failure wording, with the cause).
BUSY_REMARK = "[FAULT_INJECTED]broker busy, start flow control for a while (busy fault on this broker)"

FIELDS = ("down", "busy", "delayMs", "drop")


class FaultSpecError(ValueError):
    """A fault body that cannot be put in force; ``field`` names what is wrong."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


@dataclass(frozen=True, slots=True)
class Faults:
    """The faults in force on one broker (all off by default)."""

    down: bool = False
    busy: float = 0.0
    delay_ms: int = 0
    drop: float = 0.0

    @property
    def on_requests(self) -> bool:
        """Whether requests that reach the broker are touched (``busy``, ``delayMs`` or ``drop``)."""
        return self.busy > 0 or self.delay_ms > 0 or self.drop > 0

    def to_json(self) -> dict[str, Any]:
        return {"down": self.down, "busy": self.busy, "delayMs": self.delay_ms, "drop": self.drop}

    @classmethod
    def from_json(cls, body: object) -> Faults:
        """The state a JSON body asks for; ``FaultSpecError`` naming the first wrong field."""
        if not isinstance(body, dict):
            raise FaultSpecError("body", f"a JSON object with any of {', '.join(FIELDS)} is expected")
        unknown = sorted(set(body) - set(FIELDS))
        if unknown:
            raise FaultSpecError(unknown[0], f"unknown fault (known: {', '.join(FIELDS)})")
        down = body.get("down", False)
        if not isinstance(down, bool):
            raise FaultSpecError("down", "true or false expected")
        delay = body.get("delayMs", 0)
        if isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= MAX_DELAY_MS:
            raise FaultSpecError("delayMs", f"an integer from 0 to {MAX_DELAY_MS} expected")
        return cls(down, _fraction(body, "busy"), delay, _fraction(body, "drop"))


def _fraction(body: dict[str, object], name: str) -> float:
    value = body.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise FaultSpecError(name, "a fraction from 0 to 1 expected (1 = every request)")
    return float(value)


@dataclass(slots=True)
class BrokerFaults:
    """One broker's faults in force, shared by its connections; ``rng`` draws busy and drop."""

    state: Faults = field(default_factory=Faults)
    rng: random.Random = field(default_factory=random.Random)

    def busy_now(self, code: int) -> bool:
        """Whether this request is answered SYSTEM_BUSY."""
        busy = self.state.busy
        return busy > 0 and code in BUSY_CODES and (busy >= 1 or self.rng.random() < busy)

    def drop_now(self) -> bool:
        """Whether this request's connection is reset instead of answered."""
        drop = self.state.drop
        return drop > 0 and (drop >= 1 or self.rng.random() < drop)


class UnknownBrokerError(KeyError):
    """No broker of this cluster has that name."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        super().__init__(name)
        self.message = f"no broker named {name!r} in this cluster (brokers: {', '.join(known)})"

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class Comeback:
    """When a broker that is ``down`` comes back once its fault is cleared (``server.cluster``): a
    clear waits until every client the name server told its routes has seen it gone (or closed its
    connection), at most ``within_s`` seconds from now; ``waiting_for`` lists who it would wait for,
    as ``host:port topic`` (the first ``WAITING_SHOWN``), ``clients`` counts them."""

    within_s: float
    clients: int
    waiting_for: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "withinMs": round(self.within_s * 1000),
            "clientsToSeeItGone": self.clients,
            "waitingFor": list(self.waiting_for),
        }


#: The (client, topic) pairs a ``Comeback`` names at most.
WAITING_SHOWN = 10


class FaultControl(Protocol):
    """Where faults are read and set by broker name (``server.cluster.Cluster``; the HTTP API's)."""

    @property
    def broker_names(self) -> list[str]: ...

    def faults_of(self, name: str) -> Faults:
        """The faults in force; ``UnknownBrokerError`` for a name no broker has."""
        ...

    async def set_faults(self, name: str, faults: Faults) -> Faults:
        """Put ``faults`` in force (the whole state); ``UnknownBrokerError`` as above."""
        ...

    def comeback_of(self, name: str) -> Comeback | None:
        """While broker ``name`` is down, how long a clear would wait for its clients; else None."""
        ...
