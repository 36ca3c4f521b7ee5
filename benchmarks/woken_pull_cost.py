"""What a held pull woken by a lone SEND costs the server in-process, from the SEND's settle to the
pull's answer written.

    python -m benchmarks.woken_pull_cost [--cycles 1000] [--base DIR] [--instructions] [--calls]
    flock -o /work/bench.lock taskset -c 1 python -m benchmarks.woken_pull_cost --base DIR --pairs 5

The end-to-end row of ``broker_path_vs_java`` (a push consumer while one producer sends 200 msgs/s)
is this cycle, 200 times a second: a push consumer's pull waits, held, on its queue; a lone SEND to
that queue is stored and settled, the settle wakes the held pull (``StoreChanges.notify_queue``), the
pull's answer carries the message, and the consumer pulls again from the next offset, which is held
again. Here the cycle runs through ``serve --writable``'s dispatcher over two ``RemotingConnection``s
on counting transports (a producer's and a consumer's, the consumer registered by a HEART_BEAT as
the Java push consumer registers, its pulls without the subscription flag as the push consumer sends
them), on a fresh store with the broker's index geometry, each checkout in a child of its own code
(``lone_send_cost``'s shape). A cycle: the SEND read, loop turns until the pull's answer is written
(counted), the consumer's next pull read, one turn for its hold to begin. The same child with no
consumer is the lone SEND's cycle; the woken pull is the difference.

``--pairs N``: CPU time per cycle, woken and lone, A B A B ... (best of 3 rounds each).
``--instructions``: instructions per cycle under ``valgrind --tool=callgrind`` (``--cycles`` cycles
minus a run of 0 that builds the same frames), woken and lone. ``--calls``: Python function calls
(and calls into C) made between the SEND's ``notify_queue`` and the pull's answer reaching its
transport, per cycle, with the time between the two (median and 99th percentile, in-process), and
the loop turns the answer took after the SEND's read.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: Cycles each child runs before the counted ones (the store's first files, the index file made).
WARM = 200
#: The broker's own index geometry (``StoreConfig``'s defaults): no roll inside a run.
DEFAULT_INDEX = {"max_hash_slot_num": 5_000_000, "max_index_num": 20_000_000}
#: CostTopic's queues (``request_costs.send_frames`` sends to them in turn); one pull held on each.
QUEUES = 4
GROUP = "woken_group"
#: The push consumer's sysFlag without a subscription posted: commit offset, suspend.
PUSH_SYS_FLAG = 3
#: Loop turns a woken pull's answer may take before the cycle is called broken.
MAX_TURNS = 50


class _AnswerTransport:
    """Just enough of an ``asyncio.Transport`` for ``RemotingConnection``: counts writes and keeps
    the last one (a pull's answer, checked by the child)."""

    def __init__(self) -> None:
        self.writes = 0
        self.last = b""

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 40001) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.last = bytes(data)

    def writelines(self, parts: Any) -> None:
        self.writes += 1
        self.last = b"".join(bytes(p) for p in parts)

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


def _frame(code: int, opaque: int, fields: dict[str, str], body: bytes | None = None) -> bytes:
    from protocol.codes import LanguageCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.frame import encode_frame

    command = RemotingCommand(code, LanguageCode.JAVA, 407, opaque, 0, None, fields, body, SerializeType.JSON)
    return encode_frame(command)


def heartbeat_frame() -> bytes:
    """The push consumer's HEART_BEAT: ``GROUP`` subscribing CostTopic, every tag."""
    from protocol.codes import RequestCode

    body = {
        "clientID": "127.0.0.1@woken",
        "consumerDataSet": [
            {
                "groupName": GROUP,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "subscriptionDataSet": [{"topic": "CostTopic", "subString": "*", "subVersion": 1}],
                "unitMode": False,
            }
        ],
        "producerDataSet": [],
    }
    return _frame(RequestCode.HEART_BEAT, 1, {}, json.dumps(body).encode())


def pull_frame(opaque: int, queue_id: int, offset: int) -> bytes:
    """A push consumer's pull (``PUSH_SYS_FLAG``, 15 s suspend) of CostTopic's ``queue_id``."""
    from protocol.codes import RequestCode

    fields = {
        "consumerGroup": GROUP, "topic": "CostTopic", "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": str(PUSH_SYS_FLAG), "commitOffset": str(offset),
        "suspendTimeoutMillis": "15000", "subVersion": "1", "expressionType": "TAG",
    }  # fmt: skip
    return _frame(RequestCode.PULL_MESSAGE, opaque, fields)


