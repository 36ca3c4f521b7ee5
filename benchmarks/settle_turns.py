"""The in-process cost of a lone SEND when reads arrive in turns of the event loop, as on a socket.

    taskset -c 1 python -m benchmarks.settle_turns [--turns 400] [--connections 1,16]

``benchmarks.request_costs``' send rows feed every read to the connection inside one coroutine,
so all of them fall in one turn of the loop; a server's reads do not: each turn takes the reads
that arrived since the last one. Here ``connections`` connections each get one SEND_MESSAGE_V2
(256 bytes, KEYS, TAGS, a fresh UNIQ_KEY: ``request_costs.send_rows``' request) per turn, and the
loop turns (``asyncio.sleep(0)``) between: with 1 connection a turn settles one SEND (sync1), with
16 it settles 16 one after the other (sync16's shape). Printed: CPU µs per SEND (best of 3 rounds),
the loop's own turn and the callbacks it runs included (the same for any checkout compared).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.request_costs import _CountingTransport, on_writable_server, send_frames
from clients.testkit.server import kit_store_config
from server.broker.writable_store import WritableStore


async def _per_send_us(dispatcher: Any, connections: int, turns: int, rounds: int = 3) -> float:
    from server.remoting.buffer_budget import BufferBudget
    from server.remoting.connection import RemotingConnection
    from server.remoting.refusal import IncompleteRequests
    from server.remoting.write_budget import WriteBudget

    frames = send_frames(connections * turns * rounds)
    conns = []
    for _ in range(connections):
        c = RemotingConnection(
            dispatcher,
            idle_timeout=0,
            budget=BufferBudget(),
            write_budget=WriteBudget(),
            incomplete=IncompleteRequests(),
        )
        c.connection_made(_CountingTransport())  # type: ignore[arg-type]
        conns.append(c)
    best = float("inf")
    at = 0
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(turns):
            for c in conns:
                c.data_received(frames[at])
                at += 1
            await asyncio.sleep(0)  # the next turn of the loop, and whatever it runs: timed too
        best = min(best, time.process_time() - t0)
    for c in conns:
        c.connection_lost(None)
    return best / (turns * connections) * 1e6


def measure(connections: list[int], turns: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for n in connections:
        with tempfile.TemporaryDirectory(prefix="rmq-turns-") as tmp:
            store = WritableStore(kit_store_config(Path(tmp) / "store"))
            store.create_topic("CostTopic")

            async def timed(dispatcher: Any, n: int = n) -> None:
                out[f"lone SEND, {n} connection(s) a turn, µs per SEND"] = await _per_send_us(
                    dispatcher, n, turns
                )

            on_writable_server(store, timed)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--connections", default="1,16", help="comma-separated connection counts")
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.connections.split(",") if x]
    if args.turns < 1 or not counts or min(counts) < 1:
        parser.error("--turns and every connection count must be at least 1")
    print(json.dumps({k: round(v, 2) for k, v in measure(counts, args.turns).items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
