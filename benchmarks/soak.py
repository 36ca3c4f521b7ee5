"""Bounded soak of ``rmq-query serve``: many connections, pipelined mixed requests, a stalled reader.

    python -m benchmarks.soak [--duration 60] [--connections 64] [--depth 8] [--json]

Starts ``rmq-query serve`` as its own process over a copy of the Java-written store
(``../shared/stores/java-4.9.7-a``) on 127.0.0.1, then for ``--duration`` seconds:

* ``--connections`` connections each keep ``--depth`` requests in flight, cycling through a mix whose
  every answer code is known (found and not-found key and unique-key queries, good and garbage
  offsets, routes for known and unknown topics, heartbeats, an unknown code) and checking each
  answer's code and opaque: any mismatch, lost connection or answer later than ``--timeout`` is an
  error;
* one *slow reader* connection pipelines ``--stall-requests`` large queries and then does not read
  during the middle third of the run, so the server must hold it back (backpressure) while
  everyone else is served; it then reads and checks every answer;
* once a second a *garbage* connection sends a malformed frame and must be closed by the server;
* the server's RSS is sampled every second from ``/proc/<pid>/status``.

The report: requests answered and errors; RSS at start (after the first second), max and end;
latency p50/p99/max of the other connections before, during and after the stall; the slow reader's
answers. The exit status is 1 if there was any error, so the script doubles as a check. The test
suite runs a few-second version (``tests/benchmarks/test_soak.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, encode_frame

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_STORE = REPO_ROOT / "tests" / "golden" / "stores" / "java-4.9.7-a"
SERVING = re.compile(r"serving on 127\.0\.0\.1:(\d+)")

#: (request code, extFields, body, the answer code it must get, serialization).
Mix = tuple[int, dict[str, str], bytes | None, int, SerializeType]

_FOREVER = str(2**63 - 1)


def _query(topic: str, key: str, unique: bool = False) -> dict[str, str]:
    return {
        "topic": topic,
        "key": key,
        "maxNum": "64",
        "beginTimestamp": "0",
        "endTimestamp": _FOREVER,
        "_UNIQUE_KEY_QUERY": "true" if unique else "false",
    }


MIX: tuple[Mix, ...] = (
    (RequestCode.QUERY_MESSAGE, _query("TopicA", "k-3"), None, ResponseCode.SUCCESS, SerializeType.JSON),
    (RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "17457"}, None, ResponseCode.SUCCESS, SerializeType.ROCKETMQ),
    (
        RequestCode.QUERY_MESSAGE,
        _query("TopicA", "no-such-key"),
        None,
        ResponseCode.QUERY_NOT_FOUND,
        SerializeType.JSON,
    ),
    (RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"}, None, ResponseCode.SUCCESS, SerializeType.JSON),
    (
        RequestCode.VIEW_MESSAGE_BY_ID,
        {"offset": str(2**40)},
        None,
        ResponseCode.SYSTEM_ERROR,
        SerializeType.JSON,
    ),
    (
        RequestCode.QUERY_MESSAGE,
        _query("TopicA", "0" * 32, True),
        None,
        ResponseCode.QUERY_NOT_FOUND,
        SerializeType.ROCKETMQ,
    ),
    (
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"topic": "NoSuchTopic"},
        None,
        ResponseCode.TOPIC_NOT_EXIST,
        SerializeType.JSON,
    ),
    (
        RequestCode.HEART_BEAT,
        {},
        b'{"clientID":"soak","producerDataSet":[]}',
        ResponseCode.SUCCESS,
        SerializeType.JSON,
    ),
    (
        RequestCode.VIEW_MESSAGE_BY_ID,
        {"offset": "garbage"},
        None,
        ResponseCode.SYSTEM_ERROR,
        SerializeType.JSON,
    ),
    (9999, {}, None, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, SerializeType.JSON),
)

GARBAGE = (
    b"\xff\xff\xff\xfb" + b"\0" * 8,  # negative length
    b"\x00\x00\x00\x10\x00\x00\x00\x0c{not json!!}",  # undecodable header
    b"\x7f\xff\xff\xff",  # 2 GiB frame
    b"\x00\x00\x00\x0a\x07\x00\x00\x02{}\0\0\0\0",  # unknown serialization
)


def _command(
    code: int, fields: dict[str, str], body: bytes | None, opaque: int, st: SerializeType
) -> RemotingCommand:
    return RemotingCommand(
        code=code,
        language=LanguageCode.JAVA,
        version=409,
        opaque=opaque,
        ext_fields=dict(fields),
        body=body,
        serialize_type=st,
    )


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50 / p99 / max in milliseconds (zeros when there are no samples)."""
    if not samples:
        return {"count": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {"count": len(ordered), "p50_ms": pick(0.50), "p99_ms": pick(0.99), "max_ms": pick(1.0)}


@dataclass
class Stats:
    """What the run observed."""

    answered: int = 0
    errors: list[str] = field(default_factory=list)
    latency: dict[str, list[float]] = field(
        default_factory=lambda: {"before": [], "stalled": [], "after": []}
    )
    rss_kib: list[int] = field(default_factory=list)
    garbage_sent: int = 0
    garbage_closed: int = 0
    slow_expected: int = 0
    slow_answered: int = 0
    slow_paused_server: bool = False

    def error(self, text: str) -> None:
        if len(self.errors) < 50:
            self.errors.append(text)
        else:
            self.errors[-1] = f"... and more ({text})"


class Phase:
    """Which part of the run a moment belongs to: before, during or after the reader's stall."""

    def __init__(self, start: float, duration: float) -> None:
        self.stall_from = start + duration / 3
        self.stall_to = start + 2 * duration / 3

    def at(self, now: float) -> str:
        if now < self.stall_from:
            return "before"
        return "stalled" if now < self.stall_to else "after"


class LoadConnection(asyncio.Protocol):
    """Keeps ``depth`` requests from ``MIX`` in flight; checks every answer's code and latency."""

    def __init__(self, index: int, depth: int, stop_at: float, phase: Phase, stats: Stats) -> None:
        self._mix = _cycle(index)
        self._depth = depth
        self._stop_at = stop_at
        self._phase = phase
        self._stats = stats
        self._decoder = FrameDecoder()
        self._pending: dict[int, tuple[float, int]] = {}
        self._next_opaque = 1
        self._transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._send(self._depth)

    def _send(self, count: int) -> None:
        assert self._transport is not None
        frames = []
        now = time.perf_counter()
        for _ in range(count):
            code, fields, body, expect, st = next(self._mix)
            opaque = self._next_opaque
            self._next_opaque += 1
            self._pending[opaque] = (now, expect)
            frames.append(encode_frame(_command(code, fields, body, opaque, st)))
        self._transport.write(b"".join(frames))

    def data_received(self, data: bytes) -> None:
        try:
            answers = self._decoder.feed(data)
        except FrameError as exc:
            self._stats.error(f"undecodable answer: {exc}")
            self._finish()
            return
        now = time.perf_counter()
        for answer in answers:
            sent = self._pending.pop(answer.opaque, None)
            if sent is None:
                self._stats.error(f"answer to unknown opaque {answer.opaque}")
                continue
            started, expect = sent
            if answer.code != expect:
                self._stats.error(
                    f"opaque {answer.opaque}: code {answer.code} ({answer.remark}), expected {expect}"
                )
            self._stats.answered += 1
            self._stats.latency[self._phase.at(started)].append(now - started)
        if answers and now < self._stop_at:
            self._send(len(answers))
        elif not self._pending:
            self._finish()

    def pending_since(self) -> float | None:
        return min((t for t, _ in self._pending.values()), default=None)

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)
        if self._transport is not None:
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._pending:
            self._stats.error(f"connection lost with {len(self._pending)} request(s) unanswered: {exc}")
            self._pending.clear()
        if not self.done.done():
            self.done.set_result(None)


