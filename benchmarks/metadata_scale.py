"""What each request costs when the broker holds many topics, groups and clients (issue 30).

    python -m benchmarks.metadata_scale --topics 50000 --groups 50000 --clients 1000
                                        [--keep DIR] [--checkout PATH] [--timeout 60] [--json]

Builds a store (``benchmarks.scale_store``: ``--topics`` topics of 4 queues in ``topics.json``,
``--groups`` subscription groups, an offset entry per group, a few messages in 200 of the topics),
starts ``rmq-query serve --writable`` on it (127.0.0.1, free ports, the HTTP port on) from
``--checkout`` (default this checkout; another one, e.g. a ``git worktree`` of the base, runs its
own code through ``PYTHONPATH`` and its working directory), then connects ``--clients`` consumers
heart-beating every 5 s and a probe sending GET_MAX_OFFSET every 5 ms (``benchmarks.scale_clients``,
processes of their own). With all of them running it times, each ``--repeat`` times:

=============================  ==================================================  ========
figure                         request                                             target
=============================  ==================================================  ========
metrics                        one ``/metrics`` scrape (and its bytes, series)     1 s
api_topics / api_groups        the first page of ``/api/topics`` / ``/api/groups``  200 ms
topic_stats                    GET_TOPIC_STATS_INFO of a topic with messages       50 ms
all_topic_config               GET_ALL_TOPIC_CONFIG                                2 s
create_topic_admin             UPDATE_AND_CREATE_TOPIC of a new topic              20 ms
create_topic_send              a SEND_MESSAGE_V2 to a new topic (auto-created)     20 ms
heartbeat_1mb                  a ~1 MB HEART_BEAT of new groups                    100 ms
=============================  ==================================================  ========

and, for each, the probe's worst wait and p99 over the requests it sent meanwhile (target 50 ms).
Also printed: the store's build time, the server's start-up time and RSS after start and at the
end, the time to connect the clients and answer their first heartbeat, and (unless
``--no-memory``) the memory per topic and per group: the RSS of three more servers, on stores of
``--topics`` topics and no groups, ``--groups`` groups and no topics, and neither, after start and
after a first small request into each table (``touch_tables``: a table built at first use shows).

Every request has ``--timeout``: a server frozen past it gives a ``timeout`` figure, not a hang. A
server still frozen then is killed and started again (with the probe and the clients) before the
next figure, so one stall does not spoil the rest; the run is bounded by roughly
(figures x repeats + restarts) x ``--timeout`` plus the start-ups. The exit status is 0 when the run
completed (whatever the figures), 1 when the server could not be started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from benchmarks.scale_clients import heartbeat_body
from benchmarks.scale_store import ScaleStore, build_store, topic_name
from clients.client import RemotingClient
from clients.errors import ClientError
from protocol.codes import RequestCode, ResponseCode
from protocol.message_id import UniqueIdGenerator
from protocol.send_message import SendMessageRequestHeader, client_properties

REPO = Path(__file__).resolve().parents[1]

#: The issue's targets, milliseconds.
TARGETS_MS = {
    "metrics": 1000.0,
    "api_topics": 200.0,
    "api_groups": 200.0,
    "topic_stats": 50.0,
    "all_topic_config": 2000.0,
    "create_topic_admin": 20.0,
    "create_topic_send": 20.0,
    "heartbeat_1mb": 100.0,
}
PROBE_TARGET_MS = 50.0
#: The size the ``heartbeat_1mb`` body is grown to: under ``MAX_HEARTBEAT_BODY`` (1 MiB).
HEARTBEAT_BYTES = 1_000_000
#: Topics each group of the big heartbeat subscribes.
HEARTBEAT_TOPICS_PER_GROUP = 3


# -- the server and the other clients as processes ----------------------------------------------------


def _env(checkout: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(checkout) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def rss_mib(pid: int) -> float:
    """The process's resident set size from /proc, MiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def _stop_process(proc: asyncio.subprocess.Process, grace: float) -> int | None:
    """SIGTERM, then SIGKILL after ``grace`` seconds (a server whose loop is blocked cannot act on
    SIGTERM until it is free); the exit status."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    return proc.returncode


@dataclass
class Server:
    """``rmq-query serve --writable`` on the store, from a checkout."""

    proc: asyncio.subprocess.Process
    addr: str
    http_url: str
    start_s: float
    log: Path

    @classmethod
    async def start(cls, checkout: Path, store: Path, log: Path, timeout: float) -> Server:
        started = time.monotonic()
        with open(log, "ab") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "clients.cli",
                "serve",
                "--writable",
                "--store",
                str(store),
                "--port",
                "0",
                "--http",
                "0",
                "--log-level",
                "WARNING",
                cwd=checkout,
                env=_env(checkout),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=out,
            )
        assert proc.stdout is not None
        found: dict[str, str] = {}
        try:
            async with asyncio.timeout(timeout):
                while "NAMESRV_ADDR" not in found or "HTTP_URL" not in found:
                    line = (await proc.stdout.readline()).decode()
                    if not line:
                        raise RuntimeError(f"serve exited ({await proc.wait()}); see {log}")
                    name, sep, value = line.strip().partition("=")
                    if sep:
                        found[name] = value
        except BaseException:
            await _stop_process(proc, 5)
            raise
        return cls(
            proc, found["NAMESRV_ADDR"], found["HTTP_URL"].rstrip("/"), time.monotonic() - started, log
        )

    def rss_mib(self) -> float:
        return rss_mib(self.proc.pid)

    async def stop(self, grace: float = 10.0) -> int | None:
        return await _stop_process(self.proc, grace)


@dataclass
class Child:
    """A ``benchmarks.scale_clients`` process: started, ready, stopped with its JSON report."""

    proc: asyncio.subprocess.Process
    ready: str

    @classmethod
    async def start(cls, args: list[str], timeout: float) -> Child:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.scale_clients",
            *args,
            cwd=REPO,
            env=_env(REPO),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        try:
            line = (await asyncio.wait_for(proc.stdout.readline(), timeout)).decode().strip()
        except BaseException:
            await _stop_process(proc, 1)
            raise
        if not line.startswith("ready"):
            await _stop_process(proc, 1)
            raise RuntimeError(f"scale_clients {args[0]} did not start: {line!r}")
        return cls(proc, line)

    async def stop(self, timeout: float) -> dict[str, object]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        report: dict[str, object] = {}
        with contextlib.suppress(ConnectionError):
            self.proc.stdin.write(b"stop\n")
            self.proc.stdin.close()
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            report = json.loads(line) if line.strip() else {}
        except (TimeoutError, ValueError):
            report = {}
        await _stop_process(self.proc, 5)
        return report


# -- what is measured -----------------------------------------------------------------------------------


@dataclass
class Timing:
    """One request: when it ran (monotonic), its time, what came back."""

    start: float
    end: float
    seconds: float | None  # None: no answer within --timeout
    detail: str = ""
    ok: bool = True


@dataclass
class Figure:
    name: str
    target_ms: float
    timings: list[Timing] = field(default_factory=list)
    restarted: bool = False

    def ms(self) -> list[float]:
        return [t.seconds * 1000 for t in self.timings if t.seconds is not None]

    @property
    def timed_out(self) -> bool:
        return any(t.seconds is None for t in self.timings)


def probe_stats(samples: list[list[float]], start: float, end: float, timeout: float) -> dict[str, object]:
    """The probe requests sent between ``start`` and ``end``: count, p99 and worst wait (ms), and how
    many got no answer (their wait counts as the time until they gave up)."""
    waits = sorted(s[1] * 1000 for s in samples if start <= s[0] <= end)
    failed = sum(1 for s in samples if start <= s[0] <= end and not s[2])
    if not waits:
        return {"count": 0, "p99_ms": None, "max_ms": None, "failed": 0}
    p99 = waits[min(len(waits) - 1, int(0.99 * len(waits)))]
    return {"count": len(waits), "p99_ms": round(p99, 1), "max_ms": round(waits[-1], 1), "failed": failed}


class Session:
    """The server with its probe and heart-beating clients; restarted whole after a stall."""

    def __init__(self, args: argparse.Namespace, scale: ScaleStore, work: Path) -> None:
        self.args = args
        self.scale = scale
        self.work = work
        self.server: Server | None = None
        self.probe: Child | None = None
        self.heartbeats: Child | None = None
        self.probe_samples: list[list[float]] = []
        self.heartbeat_reports: list[dict[str, object]] = []
        self.starts: list[dict[str, float]] = []
        self.probe_out = work / "probe-0.json"
        self.client: RemotingClient | None = None
        self.http: aiohttp.ClientSession | None = None

    @property
    def probe_topic(self) -> str:
        return self.scale.message_topics[0] if self.scale.message_topics else topic_name(0)

    async def start(self) -> None:
        args = self.args
        server = self.server = await Server.start(
            args.checkout, self.scale.root, self.work / "serve.log", args.start_timeout
        )
        await asyncio.sleep(1.0)  # what start-up left behind settles (imports, first refresh)
        started = {"start_s": round(server.start_s, 2), "rss_mib": round(server.rss_mib(), 1)}
        common = ["--addr", server.addr, "--timeout", str(args.timeout)]
        self.probe_out = self.work / f"probe-{len(self.starts)}.json"
        self.probe = await Child.start(
            ["probe", *common, "--topic", self.probe_topic, "--out", str(self.probe_out)], args.timeout
        )
        begin = time.monotonic()
        self.heartbeats = await Child.start(
            [
                "heartbeats",
                *common,
                "--clients",
                str(args.clients),
                "--topics",
                str(max(1, self.scale.topics)),
                "--interval",
                str(args.heartbeat_interval),
            ],
            args.start_timeout,
        )
        started["clients_ready_s"] = round(time.monotonic() - begin, 2)
        started["clients_window"] = (begin, time.monotonic())  # type: ignore[assignment]
        self.starts.append(started)
        self.client = RemotingClient(timeout=args.timeout, connect_timeout=args.timeout)
        self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=args.timeout))

    async def stop(self) -> None:
        timeout = self.args.timeout + 5
        if self.heartbeats is not None:
            self.heartbeat_reports.append(await self.heartbeats.stop(timeout))
            self.heartbeats = None
        if self.probe is not None:
            await self.probe.stop(timeout)
            with contextlib.suppress(OSError, ValueError):
                self.probe_samples.extend(json.loads(self.probe_out.read_text(encoding="ascii")))
            self.probe = None
        if self.client is not None:
            await self.client.close()
            self.client = None
        if self.http is not None:
            await self.http.close()
            self.http = None
        if self.server is not None:
            await self.server.stop()
            self.server = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    # -- the requests -----------------------------------------------------------------------------

    async def invoke(self, code: int, fields: dict[str, str] | None = None, body: bytes | None = None) -> str:
        assert self.client is not None and self.server is not None
        answer = await self.client.invoke(
            self.server.addr, code, fields or {}, body, timeout=self.args.timeout
        )
        if answer.code != ResponseCode.SUCCESS:
            raise AnswerError(f"code {answer.code}: {answer.remark}")
        return f"{len(answer.body or b'')} B"

    async def get(self, path: str) -> bytes:
        assert self.http is not None and self.server is not None
        async with self.http.get(self.server.http_url + path) as response:
            body = await response.read()
            if response.status != 200:
                raise AnswerError(f"HTTP {response.status}: {body[:200]!r}")
            return body

    async def metrics(self, _: int) -> str:
        body = await self.get("/metrics")
        series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        return f"{len(body)} B, {series} series"

    async def api_topics(self, _: int) -> str:
        body = await self.get("/api/topics")
        return f"{len(body)} B, {len(json.loads(body)['topics'])} topics"

    async def api_groups(self, _: int) -> str:
        body = await self.get("/api/groups")
        return f"{len(body)} B, {len(json.loads(body)['groups'])} groups"

    async def topic_stats(self, _: int) -> str:
        return await self.invoke(RequestCode.GET_TOPIC_STATS_INFO, {"topic": self.probe_topic})

    async def all_topic_config(self, _: int) -> str:
        return await self.invoke(RequestCode.GET_ALL_TOPIC_CONFIG)

    async def create_topic_admin(self, repeat: int) -> str:
        fields = {
            "topic": f"scale-admin-{os.getpid()}-{len(self.starts)}-{repeat}",
            "defaultTopic": "TBW102",
            "readQueueNums": "4",
            "writeQueueNums": "4",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        }
        return await self.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)

    async def create_topic_send(self, repeat: int) -> str:
        header = SendMessageRequestHeader(
            producer_group="scale-producer",
            topic=f"scale-send-{os.getpid()}-{len(self.starts)}-{repeat}",
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=0,
            sys_flag=0,
            born_timestamp=time.time_ns() // 1_000_000,
            flag=0,
            properties=client_properties(None, None, None, UniqueIdGenerator().next_id()),
            reconsume_times=0,
        )
        return await self.invoke(
            RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(v2=True), b"created by send"
        )

    def big_heartbeat(self, repeat: int) -> bytes:
        """A heartbeat of new groups, each subscribing a few topics, grown to ``HEARTBEAT_BYTES``."""
        topics = max(1, self.scale.topics)

        def body(groups: int) -> bytes:
            subscribed = {
                f"scale-hb-{os.getpid()}-{len(self.starts)}-{repeat}-{g:05d}": [
                    topic_name((g * HEARTBEAT_TOPICS_PER_GROUP + k) % topics)
                    for k in range(HEARTBEAT_TOPICS_PER_GROUP)
                ]
                for g in range(groups)
            }
            return heartbeat_body(f"127.0.0.1@scale-big-{repeat}", subscribed)

        per_group = len(body(100)) / 100
        groups = int(HEARTBEAT_BYTES / per_group)
        data = body(groups)
        while len(data) > HEARTBEAT_BYTES:
            groups -= max(1, (len(data) - HEARTBEAT_BYTES) // int(per_group) + 1)
            data = body(groups)
        return data

    async def heartbeat_1mb(self, repeat: int) -> str:
        data = self.big_heartbeat(repeat)
        await self.invoke(RequestCode.HEART_BEAT, {}, data)
        return f"{len(data)} B, {data.count(b'groupName')} new groups"


class AnswerError(Exception):
    """The server answered, but not with success."""


async def time_one(run: Callable[[], Awaitable[str]], timeout: float) -> Timing:
    start = time.monotonic()
    try:
        detail = await asyncio.wait_for(run(), timeout)
        ok = True
    except TimeoutError:
        end = time.monotonic()
        return Timing(start, end, None, f"no answer within {timeout:g} s", ok=False)
    except AnswerError as exc:
        detail, ok = str(exc), False
    except Exception as exc:  # anything else (a closed connection, a bad body) is the figure's detail
        detail, ok = f"{type(exc).__name__}: {exc}", False
    end = time.monotonic()
    return Timing(start, end, end - start, detail, ok)


FIGURES = tuple(TARGETS_MS)


async def measure(session: Session, args: argparse.Namespace) -> list[Figure]:
    figures = []
    for name in FIGURES:
        if name not in args.only:
            continue
        figure = Figure(name, TARGETS_MS[name])
        run = getattr(session, name)
        for repeat in range(args.repeat):
            timing = await time_one(lambda r=repeat, ask=run: ask(r), args.timeout)
            figure.timings.append(timing)
            if timing.seconds is None:
                break
            await asyncio.sleep(args.settle)
        figures.append(figure)
        if figure.timed_out:
            # The server may stay frozen for minutes: start it again for the next figure.
            figure.restarted = True
            await session.restart()
        await asyncio.sleep(args.settle)
    return figures


async def touch_tables(server: Server, timeout: float) -> str:
    """One small request into the topic table and into the group and offset tables (a topic's
    stats, a one-name page of each listing), so a server that builds them at first use holds them;
    what went wrong, if anything."""
    client = RemotingClient(timeout=timeout, connect_timeout=timeout)
    try:
        await client.invoke(server.addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic_name(0)})
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http:
            for path in ("/api/topics?limit=1", "/api/groups?limit=1"):
                async with http.get(server.http_url + path) as response:
                    await response.read()
    except (ClientError, aiohttp.ClientError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        await client.close()
    return ""


async def memory_slope(args: argparse.Namespace, work: Path) -> dict[str, object]:
    """RSS of a server on no topics or groups, on ``--topics`` topics, on ``--groups`` groups: after
    start, and after ``touch_tables``; the differences per topic and per group (KiB)."""
    rss: dict[str, dict[str, float]] = {"start": {}, "touched": {}}
    problems: list[str] = []
    for label, topics, groups in (("base", 0, 0), ("topics", args.topics, 0), ("groups", 0, args.groups)):
        root = work / f"memory-{label}"
        build_store(root, topics, groups, message_topics=0)
        server = await Server.start(args.checkout, root, work / f"serve-{label}.log", args.start_timeout)
        try:
            await asyncio.sleep(1.0)
            rss["start"][label] = server.rss_mib()
            problem = await touch_tables(server, args.timeout)
            if problem:
                problems.append(f"{label}: {problem}")
            rss["touched"][label] = server.rss_mib()
        finally:
            await server.stop()

    def per(when: str, label: str, count: int) -> float | None:
        return round((rss[when][label] - rss[when]["base"]) * 1024 / count, 2) if count else None

    return {
        "rss_mib": {when: {k: round(v, 1) for k, v in values.items()} for when, values in rss.items()},
        "kib_per_topic": {when: per(when, "topics", args.topics) for when in rss},
        "kib_per_group": {when: per(when, "groups", args.groups) for when in rss},
        "problems": problems,
    }


async def run_benchmark(args: argparse.Namespace) -> dict[str, object]:
    """Build, serve, measure, stop; the report (see ``print_report``)."""
    with contextlib.ExitStack() as stack:
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            work = args.keep
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rmq-metadata-scale-")))
        store_root = work / "store"
        if store_root.exists() and any(store_root.iterdir()):
            raise SystemExit(f"{store_root} is not empty: give --keep a new directory")
        scale = build_store(store_root, args.topics, args.groups, message_topics=args.message_topics)
        session = Session(args, scale, work)
        try:
            await session.start()
            await asyncio.sleep(args.idle)
            idle = (session.starts[0]["clients_window"][1], time.monotonic())  # type: ignore[index]
            figures = await measure(session, args)
            rss_end = session.server.rss_mib() if session.server is not None else None
        finally:
            await session.stop()
        memory = await memory_slope(args, work) if args.memory else None
    samples, timeout = session.probe_samples, args.timeout
    first = session.starts[0]
    window = first["clients_window"]
    return {
        "topics": args.topics,
        "groups": args.groups,
        "clients": args.clients,
        "checkout": str(args.checkout),
        "store_build_s": round(scale.seconds, 2),
        "server_start_s": first["start_s"],
        "rss_after_start_mib": first["rss_mib"],
        "rss_end_mib": None if rss_end is None else round(rss_end, 1),
        "clients_ready_s": first["clients_ready_s"],
        "probe_while_clients_connect": probe_stats(samples, window[0], window[1], timeout),  # type: ignore[index]
        "probe_idle": probe_stats(samples, idle[0], idle[1], timeout),
        "restarts": len(session.starts) - 1,
        "heartbeats": session.heartbeat_reports,
        "figures": [
            {
                "name": f.name,
                "target_ms": f.target_ms,
                "ms": [round(m, 1) for m in f.ms()],
                "timed_out": f.timed_out,
                "restarted_after": f.restarted,
                "failed": [t.detail for t in f.timings if not t.ok],
                "detail": f.timings[0].detail if f.timings else "",
                "probe": probe_stats(samples, f.timings[0].start, f.timings[-1].end, timeout)
                if f.timings
                else {},
            }
            for f in figures
        ],
        "memory": memory,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def print_report(report: dict[str, object]) -> None:
    print(
        f"topics {report['topics']}, groups {report['groups']}, clients {report['clients']}, "
        f"checkout {report['checkout']}"
    )
    print(
        f"store built in {report['store_build_s']} s; serve started in {report['server_start_s']} s, "
        f"RSS {report['rss_after_start_mib']} MiB after start, {report['rss_end_mib']} MiB at the end; "
        f"clients connected and first heartbeat answered in {report['clients_ready_s']} s; "
        f"restarts after a stall: {report['restarts']}"
    )
    for label in ("probe_while_clients_connect", "probe_idle"):
        probe = report[label]
        assert isinstance(probe, dict)
        print(f"{label}: max {_ms(probe['max_ms'])} ms, p99 {_ms(probe['p99_ms'])} ms over {probe['count']}")
    print()
    print("| figure | target | first ms | median ms | max ms | probe max ms (< 50) | probe p99 ms | detail |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for fig in report["figures"]:  # type: ignore[attr-defined]
        ms = fig["ms"]
        timeout = " + timeout" if fig["timed_out"] else ""
        first = _ms(ms[0]) if ms else "timeout"
        probe = fig["probe"]
        detail = fig["detail"] + (f"; failed: {fig['failed'][0]}" if fig["failed"] else "")
        if fig["restarted_after"]:
            detail += "; server restarted after"
        median = _ms(statistics.median(ms)) if ms else "-"
        worst = _ms(max(ms)) if ms else "-"
        print(
            f"| {fig['name']} | < {fig['target_ms']:g} ms | {first} | {median}{timeout} | {worst}{timeout} | "
            f"{_ms(probe.get('max_ms'))} | {_ms(probe.get('p99_ms'))} | {detail} |"
        )
    memory = report.get("memory")
    if memory:
        assert isinstance(memory, dict)
        print()
        for when in ("start", "touched"):
            print(
                f"memory ({when}): RSS {memory['rss_mib'][when]} MiB -> {memory['kib_per_topic'][when]} KiB "
                f"per topic, {memory['kib_per_group'][when]} KiB per group (with its offset entry)"
            )
        if memory["problems"]:
            print(f"memory: the tables' first use failed: {memory['problems']}")
    for hb in report["heartbeats"]:  # type: ignore[attr-defined]
        shown = {k: v for k, v in hb.items() if k != "errors"}
        first_error = f"; first error: {hb['errors'][0]}" if hb.get("errors") else ""
        print(f"heart-beating clients: {shown}{first_error}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.metadata_scale", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--topics", type=int, default=1000, help="topics of 4 queues (default %(default)s)")
    parser.add_argument("--groups", type=int, default=1000, help="subscription groups (default %(default)s)")
    parser.add_argument(
        "--clients", type=int, default=1000, help="heart-beating clients (default %(default)s)"
    )
    parser.add_argument("--message-topics", type=int, default=200, help="topics holding messages")
    parser.add_argument("--keep", type=Path, help="build the store in this new directory and leave it there")
    parser.add_argument(
        "--checkout", type=Path, default=REPO, help="serve from this checkout's tree (default: this one)"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds per request (default %(default)s)"
    )
    parser.add_argument("--start-timeout", type=float, default=600.0, help="seconds for serve to start")
    parser.add_argument(
        "--repeat", type=int, default=3, help="times each request is timed (default %(default)s)"
    )
    parser.add_argument("--idle", type=float, default=3.0, help="seconds of clients only, before the figures")
    parser.add_argument("--settle", type=float, default=0.3, help="seconds between requests")
    parser.add_argument(
        "--heartbeat-interval", type=float, default=5.0, help="seconds between a client's beats"
    )
    parser.add_argument(
        "--only",
        default=",".join(FIGURES),
        help=f"comma-separated figures (default all: {','.join(FIGURES)})",
    )
    parser.add_argument("--no-memory", dest="memory", action="store_false", help="skip the memory slope")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = parser.parse_args(argv)
    args.only = set(args.only.split(","))
    unknown = args.only - set(FIGURES)
    if unknown:
        parser.error(f"unknown figure(s): {', '.join(sorted(unknown))}")
    if args.topics < 1 or args.groups < 0 or args.clients < 0 or args.repeat < 1:
        parser.error("--topics must be at least 1, --repeat at least 1, --groups and --clients not negative")
    args.checkout = args.checkout.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = asyncio.run(run_benchmark(args))
    except (RuntimeError, TimeoutError) as exc:
        print(f"metadata_scale: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
