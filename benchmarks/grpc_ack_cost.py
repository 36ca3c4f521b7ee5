"""The Python cost of a gRPC AckMessage in-process: microseconds per message acked, checkout A B.

    python -m benchmarks.grpc_ack_cost --checkout /tmp/s9-base [--checkout DIR ...] [--rounds 3]
        [--receives 300]

Under load the ack's share of the loop hides behind grpcio's; this times ``GrpcConsumers.ack`` alone.
For each checkout (this one first; ``--checkout`` adds others, each with its accelerators built) a
child process imports that checkout's code, fills a lease table (``ReceiveLeases``) over messages
kept in a list, and for ``--receives`` receives of 32 times the acks of their handles: ``each`` (one
AckMessage per message, as a consumer acking as it goes) and ``batch`` (one AckMessage of 32), the
answer serialized as grpcio would. The checkouts alternate round by round; the table gives the median
and, for each other checkout, its per-round cost as a multiple of this one's (above 1: this one
is cheaper). A timing on a shared host: compare ratios only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODES = ("each", "batch")


def child(receives: int) -> None:
    """Print {mode: us per message acked} for the checkout in the working directory."""
    sys.path.insert(0, os.getcwd())
    from protocol.message import MessageExt
    from server.broker.receive_leases import ReceiveLeases
    from server.grpc.receiving import GrpcConsumers
    from server.grpc.v2 import definition, service

    class Queue:
        def __init__(self, n: int) -> None:
            self.messages = [
                MessageExt(topic="T", queue_id=0, queue_offset=i, commit_log_offset=1000 + i)
                for i in range(n)
            ]

        def read(self, topic, queue_id, offset, n, tags, record_filter=None):
            found = self.messages[offset : offset + n]
            return found, offset + len(found)

        def bounds(self, topic, queue_id):
            return 0, len(self.messages)

    class Group:
        consume_message_orderly = False

    class Broker:
        def find_group(self, group, connection=None):
            return Group()

    result = {}
    group, topic = definition.Resource(name="G"), definition.Resource(name="T")

    def table(n: int) -> ReceiveLeases:
        offsets: dict = {}
        return ReceiveLeases(
            Queue(n),
            broker_name="b",
            commit=lambda g, t, q, o: offsets.__setitem__((g, t, q), o),
            committed=lambda g, t, q: offsets.get((g, t, q), -1),
            dead_letter=lambda g, m: None,
        )

    for mode in MODES:
        leases = table(receives * 32)
        consumers = GrpcConsumers(Broker(), leases, None, None, clock=lambda: 0)  # type: ignore[arg-type]
        took, acked = 0.0, 0
        for _ in range(receives):
            got = leases.receive("G", "T", [0], 32, 60_000, 0, max_attempts=17)
            entries = [service.AckMessageEntry(message_id="01ABCDEF", receipt_handle=d.handle) for d in got]
            calls = [[e] for e in entries] if mode == "each" else [entries]
            requests = [service.AckMessageRequest(group=group, topic=topic, entries=c) for c in calls]
            start = time.perf_counter()
            for request in requests:
                answer = consumers.ack(request)
                if not isinstance(answer, bytes):
                    answer.SerializeToString()
            took += time.perf_counter() - start
            acked += len(got)
        result[mode] = took / acked * 1e6
    print(json.dumps(result))


def measure(checkout: Path, receives: int) -> dict[str, float]:
    """One child's figures for ``checkout`` (this file run as a script there: its code imported)."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(receives)],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", default=[], type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--receives", type=int, default=300)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return
    checkouts = [REPO, *args.checkout]
    runs: dict[Path, list[dict[str, float]]] = {c: [] for c in checkouts}
    for r in range(args.rounds):
        for checkout in checkouts if r % 2 == 0 else checkouts[::-1]:
            runs[checkout].append(measure(checkout, args.receives))
    print(f"load average {os.getloadavg()}; {args.rounds} rounds of {args.receives} receives of 32")
    print("| checkout | " + " | ".join(f"{m}: us per message acked" for m in MODES) + " |")
    print("|---|" + "---:|" * len(MODES))
    for checkout in checkouts:
        cells = []
        for mode in MODES:
            mine = [run[mode] for run in runs[checkout]]
            ratios = " ".join(
                f"{run[mode] / base[mode]:.2f}" for base, run in zip(runs[REPO], runs[checkout], strict=True)
            )
            cells.append(
                f"{statistics.median(mine):.2f}" + ("" if checkout == REPO else f" ({ratios}x this)")
            )
        print(f"| {checkout} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
