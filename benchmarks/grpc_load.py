"""gRPC calls from a Go load generator, checkout B against a base checkout A (issue 33).

    flock -o /work/bench.lock python -m benchmarks.grpc_load --base DIR [--rounds 2] [--seconds 5]
        [--warmup 2] [--rows send:1,send:32,send:128,receive-each:32,receive-batch:32]
        [--generators go,python] [--body 1024] [--receive-batch 32] [--prefill 100000]
        [--grpc-tls permissive|disabled] [--port 21200]

The Python grpcio generator (``grpc_send``) ran near its own core's limit at the server's rate, so
it could not tell the server's ceiling from its own. ``grpc_load.go`` sends request bytes serialized
here beforehand (the server's own v2 stubs) through grpc-go with a codec that passes bytes as they
are; it is built into a temporary directory at each run (Go and grpc-go from ``/usr/share/gocode``,
offline). The Python generator of the same loops (``--generators python``: grpcio's asyncio channel
with the same bytes and no serializers) shows which one was the limit.

Each round starts ``serve --writable`` of A and of B (order reversed every round) on core 1 on a
fresh store (``--grpc-port`` = its port + 3, TLS as ``--grpc-tls``, HTTP off); the generator runs
on core 0, one connection per 64 calls in flight (the server allows 100 streams on one). A row is
``KIND:IN_FLIGHT``:

- ``send``: SendMessage, one ``--body``-byte NORMAL message a call (a 5.x producer's send).
- ``receive-each`` / ``receive-batch``: a SimpleConsumer's loop over a topic filled beforehand
  with ``--prefill`` messages through the remoting port: ReceiveMessage of up to ``--receive-batch``
  messages, then one AckMessage per message or one for all of them.

Printed: per row and generator, calls/s of the row's main call (and messages/s for the receives),
the p50 / p99 of that call, the server's CPU (``/proc/PID/stat``, all its threads, over the measured
seconds) per send call or per message received, the median over rounds, and B / A per round.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import alternating, vs_java

REPO = Path(__file__).resolve().parents[1]
GO_SOURCE = Path(__file__).with_name("grpc_load.go")
#: Where Go's own packages and grpc-go are installed (Debian's golang-google-grpc-dev).
GOPATH = "/usr/share/gocode"
SEND_TOPIC = "GrpcLoadSend"
GROUP = "GrpcLoadGroup"
CLIENT_ID = "bench-grpc-load"
META = (("x-mq-client-id", CLIENT_ID), ("x-mq-protocol", "GRPC_V2"), ("x-mq-language", "PYTHON"))
KINDS = ("send", "receive-each", "receive-batch")
#: A fresh topic for each receive row, filled before it.
_topics = itertools.count()


@dataclass(frozen=True)
class Row:
    kind: str
    inflight: int

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.inflight}"

    @property
    def main_call(self) -> str:
        return "send" if self.kind == "send" else "receive"


def parse_rows(text: str) -> list[Row]:
    rows = []
    for item in text.split(","):
        kind, _, inflight = item.strip().partition(":")
        if kind not in KINDS or not inflight.isdigit() or int(inflight) < 1:
            raise SystemExit(f"--rows: {item!r} is not KIND:IN_FLIGHT with KIND one of {', '.join(KINDS)}")
        rows.append(Row(kind, int(inflight)))
    return rows


def build_go(workdir: Path) -> Path | None:
    """``grpc_load.go`` built into ``workdir``; None (and why, on stderr) without a Go toolchain."""
    go = shutil.which("go")
    if go is None:
        print("grpc_load: no `go` on PATH: the Go generator is skipped", file=sys.stderr)
        return None
    out = workdir / "grpc_load"
    env = {**os.environ, "GOPATH": GOPATH, "GO111MODULE": "off", "GOCACHE": str(workdir / "gocache")}
    done = subprocess.run(
        [go, "build", "-o", str(out), str(GO_SOURCE)], env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        print(f"grpc_load: building {GO_SOURCE.name} failed, Go skipped:\n{done.stderr}", file=sys.stderr)
        return None
    return out


#: Calls in flight one connection carries (below the server's 100 concurrent streams).
CALLS_PER_CONNECTION = 64


def connections(inflight: int) -> int:
    """The connections ``inflight`` calls are spread over, by both generators."""
    return -(-inflight // CALLS_PER_CONNECTION)


def frames(requests: list[bytes]) -> bytes:
    """The requests file the generators read: each request as a 4-byte big-endian length, its bytes."""
    return b"".join(struct.pack(">I", len(r)) + r for r in requests)


def send_requests(body_size: int, count: int = 64) -> list[bytes]:
    """``count`` SendMessageRequests of one NORMAL message each, distinct message ids."""
    from protocol.message_id import UniqueIdGenerator
    from server.grpc.v2 import MessageType, definition, service

    ids = UniqueIdGenerator()
    body = b"x" * body_size
    out = []
    for _ in range(count):
        message = definition.Message(topic=definition.Resource(name=SEND_TOPIC), body=body)
        message.system_properties.message_id = ids.next_id()
        message.system_properties.message_type = MessageType.NORMAL
        out.append(service.SendMessageRequest(messages=[message]).SerializeToString())
    return out


def receive_request(topic: str, batch: int) -> bytes:
    """The SimpleConsumer's ReceiveMessage: any queue of the topic, ``batch`` messages, 30 s invisible."""
    from google.protobuf.duration_pb2 import Duration

    from server.grpc.v2 import definition, service

    return service.ReceiveMessageRequest(
        group=definition.Resource(name=GROUP),
        message_queue=definition.MessageQueue(topic=definition.Resource(name=topic), id=-1),
        filter_expression=definition.FilterExpression(type=definition.FilterType.TAG, expression="*"),
        batch_size=batch,
        invisible_duration=Duration(seconds=30),
        long_polling_timeout=Duration(seconds=5),
    ).SerializeToString()