class _Probe:
    """``--calls``: Python and C calls between a ``notify_queue`` and the consumer's next write."""

    def __init__(self) -> None:
        self.on = False
        self.calls = 0
        self.c_calls = 0
        self.started = 0
        self.spans: list[int] = []
        self.counts: list[tuple[int, int]] = []

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if self.on:
            if event == "call":
                self.calls += 1
            elif event == "c_call":
                self.c_calls += 1

    def begin(self) -> None:
        if not self.on:
            self.on = True
            self.calls = self.c_calls = 0
            self.started = time.perf_counter_ns()

    def end(self) -> None:
        if self.on:
            self.spans.append(time.perf_counter_ns() - self.started)
            self.counts.append((self.calls, self.c_calls))
            self.on = False


def child(cycles: int, rounds: int, built: int, woken: bool, calls: bool) -> None:
    """In the checkout measured (the working directory): ``WARM`` cycles, then ``rounds`` rounds of
    ``cycles``; prints the best CPU µs per cycle (and with ``calls`` the probe's figures) as JSON."""
    sys.path.insert(0, os.getcwd())
    from benchmarks.request_costs import on_writable_server, send_frames
    from clients.testkit.server import kit_store_config
    from server.broker.writable_store import WritableStore
    from server.remoting.buffer_budget import BufferBudget
    from server.remoting.connection import RemotingConnection
    from server.remoting.refusal import IncompleteRequests
    from server.remoting.write_budget import WriteBudget

    if os.environ.get("RMQ_LONE_SEND_STEADY") == "1":
        from benchmarks.lone_send_cost import _steady

        _steady()
    total = WARM + max(built, cycles * rounds)
    sends = send_frames(total)
    # the pull after cycle i asks its queue from the offset after the message cycle i stored
    pulls = [pull_frame(1000 + i, i % QUEUES, i // QUEUES + 1) for i in range(total)]
    first_pulls = [pull_frame(10 + q, q, 0) for q in range(QUEUES)]
    best = [float("inf")]
    turns_seen: list[int] = []
    probe = _Probe() if calls else None

    def connection(dispatcher: Any, transport: _AnswerTransport) -> Any:
        extra = {}
        if "woken" in inspect.signature(RemotingConnection).parameters:
            # as the server makes its connections: the SENDs' wake-ups run after their answers
            extra["woken"] = store.arrived.__self__  # the server's StoreChanges (notify_queue's)
        c = RemotingConnection(
            dispatcher,
            idle_timeout=0,
            budget=BufferBudget(),
            write_budget=WriteBudget(),
            incomplete=IncompleteRequests(),
            **extra,
        )
        c.connection_made(transport)  # type: ignore[arg-type]
        return c

    async def timed(dispatcher: Any) -> None:
        sender_transport = _AnswerTransport()
        sender = connection(dispatcher, sender_transport)
        consumer_transport = _AnswerTransport()
        consumer = connection(dispatcher, consumer_transport)
        if woken:
            consumer.data_received(heartbeat_frame())
            for _ in range(MAX_TURNS):  # the heartbeat is registered from a task, in turns
                if consumer_transport.writes:
                    break
                await asyncio.sleep(0)
            for frame in first_pulls:
                consumer.data_received(frame)
            await asyncio.sleep(0)
            if consumer_transport.writes != 1:
                raise RuntimeError(
                    f"the held pulls were answered at once ({consumer_transport.writes} writes)"
                )
        if probe is not None:
            notify = store.arrived  # the server's StoreChanges.notify_queue, bound at start

            def probed_notify(topic: str, queue_id: int) -> None:
                probe.begin()
                notify(topic, queue_id)

            store.arrived = probed_notify
            write, writelines = consumer_transport.write, consumer_transport.writelines

            def probed_write(data: bytes) -> None:
                probe.end()
                write(data)

            def probed_writelines(parts: Any) -> None:
                probe.end()
                writelines(parts)

            consumer_transport.write = probed_write  # type: ignore[method-assign]
            consumer_transport.writelines = probed_writelines  # type: ignore[method-assign]
            sys.setprofile(probe.profile)

        async def cycle(i: int) -> None:
            before = consumer_transport.writes
            sender.data_received(sends[i])
            if not woken:
                await asyncio.sleep(0)
                return
            turns = 0
            while consumer_transport.writes == before:
                if turns == MAX_TURNS:
                    raise RuntimeError(f"cycle {i}: no answer to the held pull after {turns} loop turns")
                await asyncio.sleep(0)
                turns += 1
            turns_seen.append(turns)
            consumer.data_received(pulls[i])
            await asyncio.sleep(0)

        for i in range(WARM):
            await cycle(i)
        if woken and b'"code":0' not in consumer_transport.last[:300]:
            raise RuntimeError(f"a woken pull was not answered SUCCESS: {consumer_transport.last[:300]!r}")
        turns_seen.clear()
        at = WARM
        for _ in range(rounds):
            t0 = time.process_time()
            for _ in range(cycles):
                await cycle(at)
                at += 1
            best[0] = min(best[0], time.process_time() - t0)
        sys.setprofile(None)
        sender.connection_lost(None)
        consumer.connection_lost(None)
        if sender_transport.writes < WARM + cycles * rounds:
            raise RuntimeError(
                f"{sender_transport.writes} answers written for {WARM + cycles * rounds} SENDs"
            )

    with tempfile.TemporaryDirectory(prefix="rmq-woken-pull-") as tmp:
        store = WritableStore(kit_store_config(Path(tmp) / "store", **DEFAULT_INDEX))
        store.create_topic("CostTopic")
        on_writable_server(store, timed)
    result: dict[str, Any] = {"us_per_cycle": best[0] / max(cycles, 1) * 1e6}
    if turns_seen:
        result["turns"] = statistics.median(turns_seen)
    if probe is not None and probe.counts:
        spans = sorted(probe.spans)
        result["python_calls"] = statistics.median(c for c, _ in probe.counts)
        result["c_calls"] = statistics.median(c for _, c in probe.counts)
        result["notify_to_answer_us_p50"] = spans[len(spans) // 2] / 1000
        result["notify_to_answer_us_p99"] = spans[int(len(spans) * 0.99)] / 1000
    print(json.dumps(result))


def _child_cmd(cycles: int, rounds: int, woken: bool, built: int = 0, calls: bool = False) -> list[str]:
    script = str(Path(__file__).resolve())
    cmd = [sys.executable, script, "--child", str(cycles), "--rounds", str(rounds), "--built", str(built)]
    return cmd + (["--woken"] if woken else []) + (["--calls"] if calls else [])


def _env() -> dict[str, str]:
    # The same hash seed for every child: a dict's or set's layout otherwise moves the counts by ~1%.
    return {**os.environ, "PYTHONHASHSEED": "0"}


def run_child(checkout: Path, cycles: int, woken: bool, calls: bool = False) -> dict[str, Any]:
    out = subprocess.run(
        _child_cmd(cycles, 1 if calls else 3, woken, calls=calls),
        cwd=checkout,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def instructions(checkout: Path, cycles: int, built: int, woken: bool) -> int:
    """Instructions of the child with ``cycles`` counted cycles (valgrind's total)."""
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        *_child_cmd(cycles, 1, woken, built),
    ]
    env = {**_env(), "RMQ_LONE_SEND_STEADY": "1"}
    done = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    err = done.stderr
    if done.returncode:
        raise RuntimeError(f"the child failed under valgrind:\n{err[-3000:]}")
    found = re.search(r"Collected\s*:\s*(\d+)", err)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{err[-2000:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1000, help="counted cycles per child")
    parser.add_argument("--base", type=Path, help="another checkout (accelerators built) to compare")
    parser.add_argument("--instructions", action="store_true", help="count instructions with valgrind")
    parser.add_argument("--calls", action="store_true", help="count calls between notify and answer")
    parser.add_argument("--pairs", type=int, default=0, help="A B pairs of CPU time per cycle")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--built", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--woken", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.rounds, args.built, args.woken, args.calls)
        return 0
    if args.cycles < 1 or args.pairs < 0:
        parser.error("--cycles must be at least 1 and --pairs at least 0")
    if args.base is not None and not (args.base / "server").is_dir():
        parser.error(f"--base {args.base} is not a checkout (no server/ in it)")
    checkouts = {"B": REPO} if args.base is None else {"A": args.base.resolve(), "B": REPO}
    result: dict[str, Any] = {}
    for name, path in checkouts.items():
        if args.instructions:
            per = {}
            for label, woken in (("woken", True), ("lone", False)):
                many = instructions(path, args.cycles, 0, woken)
                none = instructions(path, 0, args.cycles, woken)
                per[label] = round((many - none) / args.cycles)
            per["woken pull (woken - lone)"] = per["woken"] - per["lone"]
            result[f"{name} instructions per cycle"] = per
        if args.calls:
            result[f"{name} between notify and answer"] = run_child(path, args.cycles, True, calls=True)
    if args.pairs:
        times: dict[str, dict[str, list[float]]] = {n: {"woken": [], "lone": []} for n in checkouts}
        for _ in range(args.pairs):
            for name, path in checkouts.items():
                for label, woken in (("woken", True), ("lone", False)):
                    times[name][label].append(round(run_child(path, args.cycles, woken)["us_per_cycle"], 2))
        result["CPU us per cycle"] = times
        for name in checkouts:
            pulls = [w - s for w, s in zip(times[name]["woken"], times[name]["lone"], strict=True)]
            result[f"{name} woken pull us (woken - lone, per pair)"] = [round(p, 2) for p in pulls]
        if "A" in times:
            result["B / A woken cycle per pair"] = [
                round(b / a, 3) for a, b in zip(times["A"]["woken"], times["B"]["woken"], strict=True)
            ]
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
