"""The other clients of ``benchmarks.metadata_scale``, each kind in a process of its own.

    python -m benchmarks.scale_clients probe --addr HOST:PORT --topic T [--interval 0.005]
    python -m benchmarks.scale_clients heartbeats --addr HOST:PORT --clients 1000 [--interval 5]

They run beside the process that times the requests under test, so a large answer that process
decodes (a 10 MB ``/metrics``) cannot delay them and be taken for a server stall, and so their own
work cannot slow its timings.

* ``probe``: one connection sends GET_MAX_OFFSET for queue 0 of ``--topic`` every ``--interval``
  seconds on a fixed schedule, whether or not the earlier ones were answered (a frozen server thus
  gets a request every 5 ms and each one's wait is the freeze), each with ``--timeout``.
* ``heartbeats``: ``--clients`` connections, client ``i`` a consumer of group ``scale-group-i``
  subscribed to ``scale-topic-i``, each sending HEART_BEAT every ``--interval`` seconds (the clients
  spread over the interval, as independent clients would be).

Both print ``ready ...`` on stdout once started (the heart-beating clients once every client's first
heartbeat is answered or timed out), run until a line or end of file arrives on stdin, then print one
JSON line of what they saw. Requests in flight at the stop are waited for (each has its own timeout),
so every request sent is counted answered, failed or timed out. Times are ``time.monotonic()``, the
clock the driver's process shares.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time

import msgspec

from benchmarks.scale_store import group_name, topic_name
from clients.client import RemotingClient, RemotingConnection
from clients.errors import ClientError, RequestTimeoutError
from protocol.codes import RequestCode, ResponseCode
from protocol.heartbeat import ClientConsumerData, ClientHeartbeat, ClientSubscription

#: A request not answered in this many seconds is counted as a timeout (its wait is then this).
DEFAULT_TIMEOUT = 30.0


def subscription(topic: str) -> ClientSubscription:
    """``SubscriptionData`` of ``topic`` with every tag, as a Java consumer sends it."""
    return ClientSubscription(
        topic=topic,
        subString="*",
        tagsSet=[],
        codeSet=[],
        subVersion=time.time_ns() // 1_000_000,
        expressionType="TAG",
        classFilterMode=False,
    )


def heartbeat_body(client_id: str, groups: dict[str, list[str]]) -> bytes:
    """A push consumer's ``HeartbeatData``: one ``ConsumerData`` per group, its topics subscribed."""
    consumers = [
        ClientConsumerData(
            groupName=group,
            consumeType="CONSUME_PASSIVELY",
            messageModel="CLUSTERING",
            consumeFromWhere="CONSUME_FROM_LAST_OFFSET",
            subscriptionDataSet=[subscription(t) for t in topics],
            unitMode=False,
        )
        for group, topics in groups.items()
    ]
    return msgspec.json.encode(
        ClientHeartbeat(clientID=client_id, producerDataSet=[], consumerDataSet=consumers)
    )