def _cycle(offset: int) -> Iterator[Mix]:
    index = offset
    while True:
        yield MIX[index % len(MIX)]
        index += 1


async def slow_reader(port: int, requests: int, phase: Phase, stats: Stats) -> None:
    """Pipeline ``requests`` large queries, read nothing until the stall ends, then check them all."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # small, so the server feels it
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        await asyncio.sleep(max(0.0, phase.stall_from - time.perf_counter()))
        code, fields, body, expect, st = MIX[0]
        frames = [encode_frame(_command(code, fields, body, i + 1, st)) for i in range(requests)]
        stats.slow_expected = requests
        writer.write(b"".join(frames))
        await writer.drain()
        await asyncio.sleep(max(0.0, phase.stall_to - time.perf_counter()))
        decoder = FrameDecoder()
        opaques = []
        while len(opaques) < requests:
            data = await asyncio.wait_for(reader.read(1 << 20), 30)
            if not data:
                stats.error(f"slow reader: closed after {len(opaques)} of {requests} answers")
                return
            for answer in decoder.feed(data):
                if answer.code != expect:
                    stats.error(f"slow reader: code {answer.code} ({answer.remark})")
                opaques.append(answer.opaque)
        stats.slow_answered = len(opaques)
        if opaques != list(range(1, requests + 1)):
            stats.error("slow reader: answers out of order")
    except (OSError, TimeoutError) as exc:
        stats.error(f"slow reader: {type(exc).__name__}: {exc}")
    finally:
        writer.close()


async def garbage_sender(port: int, stop_at: float, stats: Stats) -> None:
    """Once a second, a connection sending a malformed frame, which the server must close."""
    index = 0
    while time.perf_counter() < stop_at:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(GARBAGE[index % len(GARBAGE)])
        index += 1
        stats.garbage_sent += 1
        try:
            if await asyncio.wait_for(reader.read(), 5) == b"":
                stats.garbage_closed += 1
        except (TimeoutError, ConnectionError) as exc:
            stats.error(f"garbage connection not closed: {type(exc).__name__}")
        writer.close()
        await asyncio.sleep(1.0)


def rss_kib(pid: int) -> int:
    """The process's resident set size from /proc (KiB)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def sample_rss(pid: int, stop_at: float, stats: Stats) -> None:
    while time.perf_counter() < stop_at:
        stats.rss_kib.append(rss_kib(pid))
        await asyncio.sleep(1.0)
    stats.rss_kib.append(rss_kib(pid))


