"""The load generator's engine: C connections, D requests in flight on each, bounded, measured.

Every connection runs D workers; a worker takes the next ticket (until the request budget or the
deadline is used up), sends one request on its connection and records the latency from just before
the write to the matching answer. Answers are classified the way an operator reads them: SUCCESS,
"not found" (QUERY_NOT_FOUND, or the broker's SYSTEM_ERROR "can not find message" for a view), other
error codes, and transport failures (a lost connection is reopened by the next request on it).
The run always ends by itself: at the request budget, at the time budget, and never past the hard
caps below, whatever was asked.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clients.admin import (
    BROKER_SUSPEND_MAX_TIME_MILLIS,
    LONG_MAX,
    TOOLS_CONSUMER_GROUP,
    query_ext_fields,
)
from clients.client import DEFAULT_CONNECT_TIMEOUT, RemotingConnection
from clients.errors import ClientError
from protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.custom_headers import (
    PULL_SUBSCRIPTION_FLAG,
    PullMessageRequestHeader,
    SearchOffsetRequestHeader,
)
from protocol.frame import DEFAULT_MAX_FRAME_LENGTH

#: Hard caps: a run never sends more requests or lasts longer than this.
MAX_REQUESTS = 10_000_000
MAX_SECONDS = 3600.0
MAX_CONNECTIONS = 1024
MAX_DEPTH = 1024
#: Requests in flight at once (connections x depth), each one a coroutine of the generator.
MAX_IN_FLIGHT = 65536

#: Builds the (code, extFields) of request number ``ticket``.
RequestFactory = Callable[[int], tuple[int, dict[str, str]]]


@dataclass(slots=True)
class LoadReport:
    """What one run did: counts, elapsed time, latencies (ns) and errors by kind."""

    kind: str
    connections: int
    depth: int
    elapsed: float = 0.0
    ok: int = 0
    not_found: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    latencies_ns: list[int] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return self.ok + self.not_found + sum(self.errors.values())

    @property
    def rate(self) -> float:
        return self.requests / self.elapsed if self.elapsed > 0 else 0.0

    def percentile_ms(self, pct: float) -> float:
        """Nearest-rank percentile of the recorded latencies, in milliseconds (0 if none)."""
        if not self.latencies_ns:
            return 0.0
        ordered = sorted(self.latencies_ns)
        rank = max(1, math.ceil(pct / 100 * len(ordered)))
        return ordered[rank - 1] / 1e6

    def to_dict(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_ns)

        def pick(pct: float) -> float:
            if not ordered:
                return 0.0
            return round(ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1] / 1e6, 3)

        return {
            "type": "bench",
            "kind": self.kind,
            "connections": self.connections,
            "depth": self.depth,
            "requests": self.requests,
            "elapsedSeconds": round(self.elapsed, 3),
            "requestsPerSecond": round(self.rate, 1),
            "ok": self.ok,
            "notFound": self.not_found,
            "errors": sum(self.errors.values()),
            "errorsByKind": dict(sorted(self.errors.items())),
            "latencyMs": {"p50": pick(50), "p90": pick(90), "p99": pick(99), "max": pick(100)},
        }

    def format_text(self) -> str:
        d = self.to_dict()
        lat = d["latencyMs"]
        kinds = ", ".join(f"{k}: {v}" for k, v in d["errorsByKind"].items())
        lines = [
            f"kind {self.kind}, {self.connections} connection(s) x {self.depth} in flight",
            f"{'requests':<12} {d['requests']} in {d['elapsedSeconds']:.3f} s"
            f" ({d['requestsPerSecond']:.1f} req/s)",
            f"{'ok':<12} {d['ok']}",
            f"{'not found':<12} {d['notFound']}",
            f"{'errors':<12} {d['errors']}" + (f" ({kinds})" if kinds else ""),
            f"{'latency ms':<12} p50 {lat['p50']:.3f}  p90 {lat['p90']:.3f}  p99 {lat['p99']:.3f}"
            f"  max {lat['max']:.3f}",
        ]
        return "\n".join(lines) + "\n"


def view_factory(offsets: list[int], rng: random.Random) -> RequestFactory:
    """VIEW_MESSAGE_BY_ID of offsets drawn uniformly from ``offsets``."""

    def make(ticket: int) -> tuple[int, dict[str, str]]:
        return RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offsets[rng.randrange(len(offsets))])}

    return make


def key_factory(keys: list[tuple[str, str]], rng: random.Random, max_num: int = 64) -> RequestFactory:
    """QUERY_MESSAGE (as queryMsgByKey sends it) of ``(topic, key)`` pairs drawn from ``keys``."""

    def make(ticket: int) -> tuple[int, dict[str, str]]:
        topic, key = keys[rng.randrange(len(keys))]
        return RequestCode.QUERY_MESSAGE, query_ext_fields(topic, key, max_num, 0, LONG_MAX)

    return make


def pull_factory(positions: list[tuple[str, int, int, int]], rng: random.Random) -> RequestFactory:
    """PULL_MESSAGE of 32 from queue positions drawn from ``positions``, as mqadmin's pull consumer
    sends it (subscription ``*``, no suspend, no commit)."""

    def make(ticket: int) -> tuple[int, dict[str, str]]:
        topic, queue_id, queue_offset, _ = positions[rng.randrange(len(positions))]
        header = PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER_GROUP,
            topic=topic,
            queue_id=queue_id,
            queue_offset=queue_offset,
            max_msg_nums=32,
            sys_flag=PULL_SUBSCRIPTION_FLAG,
            commit_offset=0,
            suspend_timeout_millis=BROKER_SUSPEND_MAX_TIME_MILLIS,
            sub_version=0,
            subscription="*",
            expression_type="TAG",
        )
        return RequestCode.PULL_MESSAGE, header.to_ext_fields()

    return make


def search_factory(positions: list[tuple[str, int, int, int]], rng: random.Random) -> RequestFactory:
    """SEARCH_OFFSET_BY_TIMESTAMP for the store time of a message drawn from ``positions``."""

    def make(ticket: int) -> tuple[int, dict[str, str]]:
        topic, queue_id, _, timestamp = positions[rng.randrange(len(positions))]
        return (
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            SearchOffsetRequestHeader(topic, queue_id, timestamp).to_ext_fields(),
        )

    return make


def mixed_factory(view: RequestFactory, key: RequestFactory) -> RequestFactory:
    """Views and key queries alternating one for one."""

    def make(ticket: int) -> tuple[int, dict[str, str]]:
        return view(ticket) if ticket % 2 == 0 else key(ticket)

    return make


class _Slot:
    """One connection of the run, reopened on demand after a failure."""

    def __init__(self, addr: str, connect_timeout: float, max_frame_length: int) -> None:
        self.addr = addr
        self.connect_timeout = connect_timeout
        self.max_frame_length = max_frame_length
        self.conn: RemotingConnection | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> RemotingConnection:
        conn = self.conn
        if conn is not None and not conn.is_closed:
            return conn
        async with self._lock:
            if self.conn is None or self.conn.is_closed:
                self.conn = await RemotingConnection.open(
                    self.addr, connect_timeout=self.connect_timeout, max_frame_length=self.max_frame_length
                )
            return self.conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def _is_not_found(response: RemotingCommand) -> bool:
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return True
    return response.code == ResponseCode.SYSTEM_ERROR and (response.remark or "").startswith(
        "can not find message"
    )


async def run_load(
    addr: str,
    factory: RequestFactory,
    *,
    kind: str,
    connections: int,
    depth: int,
    requests: int | None = None,
    seconds: float | None = None,
    timeout: float = 5.0,
    serialize_type: SerializeType = SerializeType.JSON,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
) -> LoadReport:
    """Drive ``addr`` until ``requests`` answers or ``seconds`` elapse (whichever first, hard-capped).

    Opens every connection first (a ``ConnectError`` here means the server is not there at all).
    """
    if connections < 1 or depth < 1:
        raise ValueError("connections and depth must be at least 1")
    if connections > MAX_CONNECTIONS or depth > MAX_DEPTH or connections * depth > MAX_IN_FLIGHT:
        raise ValueError(
            f"at most {MAX_CONNECTIONS} connections, {MAX_DEPTH} in flight on each"
            f" and {MAX_IN_FLIGHT} in flight in all"
        )
    budget = min(requests if requests is not None else MAX_REQUESTS, MAX_REQUESTS)
    duration = min(seconds if seconds is not None else MAX_SECONDS, MAX_SECONDS)
    report = LoadReport(kind=kind, connections=connections, depth=depth)
    slots = [_Slot(addr, connect_timeout, max_frame_length) for _ in range(connections)]
    try:
        await asyncio.gather(*(slot.get() for slot in slots))
    except BaseException:
        for slot in slots:
            slot.close()
        raise

    issued = 0
    perf = time.perf_counter_ns
    latencies = report.latencies_ns
    errors = report.errors
    language = LanguageCode.PYTHON

    async def worker(slot: _Slot, deadline: float) -> None:
        nonlocal issued
        while issued < budget and time.monotonic() < deadline:
            ticket = issued
            issued += 1
            code, ext_fields = factory(ticket)
            request = RemotingCommand(
                code=code,
                language=language,
                version=407,
                ext_fields=ext_fields,
                serialize_type=serialize_type,
            )
            started = perf()
            try:
                conn = await slot.get()
                response = await conn.request(request, timeout)
            except ClientError as exc:
                errors[type(exc).__name__] += 1
                continue
            latencies.append(perf() - started)
            if response.code == ResponseCode.SUCCESS:
                report.ok += 1
            elif _is_not_found(response):
                report.not_found += 1
            else:
                errors[f"code {response.code}"] += 1

    started = time.monotonic()
    deadline = started + duration
    try:
        await asyncio.gather(*(worker(slot, deadline) for slot in slots for _ in range(depth)))
    finally:
        report.elapsed = time.monotonic() - started
        for slot in slots:
            slot.close()
    return report