async def _wait_stdin() -> None:
    """Returns when a line (or end of file) arrives on stdin."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.readline)


def _client(timeout: float) -> RemotingClient:
    return RemotingClient(timeout=timeout, connect_timeout=timeout)


async def probe(args: argparse.Namespace) -> dict[str, object]:
    """GET_MAX_OFFSET every ``interval`` s until told to stop; every request's (sent, wait, ok) is
    written to ``--out`` as a JSON list (a line of them would outgrow a pipe reader's line limit)."""
    client = _client(args.timeout)
    conn = await client.connection(args.addr)
    samples: list[tuple[float, float, bool]] = []
    fields = {"topic": args.topic, "queueId": "0"}

    async def one(sent: float) -> None:
        request = client.make_request(RequestCode.GET_MAX_OFFSET, fields)
        try:
            answer = await conn.request(request, args.timeout)
            ok = answer.code == ResponseCode.SUCCESS
        except ClientError:
            ok = False
        samples.append((sent, time.monotonic() - sent, ok))

    stop = asyncio.ensure_future(_wait_stdin())
    print("ready", flush=True)
    tasks: set[asyncio.Task[None]] = set()
    tick = time.monotonic()
    while not stop.done():
        now = time.monotonic()
        if now >= tick:
            task = asyncio.ensure_future(one(now))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            tick += args.interval
            if tick < now:  # this process was held up: no burst to catch up
                tick = now + args.interval
        await asyncio.sleep(max(0.0, tick - time.monotonic()))
    if tasks:
        await asyncio.wait(tasks, timeout=args.timeout + 1)
    await client.close()
    with open(args.out, "w", encoding="ascii") as out:
        json.dump(samples, out)
    return {"samples": len(samples), "out": args.out}


async def heartbeats(args: argparse.Namespace) -> dict[str, object]:
    """``clients`` heart-beating connections until told to stop; counts and the slowest answer."""
    started = time.monotonic()
    stats = {"sent": 0, "answered": 0, "failed": 0, "timeouts": 0, "max_ms": 0.0, "not_connected": 0}
    errors: list[str] = []

    async def beat(conn: RemotingConnection, client: RemotingClient, body: bytes) -> None:
        sent = time.monotonic()
        stats["sent"] += 1
        try:
            answer = await conn.request(client.make_request(RequestCode.HEART_BEAT, {}, body), args.timeout)
        except ClientError as exc:
            stats["timeouts" if isinstance(exc, RequestTimeoutError) else "failed"] += 1
            if len(errors) < 5:
                errors.append(str(exc))
            return
        stats["max_ms"] = max(float(stats["max_ms"]), (time.monotonic() - sent) * 1000)
        if answer.code == ResponseCode.SUCCESS:
            stats["answered"] += 1
        else:
            stats["failed"] += 1
            if len(errors) < 5:
                errors.append(f"code {answer.code}: {answer.remark}")

    client = _client(args.timeout)
    connections: list[tuple[RemotingConnection, bytes]] = []
    for i in range(args.clients):
        try:
            conn = await RemotingConnection.open(args.addr, connect_timeout=args.timeout)
        except ClientError as exc:
            stats["not_connected"] += 1
            if len(errors) < 5:
                errors.append(str(exc))
            continue
        topic = topic_name(i % args.topics)
        body = heartbeat_body(f"127.0.0.1@scale-{i}", {group_name(i): [topic]})
        connections.append((conn, body))
    await asyncio.gather(*(beat(conn, client, body) for conn, body in connections))
    connected = time.monotonic() - started
    print(f"ready {connected:.3f}", flush=True)

    stopping = asyncio.Event()

    async def pause(seconds: float) -> None:
        """Sleeps ``seconds``, cut short by the stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), seconds)

    async def keep_beating(index: int, conn: RemotingConnection, body: bytes) -> None:
        await pause(args.interval * index / max(1, len(connections)))
        while not stopping.is_set():
            await beat(conn, client, body)
            await pause(args.interval)

    loops = [asyncio.ensure_future(keep_beating(i, c, b)) for i, (c, b) in enumerate(connections)]
    await _wait_stdin()
    # No new beat after the stop, but the ones in flight keep their own ``--timeout`` (as the probe's
    # requests do): each beat sent ends answered, failed or timed out, whatever the machine's speed.
    stopping.set()
    if loops:
        _, late = await asyncio.wait(loops, timeout=args.timeout + 1)
        for task in late:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
    for conn, _ in connections:
        conn.close()
    # Asked, and neither answered nor timed out: a beat whose own timeout did not fire within the
    # stop's grace (its timeout and a second); none, unless this process itself was stalled.
    unanswered = int(stats["sent"]) - int(stats["answered"]) - int(stats["failed"]) - int(stats["timeouts"])
    return stats | {
        "max_ms": round(float(stats["max_ms"]), 1),
        "unanswered_at_stop": unanswered,
        "connect_and_first_heartbeat_s": round(connected, 3),
        "errors": errors,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale_clients", description=__doc__.split("\n")[0]
    )
    parser.add_argument("role", choices=("probe", "heartbeats"))
    parser.add_argument("--addr", required=True, help="the server's remoting HOST:PORT")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per request")
    parser.add_argument("--interval", type=float, help="seconds between requests (probe 0.005, heartbeats 5)")
    parser.add_argument("--topic", default=topic_name(0), help="probe: the topic asked GET_MAX_OFFSET of")
    parser.add_argument("--out", default="probe.json", help="probe: the file its samples are written to")
    parser.add_argument("--clients", type=int, default=1000, help="heartbeats: connections")
    parser.add_argument("--topics", type=int, default=1000, help="heartbeats: topics in the store")
    args = parser.parse_args(argv)
    if args.interval is None:
        args.interval = 0.005 if args.role == "probe" else 5.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = probe if args.role == "probe" else heartbeats
    result = asyncio.run(run(args))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
