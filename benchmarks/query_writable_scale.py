"""What a QUERY costs under ``serve --writable`` while SENDs arrive, as the store's topics grow.

    python -m benchmarks.query_writable_scale [--topics 200,50000] [--pairs 300] [--keep DIR]

For each count of topics: a store whose ``topics.json`` lists that many topics, each with one
keyed message written (so each has a consume queue and index entries), opened writable and served
by ``serve --writable``'s dispatcher (``server.remoting.write_path``) in-process; then one
connection alternates a read of one SEND_MESSAGE_V2 (to a topic of its own) and a read of one
QUERY_MESSAGE of the first topic's key (mqadmin's arguments). Printed per count: the CPU time of a
SEND read and a QUERY read together (best of 3 rounds of ``--pairs``), and the Python steps a pair makes
(``sys.settrace``'s events: each call, line and return; a per-batch loop in Python over the topics or
queues shows as steps growing with the count; a copy made in C, ``dict(...)``, does not: the time
column is the one for that). A cost per batch that grows with topics or queues is a bug (the
developers' guide): both columns should stay flat from the smallest count to the largest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 3
QUEUES = 4


def topic_name(index: int) -> str:
    return f"scale-topic-{index:06d}"


def build(root: Path, topics: int, **geometry: Any) -> None:
    """``topics`` topics in ``topics.json`` (saved once), then one keyed message in each;
    ``geometry``: ``StoreConfig.for_store``'s overrides (the test kit's small files in tests)."""
    from store.config.store_config import StoreConfig
    from store.config.topics import TopicConfig, TopicTable
    from store.write.writer import StoreWriter

    config = StoreConfig.for_store(root, **geometry)
    config_dir = root / "config"
    config_dir.mkdir(parents=True, exist_ok=True)
    table = TopicTable.load(config_dir / "topics.json")
    for i in range(topics):
        name = topic_name(i)
        table.topics[name] = TopicConfig(name, QUEUES, QUEUES)
    table.topics["ScaleSends"] = TopicConfig("ScaleSends", QUEUES, QUEUES)
    table.counter += topics + 1
    table.save()
    with StoreWriter(config) as writer:
        for i in range(topics):
            name = topic_name(i)
            writer.append(name, b"scale", keys=f"{name}-key", queue_id=i % QUEUES)
        writer.index()


def frames(pairs: int) -> tuple[list[bytes], bytes]:
    """``pairs`` SEND_MESSAGE_V2 frames to ``ScaleSends`` and one QUERY_MESSAGE of topic 0's key."""
    from protocol.codes import LanguageCode, RequestCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.frame import encode_frame
    from protocol.message_id import UniqueIdGenerator
    from protocol.send_message import SendMessageRequestHeader, client_properties

    ids = UniqueIdGenerator()
    sends = []
    for i in range(pairs):
        header = SendMessageRequestHeader(
            "load_group", "ScaleSends", "TBW102", QUEUES, i % QUEUES, 0, 1700000000000 + i, 0,
            client_properties(f"send-{i}", "TagS", None, ids.next_id()), 0, False, None, False, "broker-a",
        )  # fmt: skip
        sends.append(
            encode_frame(
                RemotingCommand(
                    RequestCode.SEND_MESSAGE_V2,
                    LanguageCode.JAVA,
                    407,
                    2 * i,
                    0,
                    None,
                    header.to_ext_fields(v2=True),
                    b"x" * 256,
                    SerializeType.JSON,
                )
            )
        )
    topic = topic_name(0)
    fields = {"topic": topic, "key": f"{topic}-key", "maxNum": "64", "beginTimestamp": "0",
              "endTimestamp": str(2**63 - 1)}  # fmt: skip
    query = encode_frame(
        RemotingCommand(
            RequestCode.QUERY_MESSAGE, LanguageCode.JAVA, 407, 1, 0, None, fields, None, SerializeType.JSON
        )
    )
    return sends, query


