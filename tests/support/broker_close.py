"""What a client's open connections see when a broker goes away: ended with a FIN or reset (RST),
and whether anything is still answered, for an idle connection, one that was answered, and one
holding a suspended pull.

Shared by the recorder of the real 4.9.7 broker (stopped by SIGTERM, killed by SIGKILL:
``golden/record_broker_close.py``) and the test of our ``down`` fault, so both are watched alike.
Raw sockets, each read bounded.
"""

from __future__ import annotations

import socket
import time

from protocol.command import RemotingCommand
from protocol.frame import FrameDecoder, encode_frame

#: GET_BROKER_RUNTIME_INFO and PULL_MESSAGE.
_RUNTIME_INFO, _PULL = 28, 11
#: Seconds a connection is watched for its end after the broker went away.
WATCH_SECONDS = 10.0


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.settimeout(5)
    return sock


def open_connections(address: str, topic: str) -> dict[str, socket.socket]:
    """Three connections to the broker at ``address``: ``idle`` (nothing sent), ``answered`` (one
    request, its answer read), ``heldPull`` (a pull with the suspend and subscription flags on an
    empty queue of ``topic``, which the broker holds: it must not have been answered 0.5 s later)."""
    connections = {"idle": _connect(address)}
    answered = _connect(address)
    answered.sendall(encode_frame(RemotingCommand(code=_RUNTIME_INFO, opaque=1, ext_fields={})))
    decoder = FrameDecoder()
    while not decoder.feed(answered.recv(65536)):
        pass
    connections["answered"] = answered
    held = _connect(address)
    pull = {
        "consumerGroup": "close_probe_group",
        "topic": topic,
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": "6",  # FLAG_SUSPEND | FLAG_SUBSCRIPTION
        "commitOffset": "0",
        "suspendTimeoutMillis": "20000",
        "subscription": "*",
        "subVersion": "0",
        "expressionType": "TAG",
    }
    held.sendall(encode_frame(RemotingCommand(code=_PULL, opaque=2, ext_fields=pull)))
    held.settimeout(0.5)
    try:
        early = held.recv(65536)
    except TimeoutError:
        early = None
    if early is not None:
        raise AssertionError(f"the pull was not held: {early[:200]!r}")
    connections["heldPull"] = held
    return connections


def watch(connections: dict[str, socket.socket]) -> dict[str, dict[str, object]]:
    """How each connection ended: ``end`` is ``FIN``, ``RST`` or ``open`` (nothing in
    ``WATCH_SECONDS``), ``answers`` the response codes that came first."""
    seen: dict[str, dict[str, object]] = {}
    deadline = time.monotonic() + WATCH_SECONDS
    for name, sock in connections.items():
        decoder = FrameDecoder()
        answers: list[int] = []
        end = "open"
        try:
            while True:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    end = "FIN"
                    break
                answers.extend(command.code for command in decoder.feed(data))
        except ConnectionResetError:
            end = "RST"
        except TimeoutError:
            end = "open"
        finally:
            sock.close()
        seen[name] = {"end": end, "answers": answers}
    return seen
