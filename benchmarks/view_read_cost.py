"""What one read of VIEW_MESSAGE_BY_ID frames costs the server in-process, checkout against checkout.

    python -m benchmarks.view_read_cost --base DIR [--checkout DIR] [--per 1,8] [--pairs 5]
    python -m benchmarks.view_read_cost --base DIR --instructions [--reads 5000]
                                        [--kind view|query] [--server read-only|writable]

A read of ``--per`` pipelined VIEW frames (random records of ``tests/golden/stores/java-4.9.7-a``) is
fed to ``RemotingConnection.data_received`` as the server builds it (the dispatcher of
``server.app.build_dispatcher``, the connection's budgets and idle order, a transport that only
counts writes): with the compiled request path built, that is one ``answer_batch`` call per read plus
the Python around it. Each checkout (``--base``: A, e.g. an older commit unpacked with its
accelerators built; ``--checkout``: B, this one by default) runs in its own child process from its
own directory, so its code is what is measured.

Timing (the default): CPU per read (``time.process_time``, best of 5 rounds over 2000 VIEWs), the
children run A B A B ... ``--pairs`` times on core ``--core`` (hold ``flock -o /work/bench.lock``
around it on a shared machine); the table gives each side's median and B / A per pair. The event
loop and the sockets are left out: compare with a ``vs_java`` run for the whole request.

``--instructions``: the same reads counted by ``valgrind --tool=callgrind``, a figure the machine's
noise cannot move: the whole read (a child answering ``--reads`` reads, less one answering none) and
the compiled call alone (``--toggle-collect=answer_batch``). What it cannot see: the time of a system
call inside the kernel (the per-VIEW ``fstat`` of ``mmap.size()``) and cache misses. Before the
warm-up the heap built so far is frozen (``gc.freeze``): the collections the reads cause are
counted, not those of the setup's objects (whose full collections came in lumps).

``--kind query``: QUERY_MESSAGE of random (topic, key) pairs of the store's KEYS and UNIQ_KEYs with
mqadmin's arguments instead (as ``rmqblast --kind key``). ``--server writable``: the dispatcher of
``serve --writable`` (``server.remoting.write_path``) over a copy of the store opened writable, after
``WRITES`` SENDs through the same connection (the read side has followed a writer; the lookups are
then timed alone; the server's loop watchdog is stopped, its wake-ups being per second of a run
that valgrind slows, not per request): the lookup's cost where test authors and operators look
messages up while a live broker writes, to compare with ``--server read-only`` (the default:
``serve``) on the same records. ``--compare-servers``: A = read-only, B = writable (``--base``
defaults to ``--checkout`` then).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STORE_CONF = REPO / "tests" / "golden" / "stores" / "java-4.9.7-a.broker.conf"
VIEWS = 2000
WARMUP_READS = 1000
#: SENDs written before the lookups are timed under ``--server writable`` (256-byte bodies, keyed).
WRITES = 400


class _Transport:
    """Just enough of an ``asyncio.Transport`` for ``RemotingConnection``: counts writes."""

    def __init__(self) -> None:
        self.writes = 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data: object) -> None:
        self.writes += 1

    def writelines(self, parts: object) -> None:
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


def child(mode: str, per: int, reads: int, kind: str = "view", server: str = "read-only") -> None:
    """In the checkout measured (the working directory, first on ``sys.path``): ``mode`` "time"
    prints the CPU microseconds per read as JSON; "count" answers ``reads`` reads after the warm-up
    (run under valgrind by ``count_instructions``). ``kind``: "view" or "query"; ``server``:
    "read-only" (``serve``'s dispatcher) or "writable" (``serve --writable``'s, on a copy)."""
    sys.path.insert(0, os.getcwd())
    import dataclasses
    import shutil
    import tempfile

    from clients.samples import sample_store
    from protocol.codes import LanguageCode, RequestCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.frame import encode_frame
    from server.app import QueryServer, ServerSettings, build_dispatcher
    from server.identity import BrokerIdentity
    from server.remoting import connection as connection_module
    from server.remoting import refusal
    from server.remoting.buffer_budget import BufferBudget
    from server.remoting.write_budget import WriteBudget
    from store.config.store_config import StoreConfig
    from store.message_store import MessageStore

    config = StoreConfig.load(STORE_CONF)
    samples = sample_store(config.store_path_root_dir)
    rng = random.Random(1)

    def request(code: int, fields: dict[str, str], opaque: int) -> bytes:
        command = RemotingCommand(
            code, LanguageCode.JAVA, 407, opaque, 0, None, fields, None, SerializeType.JSON
        )
        return encode_frame(command)

    if kind == "view":
        frames = [
            request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(rng.choice(samples.offsets))}, i)
            for i in range(VIEWS)
        ]
    else:
        pairs = samples.keys + samples.unique_keys
        frames = []
        for i in range(VIEWS):
            topic, key = rng.choice(pairs)
            fields = {"topic": topic, "key": key, "maxNum": "64", "beginTimestamp": "0",
                      "endTimestamp": str(2**63 - 1)}  # fmt: skip
            frames.append(request(RequestCode.QUERY_MESSAGE, fields, i))
    chunks = [b"".join(frames[i : i + per]) for i in range(0, VIEWS, per)]
    identity = BrokerIdentity(
        cluster="DefaultCluster", broker_name="broker-a", address="127.0.0.1:1", queue_nums=4
    )
    extra: dict[str, object] = {}
    if "idle" in inspect.signature(connection_module.RemotingConnection).parameters:
        extra["idle"] = refusal.IdleConnections()  # as the server builds it (older: none)

    def measure(dispatcher: object) -> float:
        transport = _Transport()
        connection = connection_module.RemotingConnection(
            dispatcher,  # type: ignore[arg-type]
            budget=BufferBudget(),
            write_budget=WriteBudget(),
            incomplete=refusal.IncompleteRequests(),
            **extra,  # type: ignore[arg-type]
        )
        connection.connection_made(transport)  # type: ignore[arg-type]
        received = connection.data_received
        if server == "writable":
            for frame in _send_frames(WRITES):
                received(frame)
        # The heap built so far (the store, the server, the frames) moved out of the collector's
        # reach: a full collection's cost grows with it, and one more or one less of them in a run
        # moved a read's count by +-10k instructions under --server writable (a bigger heap).
        gc.collect()
        gc.freeze()
        n = len(chunks)
        for i in range(WARMUP_READS):
            received(chunks[i % n])
        best = float("inf")
        if mode == "time":
            for _ in range(5):
                t0 = time.process_time()
                for chunk in chunks:
                    received(chunk)
                best = min(best, time.process_time() - t0)
        else:
            for i in range(reads):
                received(chunks[i % n])
        if transport.writes < WARMUP_READS:
            raise RuntimeError("the reads were not answered")
        connection.connection_lost(None)
        return best / n * 1e6

    async def read_only() -> float:
        with MessageStore.open(config) as store:
            return measure(build_dispatcher(store, identity, ServerSettings()))

    async def writable(root: Path) -> float:
        from server.broker.writable_store import WritableStore
        from server.remoting.write_path import write_path

        shutil.copytree(config.store_path_root_dir, root)
        copy = dataclasses.replace(config, store_path_root_dir=root, store_path_commit_log=root / "commitlog")
        store = WritableStore(copy)
        try:
            store.create_topic("CostTopic")  # a SEND that creates its topic waits for topics.json
            served = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
            await served.start()
            # Its thread wakes every 25 ms of wall time: under valgrind, the more reads the longer
            # the run and the more wake-ups counted (a cost per second, not per request).
            served.watchdog.stop()
            try:
                return measure(served.dispatcher)
            finally:
                await served.stop()
        finally:
            store.close()

    if server == "writable":
        with tempfile.TemporaryDirectory(prefix="view-read-cost-") as tmp:
            each = asyncio.run(writable(Path(tmp) / "store"))
    else:
        each = asyncio.run(read_only())
    if mode == "time":
        print(json.dumps({"us_per_read": each}))


def _send_frames(n: int) -> list[bytes]:
    """``n`` SEND_MESSAGE_V2 frames to CostTopic's 4 queues, one a read: 256-byte bodies with KEYS,
    TAGS and a fresh UNIQ_KEY, as the Java producer sends them."""
    from protocol.codes import LanguageCode, RequestCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.frame import encode_frame
    from protocol.message_id import UniqueIdGenerator
    from protocol.send_message import SendMessageRequestHeader, client_properties

    ids = UniqueIdGenerator()
    frames = []
    for i in range(n):
        header = SendMessageRequestHeader(
            "load_group", "CostTopic", "TBW102", 4, i % 4, 0, 1700000000000 + i, 0,
            client_properties(f"cost-{i}", "TagL", None, ids.next_id()), 0, False, None, False, "broker-a",
        )  # fmt: skip
        command = RemotingCommand(
            RequestCode.SEND_MESSAGE_V2, LanguageCode.JAVA, 407, 1_000_000 + i, 0, None,
            header.to_ext_fields(v2=True), b"x" * 256, SerializeType.JSON,
        )  # fmt: skip
        frames.append(encode_frame(command))
    return frames


def _child_args(per: int, reads: int, kind: str, server: str) -> list[str]:
    return [str(per), str(reads), kind, server]


def time_read(checkout: Path, per: int, core: str, kind: str, server: str) -> float:
    cmd = [
        "taskset",
        "-c",
        core,
        sys.executable,
        __file__,
        "--child",
        "time",
        *_child_args(per, 0, kind, server),
    ]
    out = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, check=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["us_per_read"])


def count_instructions(
    checkout: Path, per: int, reads: int, toggle: str | None, kind: str, server: str
) -> int:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    if toggle:
        cmd.append(f"--toggle-collect={toggle}")
    cmd += [sys.executable, __file__, "--child", "count", *_child_args(per, reads, kind, server)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dict layouts in every child
    err = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, check=True).stderr
    match = re.search(r"Collected : (\d+)", err)
    if match is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{err[-2000:]}")
    return int(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="checkout A (its accelerators built)")
    parser.add_argument("--checkout", type=Path, default=REPO, help="checkout B (default: this one)")
    parser.add_argument("--per", default="1,8", help="requests per read, comma-separated")
    parser.add_argument("--pairs", type=int, default=5, help="A B rounds (timing)")
    parser.add_argument("--core", default="1", help="core the timed children are pinned to")
    parser.add_argument("--instructions", action="store_true", help="count instructions with valgrind")
    parser.add_argument("--reads", type=int, default=5000, help="reads counted (--instructions)")
    parser.add_argument("--kind", choices=["view", "query"], default="view", help="the lookup measured")
    parser.add_argument(
        "--server", choices=["read-only", "writable"], default="read-only", help="serve, or serve --writable"
    )
    parser.add_argument(
        "--compare-servers",
        action="store_true",
        help="A = --base (default: --checkout) read-only, B = --checkout writable",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, per, reads, *rest = args.child
        child(mode, int(per), int(reads), *rest)
        return 0
    if args.base is None and not args.compare_servers:
        parser.error("--base is required (or --compare-servers)")
    base = (args.base or args.checkout).resolve()
    if args.compare_servers:
        sides = {"A": (base, "read-only"), "B": (args.checkout.resolve(), "writable")}
    else:
        sides = {"A": (base, args.server), "B": (args.checkout.resolve(), args.server)}
    print(
        f"A = {sides['A'][0]} ({sides['A'][1]})\nB = {sides['B'][0]} ({sides['B'][1]})\nkind = {args.kind}\n"
    )
    pers = [int(p) for p in args.per.split(",")]
    if args.instructions:
        print(f"| {args.kind.upper()}s per read | what | A | B | B / A |")
        print("|---:|---|---:|---:|---:|")
        for per in pers:
            for what, toggle in (("whole read", None), ("answer_batch", "answer_batch")):
                got = {}
                for side, (path, server) in sides.items():
                    many = count_instructions(path, per, args.reads, toggle, args.kind, server)
                    none = count_instructions(path, per, 0, toggle, args.kind, server)
                    got[side] = (many - none) / args.reads
                print(f"| {per} | {what} | {got['A']:,.0f} | {got['B']:,.0f} | {got['B'] / got['A']:.3f} |")
        return 0
    print(f"| {args.kind.upper()}s per read | A us/read | B us/read | B / A (median of pairs) | pairs |")
    print("|---:|---:|---:|---:|---|")
    for per in pers:
        a_runs, b_runs, ratios = [], [], []
        for _ in range(args.pairs):
            a = time_read(sides["A"][0], per, args.core, args.kind, sides["A"][1])
            b = time_read(sides["B"][0], per, args.core, args.kind, sides["B"][1])
            a_runs.append(a)
            b_runs.append(b)
            ratios.append(b / a)
        pairs = " ".join(f"{r:.2f}" for r in ratios)
        print(
            f"| {per} | {statistics.median(a_runs):.3f} | {statistics.median(b_runs):.3f} | "
            f"{statistics.median(ratios):.3f} | {pairs} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
