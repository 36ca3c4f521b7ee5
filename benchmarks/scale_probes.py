"""How long the event loop is held by the costs that grow with held pulls, groups, clients, queues and
body sizes (issue 30's "nothing freezes at scale", for the hot paths added since its benchmark).

    python -m benchmarks.scale_probes [--only woken,pulse,offsets,routes,receive,refresh] [--json]
    PYTHONPATH=/path/to/other/checkout python benchmarks/scale_probes.py   # the same probes there

Each probe is in process, against the code on ``sys.path`` (a checkout's own, or another one's put
first with ``PYTHONPATH``: the probes use only interfaces both sides have), and reports the longest
time one synchronous step held the thread that runs the event loop, in milliseconds (target: about
50 ms at most, whatever the scale):

=========  =========================================================================================
woken      ``--held`` pulls held on one queue (``--connections`` connections of ``--held /
           --connections`` each, the per-connection bound is 1,000), woken by one SEND: the SEND's
           read (``RemotingConnection.data_received``, which runs the woken pulls' answers), and how
           many of them it answered in that turn
pulse      the same held pulls, one ``StoreChanges.pulse`` (the periodic refresh's): its wake-ups' run
offsets    ``--groups`` groups' committed offsets (4 queues each) saved on a thread while this thread
           commits every millisecond: the longest commit (it takes the table's lock)
routes     the name server's route watch with ``--clients`` clients of ``--topics-per-client`` topics:
           a broker leaving, the slowest connection closing while it is away, and the memory kept
           by 100,000 route answers of unknown topics on one connection (MB)
receive    a gRPC ``ReceiveMessage`` of 32 over a queue of 4 MiB bodies: the lease table's read (one
           call), the bodies it handed out (MiB), and the slowest message's response bytes
refresh    the periodic store refresh with ``--queues`` opened queues (one message each)
groups     ``--groups`` consumer groups and as many producer groups, their members on 1,000
           connections: the slowest of 200 connections closing, and the housekeeping's expiry with
           no member silent
=========  =========================================================================================

Costs are wall time on a shared machine: run it under ``flock -o /work/bench.lock`` and ``taskset``,
and compare checkouts in one run, alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the checkout on PYTHONPATH (or this one) first
    sys.path.append(str(Path(__file__).resolve().parents[1]))

PROBES = ("woken", "pulse", "offsets", "routes", "receive", "refresh", "groups")
MIB = 1024 * 1024


class _Transport:
    """Just enough of an ``asyncio.Transport`` for ``RemotingConnection``: counts writes."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.writes = 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", self.port) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.writes += 1

    def writelines(self, parts: Any) -> None:
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


def _frames() -> tuple[Callable[[int, int], bytes], Callable[[int], bytes]]:
    from protocol.codes import LanguageCode, RequestCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.frame import encode_frame
    from protocol.message_id import UniqueIdGenerator
    from protocol.send_message import SendMessageRequestHeader, client_properties

    ids = UniqueIdGenerator()

    def pull(queue_id: int, opaque: int) -> bytes:
        fields = {
            "consumerGroup": "probe_group", "topic": "Probe", "queueId": str(queue_id), "queueOffset": "0",
            "maxMsgNums": "32", "sysFlag": "7", "commitOffset": "0", "suspendTimeoutMillis": "600000",
            "subVersion": "1", "subscription": "*", "expressionType": "TAG",
        }  # fmt: skip
        return encode_frame(
            RemotingCommand(
                RequestCode.PULL_MESSAGE,
                LanguageCode.JAVA,
                407,
                opaque,
                0,
                None,
                fields,
                None,
                SerializeType.JSON,
            )
        )

    def send(queue_id: int) -> bytes:
        header = SendMessageRequestHeader(
            "producer_group", "Probe", "TBW102", 4, queue_id, 0, 1700000000000, 0,
            client_properties("key", "TagA", None, ids.next_id()), 0, False, None, False, "b1",
        )  # fmt: skip
        fields = header.to_ext_fields(v2=True)
        code, java, json_ = RequestCode.SEND_MESSAGE_V2, LanguageCode.JAVA, SerializeType.JSON
        return encode_frame(RemotingCommand(code, java, 407, 2, 0, None, fields, b"probe body", json_))

    return pull, send


