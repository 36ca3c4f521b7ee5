"""What one read of VIEW_MESSAGE_BY_ID frames costs the server in-process, checkout against checkout.

    python -m benchmarks.view_read_cost --base DIR [--checkout DIR] [--per 1,8] [--pairs 5]
    python -m benchmarks.view_read_cost --base DIR --instructions [--reads 5000]

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
call inside the kernel (the per-VIEW ``fstat`` of ``mmap.size()``) and cache misses.
"""

from __future__ import annotations

import argparse
import asyncio
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


def child(mode: str, per: int, reads: int) -> None:
    """In the checkout measured (the working directory, first on ``sys.path``): ``mode`` "time"
    prints the CPU microseconds per read as JSON; "count" answers ``reads`` reads after the warm-up
    (run under valgrind by ``count_instructions``)."""
    sys.path.insert(0, os.getcwd())
    from clients.samples import sample_store
    from protocol.codes import LanguageCode, RequestCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.frame import encode_frame
    from server.app import ServerSettings, build_dispatcher
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
    frames = [
        encode_frame(
            RemotingCommand(RequestCode.VIEW_MESSAGE_BY_ID, LanguageCode.JAVA, 407, i, 0, None,
                            {"offset": str(rng.choice(samples.offsets))}, None, SerializeType.JSON)
        )
        for i in range(VIEWS)
    ]  # fmt: skip
    chunks = [b"".join(frames[i : i + per]) for i in range(0, VIEWS, per)]
    identity = BrokerIdentity(
        cluster="DefaultCluster", broker_name="broker-a", address="127.0.0.1:1", queue_nums=4
    )
    extra: dict[str, object] = {}
    if "idle" in inspect.signature(connection_module.RemotingConnection).parameters:
        extra["idle"] = refusal.IdleConnections()  # as the server builds it (older: none)

    async def run() -> float:
        with MessageStore.open(config) as store:
            dispatcher = build_dispatcher(store, identity, ServerSettings())
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

    each = asyncio.run(run())
    if mode == "time":
        print(json.dumps({"us_per_read": each}))


def time_read(checkout: Path, per: int, core: str) -> float:
    cmd = ["taskset", "-c", core, sys.executable, __file__, "--child", "time", str(per), "0"]
    out = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, check=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["us_per_read"])


def count_instructions(checkout: Path, per: int, reads: int, toggle: str | None) -> int:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    if toggle:
        cmd.append(f"--toggle-collect={toggle}")
    cmd += [sys.executable, __file__, "--child", "count", str(per), str(reads)]
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
    parser.add_argument("--per", default="1,8", help="VIEW frames per read, comma-separated")
    parser.add_argument("--pairs", type=int, default=5, help="A B rounds (timing)")
    parser.add_argument("--core", default="1", help="core the timed children are pinned to")
    parser.add_argument("--instructions", action="store_true", help="count instructions with valgrind")
    parser.add_argument("--reads", type=int, default=5000, help="reads counted (--instructions)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return 0
    if args.base is None:
        parser.error("--base is required")
    sides = {"A": args.base.resolve(), "B": args.checkout.resolve()}
    print(f"A = {sides['A']}\nB = {sides['B']}\n")
    pers = [int(p) for p in args.per.split(",")]
    if args.instructions:
        print("| VIEWs per read | what | A | B | B / A |")
        print("|---:|---|---:|---:|---:|")
        for per in pers:
            for what, toggle in (("whole read", None), ("answer_batch", "answer_batch")):
                got = {}
                for side, path in sides.items():
                    many = count_instructions(path, per, args.reads, toggle)
                    none = count_instructions(path, per, 0, toggle)
                    got[side] = (many - none) / args.reads
                print(f"| {per} | {what} | {got['A']:,.0f} | {got['B']:,.0f} | {got['B'] / got['A']:.3f} |")
        return 0
    print("| VIEWs per read | A us/read | B us/read | B / A (median of pairs) | pairs |")
    print("|---:|---:|---:|---:|---|")
    for per in pers:
        a_runs, b_runs, ratios = [], [], []
        for _ in range(args.pairs):
            a = time_read(sides["A"], per, args.core)
            b = time_read(sides["B"], per, args.core)
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