def ack_prefix(topic: str) -> bytes:
    """An AckMessageRequest's group and topic; the generators append one entry per message."""
    from server.grpc.v2 import definition, service

    return service.AckMessageRequest(
        group=definition.Resource(name=GROUP), topic=definition.Resource(name=topic)
    ).SerializeToString()


async def prepare(remoting: str, topic: str, prefill: int, body_size: int) -> None:
    """Create ``topic`` (from TBW102) and put ``prefill`` messages on it through the remoting port."""
    from clients.producer import OutgoingMessage, Producer

    async with Producer(remoting, timeout=30.0) as producer:
        await producer.send(topic, b"create")
        batch = [OutgoingMessage(b"r" * body_size) for _ in range(64)]
        left = prefill

        async def filler() -> None:
            nonlocal left
            while left > 0:
                left -= len(batch)
                await producer.send_batch(topic, batch)

        await asyncio.gather(*(filler() for _ in range(8)))


# -- the Python generator: the same loops over grpcio's asyncio channel ----------------------------


class _Recorder:
    def __init__(self, counted: float) -> None:
        self.counted = counted
        self.took: dict[str, list[float]] = {}
        self.errors: dict[str, int] = {}
        self.messages = 0
        self.empty = 0

    def add(self, kind: str, started: float, ok: bool) -> None:
        if started < self.counted:
            return
        if not ok:
            self.errors[kind] = self.errors.get(kind, 0) + 1
        else:
            self.took.setdefault(kind, []).append(time.perf_counter() - started)


