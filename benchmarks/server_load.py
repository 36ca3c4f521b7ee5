"""Server load benchmark: requests/s and p50/p99 latency of the query server beside a ceiling.

    python -m benchmarks.server_load [--duration 3] [--workers 1 2] [--kinds K ...]
        [--target PORT --target-name NAME]

Serves the Java-written store (``../shared/stores/java-4.9.7-a``, copied to a temporary directory)
and drives VIEW_MESSAGE_BY_ID (one 529-byte record) and QUERY_MESSAGE (``TopicA``/``k-3``: 14
records, 11 KB) over 1, 16 and 64 connections, each keeping ``--depth`` requests in flight (1 for
the single-connection latency run). The same load runs against a *ceiling* server: a minimal asyncio
protocol on the same event loop that answers every frame with a pre-encoded frame of the same size,
i.e. what this runtime can do with no work per request at all. ``--kinds`` adds the consume-queue
reads: PULL_MESSAGE (``TopicA`` queue 1 from offset 0, 32 records, 22 KB, as mqadmin's pull consumer
asks) and SEARCH_OFFSET_BY_TIMESTAMP (``TopicA`` queue 1, a store time in the middle of the queue).
``--target PORT`` measures a server already listening there instead (e.g. the Java 4.9.7 broker
serving a copy of the same store), with no ceiling run.

Server and load generator run in separate processes (``--client-procs`` generator processes), so
they do not share a GIL; ``--workers N`` starts N server processes sharing the port (SO_REUSEPORT).
The generator decodes only the length prefix of answers (answers on a connection arrive in request
order for these synchronous processors) after checking one full answer per connection, so it costs
as little as possible per request; latency is measured from write to complete answer.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import shutil
import socket
import struct
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.frame import decode_frame, encode_frame

_LENGTH = struct.Struct(">i")

DEFAULT_STORE = Path(__file__).resolve().parents[1] / "tests" / "golden" / "stores"

VIEW_OFFSET = 17457
QUERY_TOPIC, QUERY_KEY = "TopicA", "k-3"
#: PULL_MESSAGE and SEARCH_OFFSET_BY_TIMESTAMP: TopicA queue 1 (498 entries) from offset 0, and a
#: store time in the middle of that queue.
PULL_FIELDS = {
    "consumerGroup": "TOOLS_CONSUMER",
    "topic": "TopicA",
    "queueId": "1",
    "queueOffset": "0",
    "maxMsgNums": "32",
    "sysFlag": "4",
    "commitOffset": "0",
    "suspendTimeoutMillis": "20000",
    "subscription": "*",
    "subVersion": "0",
    "expressionType": "TAG",
}
SEARCH_FIELDS = {"topic": "TopicA", "queueId": "1", "timestamp": "1795216839851"}
KINDS = ("VIEW_MESSAGE_BY_ID", "QUERY_MESSAGE", "PULL_MESSAGE", "SEARCH_OFFSET_BY_TIMESTAMP")


def _request(code: int, ext_fields: dict[str, str], opaque: int) -> RemotingCommand:
    return RemotingCommand(
        code=code,
        language=LanguageCode.JAVA,
        version=407,
        opaque=opaque,
        ext_fields=ext_fields,
        serialize_type=SerializeType.JSON,
    )


def request_frame(kind: str, opaque: int = 1) -> bytes:
    if kind == "PULL_MESSAGE":
        return encode_frame(_request(RequestCode.PULL_MESSAGE, PULL_FIELDS, opaque))
    if kind == "SEARCH_OFFSET_BY_TIMESTAMP":
        return encode_frame(_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, SEARCH_FIELDS, opaque))
    if kind == "VIEW_MESSAGE_BY_ID":
        return encode_frame(_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(VIEW_OFFSET)}, opaque))
    fields = {
        "topic": QUERY_TOPIC,
        "key": QUERY_KEY,
        "maxNum": "64",
        "beginTimestamp": "0",
        "endTimestamp": str(2**63 - 1),
        "_UNIQUE_KEY_QUERY": "false",
    }
    return encode_frame(_request(RequestCode.QUERY_MESSAGE, fields, opaque))


# -- servers (each runs in its own process) ------------------------------------------------------


def _use_uvloop() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def _run_query_server(config_path: str, port: int, ready: Connection) -> None:
    from server.app import QueryServer, ServerSettings
    from store.config.store_config import StoreConfig
    from store.message_store import MessageStore

    config = StoreConfig.load(config_path)
    store = MessageStore.open(config)

    async def main() -> None:
        settings = ServerSettings(
            host="127.0.0.1",
            port=port,
            cluster=config.broker_cluster_name,
            broker_name=config.broker_name,
            reuse_port=True,
        )
        server = QueryServer(store, settings)
        await server.start()
        ready.send(server.port)
        await asyncio.Event().wait()

    with asyncio.Runner(loop_factory=_use_uvloop()) as runner:
        runner.run(main())


class _CeilingProtocol(asyncio.Protocol):
    """Answers each whole frame with a fixed pre-encoded frame: no decoding, no work."""

    def __init__(self, answers: dict[int, bytes]) -> None:
        self._answers = answers
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self._buffer
        buf += data
        pos, size = 0, len(buf)
        out = []
        while size - pos >= 8:
            (length,) = _LENGTH.unpack_from(buf, pos)
            if size - pos - 4 < length:
                break
            # The request kind is told apart by its frame length, fixed per kind in this benchmark.
            out.append(self._answers[length])
            pos += 4 + length
        del buf[:pos]
        if out and self._transport is not None:
            self._transport.writelines(out)


def _run_ceiling_server(answers: dict[int, bytes], port: int, ready: Connection) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: _CeilingProtocol(answers), "127.0.0.1", port, reuse_port=True
        )
        ready.send(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    with asyncio.Runner(loop_factory=_use_uvloop()) as runner:
        runner.run(main())


# -- load generator ------------------------------------------------------------------------------


class _LoadProtocol(asyncio.Protocol):
    """Keeps ``depth`` copies of one request in flight; records each answer's latency."""

    def __init__(
        self, frame: bytes, depth: int, stop_at: float, measure_from: float, record: list[float]
    ) -> None:
        self._frame = frame
        self._depth = depth
        self._stop_at = stop_at
        self._measure_from = measure_from
        self._record = record
        self._sent: deque[float] = deque()
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        now = time.perf_counter()
        for _ in range(self._depth):
            self._sent.append(now)
        transport.write(self._frame * self._depth)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        buf = self._buffer
        buf += data
        pos, size = 0, len(buf)
        now = time.perf_counter()
        answered = 0
        while size - pos >= 4:
            (length,) = _LENGTH.unpack_from(buf, pos)
            if size - pos - 4 < length:
                break
            pos += 4 + length
            sent = self._sent.popleft()
            if sent >= self._measure_from:
                self._record.append(now - sent)
            answered += 1
        del buf[:pos]
        if not answered:
            return
        if now < self._stop_at:
            for _ in range(answered):
                self._sent.append(now)
            assert self._transport is not None
            self._transport.write(self._frame * answered)
        elif not self._sent and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _check_answer(port: int, frame: bytes) -> int:
    """One request answered SUCCESS; returns the answer's frame size."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(frame)
        prefix = await reader.readexactly(4)
        rest = await reader.readexactly(_LENGTH.unpack(prefix)[0])
        answer = decode_frame(prefix + rest)
        if answer.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"benchmark request answered {answer.code}: {answer.remark}")
        return len(prefix) + len(rest)
    finally:
        writer.close()


def _run_load(
    port: int,
    frame: bytes,
    connections: int,
    depth: int,
    duration: float,
    warmup: float,
    check: bool,
    out: Connection,
) -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        if check:
            await _check_answer(port, frame)
        start = time.perf_counter()
        measure_from = start + warmup
        stop_at = measure_from + duration
        record: list[float] = []
        protocols = []
        for _ in range(connections):
            _, proto = await loop.create_connection(
                lambda: _LoadProtocol(frame, depth, stop_at, measure_from, record), "127.0.0.1", port
            )
            protocols.append(proto)
        await asyncio.wait_for(asyncio.gather(*(p.done for p in protocols)), duration + warmup + 30)
        return record

    with asyncio.Runner(loop_factory=_use_uvloop()) as runner:
        out.send(runner.run(main()))


@dataclass(slots=True)
class Result:
    server: str
    kind: str
    connections: int
    depth: int
    requests_per_second: float
    p50_ms: float
    p99_ms: float


def measure(
    port: int,
    kind: str,
    connections: int,
    depth: int,
    duration: float,
    warmup: float,
    client_procs: int,
    *,
    check: bool,
) -> tuple[float, float, float]:
    frame = request_frame(kind)
    procs = min(client_procs, connections)
    shares = [connections // procs + (1 if i < connections % procs else 0) for i in range(procs)]
    pipes, workers = [], []
    for share in shares:
        parent, child = mp.Pipe(duplex=False)
        worker = mp.Process(
            target=_run_load, args=(port, frame, share, depth, duration, warmup, check, child)
        )
        worker.start()
        pipes.append(parent)
        workers.append(worker)
    latencies: list[float] = []
    for pipe in pipes:
        latencies.extend(pipe.recv())
    for worker in workers:
        worker.join()
    latencies.sort()
    count = len(latencies)
    if not count:
        raise RuntimeError("no answers measured")
    p50 = latencies[count // 2] * 1000
    p99 = latencies[min(count - 1, int(count * 0.99))] * 1000
    return count / duration, p50, p99


def _start(
    target: Callable[..., None], args: tuple[object, ...], workers: int
) -> tuple[list[mp.Process], int]:
    procs: list[mp.Process] = []
    port = _free_port()
    for _ in range(workers):
        parent, child = mp.Pipe(duplex=False)
        proc = mp.Process(target=target, args=(*args, port, child), daemon=True)
        proc.start()
        if not parent.poll(60):
            raise RuntimeError("server did not start")
        parent.recv()
        procs.append(proc)
    return procs, port


def _free_port() -> int:
    # A P whose P - 2 is free too (the query server binds both).
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port - 2))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair")


def _stop(procs: list[mp.Process]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.join(10)


SCENARIOS = [(1, 1), (16, 8), (64, 8)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.server_load", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--stores", type=Path, default=DEFAULT_STORE, help="directory holding java-4.9.7-a")
    parser.add_argument("--duration", type=float, default=3.0, help="measured seconds per run (default 3)")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds per run (default 0.5)")
    parser.add_argument("--depth", type=int, default=8, help="requests in flight per connection (default 8)")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1], help="server process counts to compare"
    )
    parser.add_argument("--client-procs", type=int, default=1, help="load generator processes (default 1)")
    parser.add_argument(
        "--kinds", nargs="+", choices=KINDS, default=list(KINDS[:2]), help="requests to measure"
    )
    parser.add_argument("--target", type=int, help="measure the server already listening on this port")
    parser.add_argument("--target-name", default="external", help="its name in the table")
    args = parser.parse_args(argv)
    scenarios = [(c, 1 if c == 1 else args.depth) for c, _ in SCENARIOS]
    if args.target is not None:
        return _measure_target(args, scenarios)

    with tempfile.TemporaryDirectory(prefix="rmq-bench-") as tmp:
        store_copy = Path(tmp) / "java-4.9.7-a"
        shutil.copytree(args.stores / "java-4.9.7-a", store_copy)
        conf = Path(tmp) / "java-4.9.7-a.broker.conf"
        shutil.copy(args.stores / "java-4.9.7-a.broker.conf", conf)

        results: list[Result] = []
        answer_sizes: dict[str, int] = {}
        for workers in args.workers:
            procs, port = _start(_run_query_server, (str(conf),), workers)
            try:
                for kind in args.kinds:
                    answer_sizes[kind] = asyncio.run(_check_answer(port, request_frame(kind)))
                    for connections, depth in scenarios:
                        rps, p50, p99 = measure(
                            port,
                            kind,
                            connections,
                            depth,
                            args.duration,
                            args.warmup,
                            args.client_procs,
                            check=True,
                        )
                        results.append(
                            Result(f"query server x{workers}", kind, connections, depth, rps, p50, p99)
                        )
                        print(_row(results[-1]), file=sys.stderr, flush=True)
            finally:
                _stop(procs)

        # The ceiling: same answer sizes, no work.
        answers = {}
        for kind, size in answer_sizes.items():
            req_len = len(request_frame(kind)) - 4
            answers[req_len] = struct.pack(">ii", size - 4, 0) + bytes(size - 8)
        for workers in args.workers:
            procs, port = _start(_run_ceiling_server, (answers,), workers)
            try:
                for kind in args.kinds:
                    for connections, depth in scenarios:
                        rps, p50, p99 = measure(
                            port,
                            kind,
                            connections,
                            depth,
                            args.duration,
                            args.warmup,
                            args.client_procs,
                            check=False,
                        )
                        results.append(Result(f"ceiling x{workers}", kind, connections, depth, rps, p50, p99))
                        print(_row(results[-1]), file=sys.stderr, flush=True)
            finally:
                _stop(procs)

    _print_table(results, answer_sizes, args.kinds)
    return 0


def _measure_target(args: argparse.Namespace, scenarios: list[tuple[int, int]]) -> int:
    results: list[Result] = []
    answer_sizes: dict[str, int] = {}
    for kind in args.kinds:
        answer_sizes[kind] = asyncio.run(_check_answer(args.target, request_frame(kind)))
        for connections, depth in scenarios:
            rps, p50, p99 = measure(
                args.target,
                kind,
                connections,
                depth,
                args.duration,
                args.warmup,
                args.client_procs,
                check=True,
            )
            results.append(Result(args.target_name, kind, connections, depth, rps, p50, p99))
            print(_row(results[-1]), file=sys.stderr, flush=True)
    _print_table(results, answer_sizes, args.kinds)
    return 0


def _print_table(results: list[Result], answer_sizes: dict[str, int], kinds: list[str]) -> None:
    print(f"answer sizes: {answer_sizes}; cpus: {os.cpu_count()}; python {sys.version.split()[0]}")
    print("| server | request | connections x in flight | requests/s | p50 ms | p99 ms |")
    print("|---|---|---|---:|---:|---:|")
    for kind in kinds:
        for r in results:
            if r.kind == kind:
                print(_row(r))


def _row(r: Result) -> str:
    return (
        f"| {r.server} | {r.kind} | {r.connections} x {r.depth} | {r.requests_per_second:,.0f} "
        f"| {r.p50_ms:.3f} | {r.p99_ms:.3f} |"
    )


if __name__ == "__main__":
    sys.exit(main())