async def watchdog(connections: list[LoadConnection], stop_at: float, timeout: float, stats: Stats) -> None:
    """Count an answer later than ``timeout`` as an error (and stop waiting for it)."""
    while time.perf_counter() < stop_at + timeout:
        await asyncio.sleep(0.5)
        now = time.perf_counter()
        for conn in connections:
            since = conn.pending_since()
            if since is not None and now - since > timeout and not conn.done.done():
                stats.error(f"no answer within {timeout} s")
                conn._finish()


async def drive(port: int, pid: int, args: argparse.Namespace) -> Stats:
    loop = asyncio.get_running_loop()
    stats = Stats()
    start = time.perf_counter()
    stop_at = start + args.duration
    phase = Phase(start, args.duration)
    connections: list[LoadConnection] = []
    for index in range(args.connections):
        _, conn = await loop.create_connection(
            lambda i=index: LoadConnection(i, args.depth, stop_at, phase, stats), "127.0.0.1", port
        )
        connections.append(conn)
    tasks = [
        asyncio.ensure_future(slow_reader(port, args.stall_requests, phase, stats)),
        asyncio.ensure_future(garbage_sender(port, stop_at, stats)),
        asyncio.ensure_future(sample_rss(pid, stop_at, stats)),
    ]
    dog = asyncio.ensure_future(watchdog(connections, stop_at, args.timeout, stats))
    await asyncio.wait([c.done for c in connections], timeout=args.duration + args.timeout + 5)
    dog.cancel()
    await asyncio.gather(*tasks)
    return stats