def _connection(srv: Any, port: int) -> tuple[Any, _Transport]:
    from server.remoting.buffer_budget import BufferBudget
    from server.remoting.connection import RemotingConnection
    from server.remoting.refusal import IncompleteRequests
    from server.remoting.write_budget import WriteBudget

    connection = RemotingConnection(
        srv.dispatcher,
        idle_timeout=0,
        budget=BufferBudget(),
        write_budget=WriteBudget(),
        incomplete=IncompleteRequests(),
        woken=srv.changes,
    )
    transport = _Transport(port)
    connection.connection_made(transport)
    return connection, transport


async def _held_pulls(held: int, connections: int, pulse: bool) -> dict[str, object]:
    from server.app import QueryServer, ServerSettings
    from server.broker.writable_store import WritableStore
    from server.remoting.write_path import write_path
    from store.config.store_config import StoreConfig

    pull, send = _frames()
    per = -(-held // connections)
    with tempfile.TemporaryDirectory() as tmp:
        config = StoreConfig.for_store(
            Path(tmp) / "store", mapped_file_size_commit_log=16 * MIB, max_message_size=4096, broker_name="b1"
        )
        store = WritableStore(config)
        srv = QueryServer(store.reader, ServerSettings(port=0, broker_name="b1"), configure=write_path(store))
        await srv.start()
        try:
            store.create_topic("Probe")
            consumers = [_connection(srv, 41000 + i) for i in range(connections)]
            for i, (consumer, _) in enumerate(consumers):
                count = min(per, held - i * per)
                if count > 0:
                    consumer.data_received(b"".join(pull(0, 1000 + j) for j in range(count)))
            for _ in range(5):
                await asyncio.sleep(0)
            producer, _ = _connection(srv, 40002)
            producer.data_received(send(3))  # the store's first files made before the timed SEND
            for _ in range(3):
                await asyncio.sleep(0)
            before = sum(t.writes for _, t in consumers)
            if pulse:
                changes = srv.changes
                start = time.perf_counter()
                changes.pulse()
                changes.run_woken()  # what the scheduled run does at the next turn
                held_ms = (time.perf_counter() - start) * 1000
                answered = sum(t.writes for _, t in consumers) - before
                return {"held_pulls": held, "pulse_ms": round(held_ms, 1), "answered": answered}
            start = time.perf_counter()
            producer.data_received(send(0))
            held_ms = (time.perf_counter() - start) * 1000
            in_turn = sum(t.writes for _, t in consumers) - before
            for _ in range(100_000):
                if sum(t.writes for _, t in consumers) - before >= held:
                    break
                await asyncio.sleep(0)
            return {
                "held_pulls": held,
                "send_turn_ms": round(held_ms, 1),
                "answered_in_the_sends_turn": in_turn,
                "answered_in_all": sum(t.writes for _, t in consumers) - before,
            }
        finally:
            await srv.stop()
            store.close()


def probe_offsets(groups: int) -> dict[str, object]:
    from store.config.consumer_offsets import ConsumerOffsetTable

    with tempfile.TemporaryDirectory() as tmp:
        table = ConsumerOffsetTable(Path(tmp) / "consumerOffset.json")
        for i in range(groups):
            for q in range(4):
                table.commit(f"group_{i}", f"topic_{i}", q, 1000 + q)
        worst = 0.0
        saves = 0
        for rnd in range(3):
            table.commit("g", "t", 0, rnd)
            saver = threading.Thread(target=table.save)
            saver.start()
            saves += 1
            while saver.is_alive():
                start = time.perf_counter()
                table.commit("g", "t", 0, 1)
                worst = max(worst, time.perf_counter() - start)
                time.sleep(0.001)
        return {"groups": groups, "saves": saves, "worst_commit_ms": round(worst * 1000, 1)}


def probe_routes(clients: int, topics: int) -> dict[str, object]:
    from server.namesrv.route_watch import RouteWatch

    async def run() -> dict[str, object]:
        watch = RouteWatch()
        for c in range(clients):
            for t in range(topics):
                watch.answered(f"10.0.0.1:{c}", f"topic-{c % 100}-{t}", ["b1", "b2"])
        start = time.perf_counter()
        watch.broker_left("b1")
        left_ms = (time.perf_counter() - start) * 1000
        worst = 0.0
        for c in range(clients):
            start = time.perf_counter()
            watch.forget(f"10.0.0.1:{c}")
            worst = max(worst, time.perf_counter() - start)
        unknown = RouteWatch()
        tracemalloc.start()
        try:
            for i in range(100_000):
                unknown.answered("10.0.0.2:1", f"no-such-topic-{i}", ())
            kept, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return {
            "watched": clients * topics,
            "broker_left_ms": round(left_ms, 1),
            "worst_forget_ms": round(worst * 1000, 2),
            "unknown_topics_kept_mb": round(kept / 1e6, 1),
        }

    return asyncio.run(run())


def probe_receive(body_size: int) -> dict[str, object]:
    from server.broker.receive_leases import ReceiveLeases
    from server.broker.receive_store import StoreReader
    from server.broker.writable_store import WritableStore
    from server.grpc.message_bytes import ReceivedMessages
    from store.config.store_config import StoreConfig
    from store.write.writer import StoreRecord

    class _Broker:
        def __init__(self, store: WritableStore) -> None:
            self.store = store

    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        config = StoreConfig.for_store(
            Path(tmp) / "store",
            mapped_file_size_commit_log=256 * MIB,
            max_message_size=4 * MIB,
            broker_name="b1",
        )
        store = WritableStore(config)
        try:
            body = b"x" * body_size
            for i in range(40):
                store.put([StoreRecord("Big", body, f"UNIQ_KEY\x01U{i:031d}\x02", queue_id=0)])
            leases = ReceiveLeases(
                StoreReader(_Broker(store)),  # type: ignore[arg-type]
                broker_name="b1",
                commit=lambda *a: None,
                committed=lambda *a: -1,
                dead_letter=lambda *a: None,
            )
            start = time.perf_counter()
            got = leases.receive("G", "Big", [0], 32, 30_000, 1000, max_attempts=17)
            read_ms = (time.perf_counter() - start) * 1000
            messages = ReceivedMessages("Big", 30_000)
            worst = 0.0
            for delivery in got:
                start = time.perf_counter()
                messages.record(delivery.message.raw, attempt=1, receipt_handle=str(delivery.handle))
                worst = max(worst, time.perf_counter() - start)
            return {
                "body_bytes": body_size,
                "messages": len(got),
                "records_mib": round(sum(len(d.message.raw) for d in got) / MIB, 1),
                "read_ms": round(read_ms, 1),
                "worst_response_ms": round(worst * 1000, 1),
            }
        finally:
            store.close()


def probe_refresh(queues: int) -> dict[str, object]:
    from server.broker.writable_store import WritableStore
    from store.config.store_config import StoreConfig
    from store.write.writer import StoreRecord

    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        store = WritableStore(StoreConfig.for_store(Path(tmp) / "store", broker_name="b1"))
        try:
            for i in range(0, queues, 100):
                store.put(
                    [
                        StoreRecord(f"T{j}", b"x", f"UNIQ_KEY\x01U{j:031d}\x02", queue_id=0)
                        for j in range(i, min(queues, i + 100))
                    ]
                )
            store.reader.defer_flush = True  # as under serve: the sync is a thread's
            table = store.reader.queues
            for i in range(queues):
                table.get(f"T{i}", 0)
            times = []
            for _ in range(5):
                start = time.perf_counter()
                store.reader.refresh()
                times.append(round((time.perf_counter() - start) * 1000, 1))
            return {"opened_queues": len(table.opened()), "refresh_ms": times}
        finally:
            store.close()


def probe_groups(groups: int) -> dict[str, object]:
    from server.broker.client_channel import ClientChannelInfo
    from server.broker.consumer_groups import ConsumerGroups
    from server.broker.producer_groups import ProducerGroups

    class _Channel:
        def __init__(self, i: int) -> None:
            self.id = i
            self.client_address = f"10.0.0.1:{i}"
            self.active = True

        def send_oneway(self, request: object) -> None:
            pass

    def tables() -> tuple[ConsumerGroups, ProducerGroups, list[_Channel]]:
        consumers, producers = ConsumerGroups(), ProducerGroups()
        channels = [_Channel(i) for i in range(1000)]
        for g in range(groups):
            channel = channels[g % len(channels)]
            info = ClientChannelInfo(channel, f"client-{channel.id}", "JAVA", 407, 0)  # type: ignore[arg-type]
            consumers.register(f"group-{g}", info, "CONSUME_PASSIVELY", "CLUSTERING", "X", [], notify=False)
            producers.register(f"pgroup-{g}", info)
        return consumers, producers, channels

    quiet = logging.getLogger("server.broker")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # a join or a close is logged per group
    try:
        consumers, producers, channels = tables()
        start = time.perf_counter()
        consumers.expire(1)
        producers.expire(1)
        expire_ms = (time.perf_counter() - start) * 1000
        worst = 0.0
        for channel in channels[:200]:
            start = time.perf_counter()
            consumers.channel_closed(channel)  # type: ignore[arg-type]
            producers.channel_closed(channel)  # type: ignore[arg-type]
            worst = max(worst, time.perf_counter() - start)
    finally:
        quiet.setLevel(level)
    return {
        "groups": groups,
        "worst_close_ms": round(worst * 1000, 2),
        "expire_none_silent_ms": round(expire_ms, 1),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--only", default=",".join(PROBES), help="comma-separated probes: " + ",".join(PROBES)
    )
    parser.add_argument("--held", type=int, default=10_000, help="pulls held (woken, pulse)")
    parser.add_argument("--connections", type=int, default=10, help="connections holding them")
    parser.add_argument("--groups", type=int, default=50_000, help="groups (offsets, groups)")
    parser.add_argument("--clients", type=int, default=1000, help="name server clients (routes)")
    parser.add_argument("--topics-per-client", type=int, default=50, help="topics each asked (routes)")
    parser.add_argument("--body", type=int, default=4 * MIB - 1024, help="body bytes (receive)")
    parser.add_argument("--queues", type=int, default=4000, help="opened queues (refresh)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = parser.parse_args(argv)
    chosen = [p for p in args.only.split(",") if p]
    unknown = [p for p in chosen if p not in PROBES]
    if unknown:
        parser.error(f"--only: unknown probe(s) {', '.join(unknown)}; choose from {', '.join(PROBES)}")
    for name in ("held", "connections", "groups", "clients", "topics_per_client", "body", "queues"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    args.chosen = chosen
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs: dict[str, Callable[[], dict[str, object]]] = {
        "woken": lambda: asyncio.run(_held_pulls(args.held, args.connections, pulse=False)),
        "pulse": lambda: asyncio.run(_held_pulls(args.held, args.connections, pulse=True)),
        "offsets": lambda: probe_offsets(args.groups),
        "routes": lambda: probe_routes(args.clients, args.topics_per_client),
        "receive": lambda: probe_receive(args.body),
        "refresh": lambda: probe_refresh(args.queues),
        "groups": lambda: probe_groups(args.groups),
    }
    report: dict[str, object] = {}
    for name in args.chosen:
        gc.collect()
        report[name] = runs[name]()
        if not args.json:
            print(f"{name}: {json.dumps(report[name])}", flush=True)
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