async def python_generator(
    addr: str, row: Row, requests: list[bytes], prefix_bytes: bytes, warmup: float, seconds: float
) -> dict:
    """``row`` from grpcio's asyncio channel, request bytes as they are; the Go program's JSON."""
    import grpc

    from server.grpc.v2 import Code, service

    prefix = "/apache.rocketmq.v2.MessagingService/"
    counted = time.perf_counter() + warmup
    stop = counted + seconds
    recorder = _Recorder(counted)
    # one connection per CALLS_PER_CONNECTION calls, as the Go program gets -conns: the server
    # refuses streams past its max_concurrent_streams (100) on one connection
    own = [("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(addr, options=own) for _ in range(connections(row.inflight))]
    try:
        sends = [c.unary_unary(prefix + "SendMessage") for c in channels]
        receives = [c.unary_stream(prefix + "ReceiveMessage") for c in channels]
        acks = [c.unary_unary(prefix + "AckMessage") for c in channels]

        async def sender(worker: int) -> None:
            send = sends[worker % len(sends)]
            i = worker
            while time.perf_counter() < stop:
                started = time.perf_counter()
                answer = service.SendMessageResponse.FromString(
                    await send(requests[i % len(requests)], metadata=META, timeout=30)
                )
                recorder.add("send", started, answer.status.code == Code.OK)
                i += 1

        async def consumer(worker: int) -> None:
            receive, ack = receives[worker % len(receives)], acks[worker % len(acks)]
            while time.perf_counter() < stop:
                started = time.perf_counter()
                got, ok = [], True
                async for raw in receive(requests[0], metadata=META, timeout=30):
                    response = service.ReceiveMessageResponse.FromString(raw)
                    which = response.WhichOneof("content")
                    if which == "status":
                        ok = ok and response.status.code in (Code.OK, Code.MESSAGE_NOT_FOUND)
                    elif which == "message":
                        p = response.message.system_properties
                        got.append(
                            service.AckMessageEntry(message_id=p.message_id, receipt_handle=p.receipt_handle)
                        )
                recorder.add("receive", started, ok)
                if started >= counted:
                    recorder.messages += len(got)
                    recorder.empty += not got
                batches = [got] if row.kind == "receive-batch" else [[e] for e in got]
                for entries in batches if got else []:
                    request = service.AckMessageRequest.FromString(prefix_bytes)
                    request.entries.extend(entries)
                    started = time.perf_counter()
                    answer = service.AckMessageResponse.FromString(
                        await ack(request.SerializeToString(), metadata=META, timeout=30)
                    )
                    recorder.add("ack", started, answer.status.code == Code.OK)

        if row.kind == "send":
            work = [sender(w) for w in range(row.inflight)]
        else:
            work = [consumer(w) for w in range(row.inflight)]
        await asyncio.gather(*work)
    finally:
        for channel in channels:
            await channel.close()
    out: dict = {"mode": row.main_call, "inflight": row.inflight}
    for kind in ("send", "receive", "ack"):
        took = sorted(recorder.took.get(kind, []))
        if not took and not recorder.errors.get(kind):
            continue
        out[kind] = {
            "calls": len(took),
            "calls_per_s": len(took) / seconds,
            "p50_ms": took[len(took) // 2] * 1000 if took else 0.0,
            "p99_ms": took[min(len(took) - 1, len(took) * 99 // 100)] * 1000 if took else 0.0,
            "errors": recorder.errors.get(kind, 0),
        }
    if row.kind != "send":
        out["messages_per_s"] = recorder.messages / seconds
        out["empty_receives"] = recorder.empty
    return out


# -- the driver ------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """The user + system CPU seconds process ``pid`` (all its threads) has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_row(
    generator: str,
    go_binary: Path | None,
    server: vs_java.Server,
    row: Row,
    work: Path,
    args: argparse.Namespace,
) -> dict:
    """One row against ``server`` from ``generator`` pinned to the load core: the generator's JSON."""
    addr = f"127.0.0.1:{server.port + 3}"
    topic = f"GrpcLoadReceive{next(_topics)}"
    if row.kind == "send":
        requests = send_requests(args.body)
    else:
        asyncio.run(prepare(f"127.0.0.1:{server.port}", topic, args.prefill, args.body))
        requests = [receive_request(topic, args.receive_batch)]
    (work / "requests").write_bytes(frames(requests))
    (work / "ack_prefix").write_bytes(ack_prefix(topic))
    timing = ["--warmup", str(args.warmup), "--seconds", str(args.seconds)]
    pin = ["taskset", "-c", vs_java.LOAD_CORE]
    if generator == "go":
        assert go_binary is not None
        cmd = [*pin, str(go_binary), "-addr", addr, "-mode", row.main_call, "-inflight", str(row.inflight)]
        cmd += ["-requests", str(work / "requests"), "-ack-prefix", str(work / "ack_prefix")]
        cmd += ["-ack", "each" if row.kind == "receive-each" else "batch", "-client-id", CLIENT_ID]
        cmd += ["-conns", str(connections(row.inflight))]
        cmd += ["-warmup", str(args.warmup), "-seconds", str(args.seconds)]
    else:
        cmd = [*pin, sys.executable, "-m", "benchmarks.grpc_load", "--child", addr, row.label, str(work)]
        cmd += timing
    # the server's CPU over the measured seconds: read at the end of the warm-up and at the end
    marks: list[float] = []
    timers = [
        threading.Timer(at, lambda: marks.append(cpu_seconds(server.process.pid)))
        for at in (args.warmup, args.warmup + args.seconds)
    ]
    for timer in timers:
        timer.start()
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, cwd=REPO, timeout=args.warmup + args.seconds + 120
        )
    finally:
        for timer in timers:
            timer.cancel()
    if done.returncode != 0:
        raise RuntimeError(f"{generator} generator, row {row.label}: exit {done.returncode}\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if len(marks) == 2:
        result["server_cpu_s"] = marks[1] - marks[0]
    print(f"  {server.name} {generator} {json.dumps(result)}", file=sys.stderr, flush=True)
    return result


def measure(server: vs_java.Server, go_binary: Path | None, args: argparse.Namespace) -> dict:
    """Every (generator, row) against ``server``: (generator, row label) -> the generator's JSON."""
    asyncio.run(prepare(f"127.0.0.1:{server.port}", SEND_TOPIC, 0, args.body))
    out = {}
    with tempfile.TemporaryDirectory(prefix="grpc-load-row-") as tmp:
        for generator in args.generators:
            for row in args.rows:
                out[f"{generator} {row.label}"] = run_row(generator, go_binary, server, row, Path(tmp), args)
    return out


def value(result: dict, row: Row, key: str) -> float:
    if key == "messages_per_s":
        return float(result.get("messages_per_s", 0.0))
    if key == "cpu_us_per_unit":
        # the server's CPU per call of the row's main call (a send), or per message received (a
        # receive and its share of the acks)
        done = result.get(row.main_call, {}).get("calls", 0) if row.kind == "send" else None
        if done is None:
            seconds = result.get(row.main_call, {}).get("calls", 0) / max(
                value(result, row, "calls_per_s"), 1e-9
            )
            done = result.get("messages_per_s", 0.0) * seconds
        cpu = result.get("server_cpu_s")
        return cpu * 1e6 / done if cpu is not None and done else float("nan")
    return float(result.get(row.main_call, {}).get(key, float("nan")))


def print_table(runs: dict[str, list[dict]], names: list[str], args: argparse.Namespace) -> None:
    print(
        f"load average {os.getloadavg()}; cpu {alternating.cpu_model()}; {args.rounds} rounds of "
        f"{args.seconds} s a row; gRPC TLS {args.grpc_tls}; {args.body} B bodies; "
        f"receive batch {args.receive_batch}"
    )
    print("| generator, row | " + " | ".join(names) + (" | B / A |" if "A" in names else " |"))
    print("|---|" + "---:|" * (len(names) + ("A" in names)))
    for generator in args.generators:
        for row in args.rows:
            key = f"{generator} {row.label}"
            measures = [("calls_per_s", f"{row.main_call} calls/s", True)]
            if row.kind != "send":
                measures.append(("messages_per_s", "msgs/s", True))
            measures += [("p50_ms", "p50 ms", False), ("p99_ms", "p99 ms", False)]
            unit = "call" if row.kind == "send" else "msg"
            measures.append(("cpu_us_per_unit", f"server CPU us per {unit}", False))
            for field, label, larger in measures:
                cells = [
                    f"{statistics.median(value(r[key], row, field) for r in runs[n]):,.2f}" for n in names
                ]
                if "A" in names:
                    per = []
                    for a, b in zip(runs["A"], runs["B"], strict=True):
                        va, vb = value(a[key], row, field), value(b[key], row, field)
                        per.append((vb / va if larger else va / vb) if va and vb else float("nan"))
                    cells.append(alternating.ratio_cell(per))
                errors = sum(
                    r[key].get(call, {}).get("errors", 0)
                    for n in names
                    for r in runs[n]
                    for call in ("send", "receive", "ack")
                )
                empty = sum(r[key].get("empty_receives", 0) for n in names for r in runs[n])
                suffix = f" ({errors} errors)" if errors else ""
                suffix += f" ({empty} receives found nothing: raise --prefill)" if empty else ""
                print(f"| {generator} {row.label}, {label}{suffix} | " + " | ".join(cells) + " |")
    print("(B / A: larger is better; for latencies A / B)")


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.grpc_load", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--base", type=Path, help="a built checkout to compare against (A)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rows", default="send:1,send:32,send:128,receive-each:32,receive-batch:32")
    parser.add_argument("--generators", default="go,python", help="go, python or both, comma-separated")
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--receive-batch", type=int, default=32)
    parser.add_argument(
        "--prefill", type=int, default=80_000, help="messages put first on a receive row's topic"
    )
    parser.add_argument("--grpc-tls", choices=("permissive", "disabled"), default="permissive")
    parser.add_argument("--port", type=int, default=21200)
    parser.add_argument("--child", nargs=3, metavar=("GRPC", "ROW", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        addr, label, work = args.child
        (row,) = parse_rows(label)
        raw = (Path(work) / "requests").read_bytes()
        requests, at = [], 0
        while at < len(raw):
            (n,) = struct.unpack_from(">I", raw, at)
            requests.append(raw[at + 4 : at + 4 + n])
            at += 4 + n
        prefix_bytes = (Path(work) / "ack_prefix").read_bytes()
        result = asyncio.run(python_generator(addr, row, requests, prefix_bytes, args.warmup, args.seconds))
        print(json.dumps(result))
        return 0
    args.rows = parse_rows(args.rows)
    args.generators = [g for g in args.generators.split(",") if g]
    if set(args.generators) - {"go", "python"}:
        raise SystemExit("--generators: go and/or python")
    names = ["B"] if args.base is None else ["A", "B"]
    with tempfile.TemporaryDirectory(prefix="grpc-load-go-") as gotmp:
        go_binary = build_go(Path(gotmp)) if "go" in args.generators else None
        if go_binary is None and "go" in args.generators:
            args.generators.remove("go")
            if not args.generators:
                print("grpc_load: nothing to run without Go (add --generators python)", file=sys.stderr)
                return 0

        def start(name: str, work: Path, port: int) -> vs_java.Server:
            checkout = REPO if name == "B" else args.base
            (work / "store").mkdir()
            server = alternating.start_writable(
                checkout,
                work / "store",
                port,
                work / "serve.log",
                *("--grpc-port", str(port + 3), "--grpc-tls", args.grpc_tls, "--http", "off"),
            )
            server.name = name
            return server

        runs = alternating.alternate(
            names, args.rounds, args.port, start, lambda s: measure(s, go_binary, args), "grpc-load-"
        )
    print_table(runs, names, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