def report(stats: Stats, args: argparse.Namespace) -> dict[str, object]:
    rss = stats.rss_kib
    baseline = rss[1] if len(rss) > 2 else (rss[0] if rss else 0)
    return {
        "duration_s": args.duration,
        "connections": args.connections,
        "depth": args.depth,
        "answered": stats.answered,
        "requests_per_s": round(stats.answered / args.duration),
        "errors": len(stats.errors),
        "error_samples": stats.errors[:5],
        "rss_mib": {
            "start": round(baseline / 1024, 1),
            "max": round(max(rss, default=0) / 1024, 1),
            "end": round((rss[-1] if rss else 0) / 1024, 1),
        },
        "latency_others": {phase: percentiles(samples) for phase, samples in stats.latency.items()},
        "slow_reader": {"sent": stats.slow_expected, "answered": stats.slow_answered},
        "garbage_connections": {"sent": stats.garbage_sent, "closed_by_server": stats.garbage_closed},
    }


def _store_copy(store: Path, into: Path) -> Path:
    shutil.copytree(store, into / store.name)
    shutil.copy(store.parent / f"{store.name}.broker.conf", into / f"{store.name}.broker.conf")
    return into / f"{store.name}.broker.conf"


async def run_soak(args: argparse.Namespace) -> dict[str, object]:
    """Start the server, drive it, stop it; the report (``serve_log_problems`` lists its ERRORs)."""
    with tempfile.TemporaryDirectory(prefix="rmq-soak-") as tmp:
        conf = _store_copy(args.store, Path(tmp))
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "clients.cli",
            "serve",
            "--config",
            str(conf),
            "--port",
            "0",
            "--log-level",
            "INFO",
            *args.serve_arg,
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert proc.stderr is not None
        log_lines: list[str] = []
        try:
            port = 0
            while not port:
                line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
                if not line:
                    raise RuntimeError("serve exited early:\n" + "".join(log_lines))
                log_lines.append(line)
                match = SERVING.search(line)
                port = int(match.group(1)) if match else 0

            async def drain_log() -> None:
                assert proc.stderr is not None
                async for raw in proc.stderr:
                    log_lines.append(raw.decode())

            drainer = asyncio.ensure_future(drain_log())
            stats = await drive(port, proc.pid, args)
        finally:
            if proc.returncode is None:
                proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
        await drainer
    result = report(stats, args)
    problems = [line.strip() for line in log_lines if " ERROR " in line or "Traceback" in line]
    result["serve_log_problems"] = problems[:5]
    result["serve_exit_status"] = proc.returncode
    if problems:
        result["errors"] = int(result["errors"]) + len(problems)  # type: ignore[call-overload]
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (default %(default)s)")
    parser.add_argument("--connections", type=int, default=64, help="load connections (default %(default)s)")
    parser.add_argument(
        "--depth", type=int, default=8, help="requests in flight per connection (default %(default)s)"
    )
    parser.add_argument(
        "--stall-requests",
        type=int,
        default=1000,
        help="large queries the slow reader pipelines (default %(default)s)",
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="an answer later than this is an error")
    parser.add_argument(
        "--store", type=Path, default=DEFAULT_STORE, help="store to copy and serve (default: the Java store)"
    )
    parser.add_argument(
        "--serve-arg", action="append", default=[], help="extra argument for serve (repeatable)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not os.path.exists("/proc/self/status"):
        print("soak needs /proc to sample the server's RSS", file=sys.stderr)
        return 2
    result = asyncio.run(run_soak(args))
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