class _Transport:
    """Just enough of an ``asyncio.Transport`` for ``RemotingConnection``: keeps what is written."""

    def __init__(self) -> None:
        self.data = bytearray()

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data: Any) -> None:
        self.data += data

    def writelines(self, parts: Any) -> None:
        for part in parts:
            self.data += part

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


def measure(root: Path, pairs: int, *, timed_rounds: int = ROUNDS, **geometry: Any) -> dict[str, float]:
    """The figures for the store at ``root`` (built by ``build`` with ``geometry``): CPU µs (best of
    ``timed_rounds`` rounds; 0 for none) and Python steps per pair (``sys.settrace``'s events: each
    call, line and return run in Python)."""
    from server.app import QueryServer, ServerSettings
    from server.broker.writable_store import WritableStore
    from server.remoting.buffer_budget import BufferBudget
    from server.remoting.connection import RemotingConnection
    from server.remoting.refusal import IncompleteRequests
    from server.remoting.write_budget import WriteBudget
    from store.config.store_config import StoreConfig

    sends, query = frames(pairs * (timed_rounds + 2))
    out: dict[str, float] = {}

    async def run(store: WritableStore) -> None:
        server = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
        await server.start()
        server.watchdog.stop()  # the reads below hold the loop on purpose: no stack dumps
        try:
            transport = _Transport()
            connection = RemotingConnection(
                server.dispatcher,  # type: ignore[arg-type]
                idle_timeout=0,
                budget=BufferBudget(),
                write_budget=WriteBudget(),
                incomplete=IncompleteRequests(),
            )
            connection.connection_made(transport)  # type: ignore[arg-type]
            received = connection.data_received
            it = iter(sends)
            for _ in range(pairs):  # warm-up: every path taken once
                received(next(it))
                received(query)
            best = float("inf")
            for _ in range(timed_rounds):
                t0 = time.process_time()
                for _ in range(pairs):
                    received(next(it))
                    received(query)
                best = min(best, time.process_time() - t0)
            events = [0]

            def trace(frame: object, event: str, arg: object) -> Any:
                events[0] += 1  # each Python call, line and return: a loop over N items shows
                return trace

            sys.settrace(trace)
            try:
                for _ in range(pairs):
                    received(next(it))
                    received(query)
            finally:
                sys.settrace(None)
            if b"scale-topic-000000-key" not in transport.data:
                raise RuntimeError("the QUERY found nothing")
            connection.connection_lost(None)
            out["us_per_pair"] = best / pairs * 1e6 if timed_rounds else 0.0
            out["steps_per_pair"] = events[0] / pairs
        finally:
            await server.stop()

    from server.remoting.write_path import write_path

    store = WritableStore(StoreConfig.for_store(root, **geometry))
    try:
        asyncio.run(run(store))
    finally:
        store.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", default="200,50000", help="topic counts, comma-separated")
    parser.add_argument("--pairs", type=int, default=300, help="SEND + QUERY pairs per round")
    parser.add_argument("--keep", type=Path, help="build the stores here (kept; reused when present)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    counts = [int(t) for t in args.topics.split(",")]
    rows = {}
    with tempfile.TemporaryDirectory(prefix="query-scale-") as tmp:
        base = args.keep or Path(tmp)
        for n in counts:
            root = base / f"topics-{n}"
            if not (root / "commitlog").is_dir():
                shutil.rmtree(root, ignore_errors=True)
                started = time.perf_counter()
                build(root, n)
                print(f"built {n} topics in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            rows[n] = measure(root, args.pairs)
    if args.json:
        print(json.dumps(rows))
        return 0
    first = rows[counts[0]]
    print("| topics | CPU µs per SEND + QUERY | / first | Python steps per pair | / first |")
    print("|---:|---:|---:|---:|---:|")
    for n in counts:
        r = rows[n]
        print(
            f"| {n:,} | {r['us_per_pair']:.1f} | {r['us_per_pair'] / first['us_per_pair']:.2f} | "
            f"{r['steps_per_pair']:.0f} | {r['steps_per_pair'] / first['steps_per_pair']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
