"""What one lone SEND costs the server in-process, in figures the machine's noise cannot move.

    python -m benchmarks.lone_send_cost [--sends 2000] [--base DIR] [--instructions] [--syscalls]
    flock -o /work/bench.lock taskset -c 1 python -m benchmarks.lone_send_cost --base DIR --pairs 5

Under ``sync1`` (one synchronous producer thread) every read brings one SEND, and the server pays the
whole read alone: the compiled call, the settle (reput, consume queue, index, audit), the answer. This
feeds SEND_MESSAGE_V2 frames (``request_costs.send_frames``: 256-byte body, KEYS, TAGS, a fresh
UNIQ_KEY) one a read to ``RemotingConnection`` over ``serve --writable``'s dispatcher, one loop turn
between reads (``settle_turns``' shape, 1 connection), on a fresh store with the broker's default
index geometry (the test kit's small index files roll every 2,000 of these SENDs). Each checkout
(this one, and ``--base``: another checkout with its accelerators built) runs in a child process of
its own code. ``--instructions``: instructions per SEND counted by ``valgrind --tool=callgrind``
(``--sends`` SENDs minus a run of 0, after the same warm-up), what the kernel does inside a system
call not counted, and the store's checks timed by the clock (a full look at the CommitLog's and
the index's files every 50 ms) put off for the run, since valgrind's slowness would make them come
every few SENDs. ``--syscalls``: system calls per SEND by name (``strace -f -c``, the same
subtraction). ``--pairs N``: CPU time per SEND, best of 3 rounds, A B A B ... N times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: SENDs each child answers before the counted ones (the store's first file, the index file made).
WARM = 300
#: The broker's own index geometry (``StoreConfig``'s defaults): no roll inside a run.
DEFAULT_INDEX = {"max_hash_slot_num": 5_000_000, "max_index_num": 20_000_000}


def _steady() -> None:
    """Under valgrind (~50x slower) the store's checks timed in wall-clock seconds (the CommitLog's,
    the index's and a written consume queue's full look every 50 ms) would come every few SENDs
    instead of every few hundred, and their count would move with the machine's load: for counting,
    they are put off for the run (the same in every checkout), so the count is the lone SEND's
    steady path."""
    import store.commitlog.mapped_files as mapped_files
    import store.consumequeue.queue_table as queue_table
    import store.index.service as index_service

    mapped_files.FULL_CHECK_EVERY = 1e9
    index_service.FULL_AUDIT_EVERY = 1e9
    queue_table.FULL_LOOK_EVERY = 1e9


def child(sends: int, rounds: int, built: int) -> None:
    """In the checkout measured (the working directory): ``WARM`` lone SENDs, then ``rounds`` rounds
    of ``sends``; prints the best CPU µs per SEND of the rounds as JSON. ``built``: frames made for
    the counted rounds (at least ``sends * rounds``; a run of 0 SENDs makes as many as the run it is
    subtracted from, so that making them is not counted as the SENDs')."""
    sys.path.insert(0, os.getcwd())
    from benchmarks.request_costs import _CountingTransport, on_writable_server, send_frames
    from clients.testkit.server import kit_store_config
    from server.broker.writable_store import WritableStore
    from server.remoting.buffer_budget import BufferBudget
    from server.remoting.connection import RemotingConnection
    from server.remoting.refusal import IncompleteRequests
    from server.remoting.write_budget import WriteBudget

    if os.environ.get("RMQ_LONE_SEND_STEADY") == "1":
        _steady()
    frames = send_frames(WARM + max(built, sends * rounds))
    best = [float("inf")]

    async def timed(dispatcher: Any) -> None:
        transport = _CountingTransport()
        c = RemotingConnection(
            dispatcher,
            idle_timeout=0,
            budget=BufferBudget(),
            write_budget=WriteBudget(),
            incomplete=IncompleteRequests(),
        )
        c.connection_made(transport)  # type: ignore[arg-type]
        for frame in frames[:WARM]:
            c.data_received(frame)
            await asyncio.sleep(0)
        at = WARM
        for _ in range(rounds):
            t0 = time.process_time()
            for _ in range(sends):
                c.data_received(frames[at])
                at += 1
                await asyncio.sleep(0)
            best[0] = min(best[0], time.process_time() - t0)
        c.connection_lost(None)
        if transport.writes < WARM + sends * rounds:
            raise RuntimeError(f"{transport.writes} answers written for {WARM + sends * rounds} SENDs")

    with tempfile.TemporaryDirectory(prefix="rmq-lone-send-") as tmp:
        store = WritableStore(kit_store_config(Path(tmp) / "store", **DEFAULT_INDEX))
        store.create_topic("CostTopic")
        on_writable_server(store, timed)
    print(json.dumps({"us_per_send": best[0] / max(sends, 1) * 1e6}))


def _child_cmd(sends: int, rounds: int, built: int = 0) -> list[str]:
    script = str(Path(__file__).resolve())
    return [sys.executable, script, "--child", str(sends), "--rounds", str(rounds), "--built", str(built)]


def _env() -> dict[str, str]:
    # The same hash seed for every child: a dict's or set's layout otherwise moves the counts by ~1%.
    return {**os.environ, "PYTHONHASHSEED": "0"}


def cpu_us(checkout: Path, sends: int) -> float:
    out = subprocess.run(
        _child_cmd(sends, 3), cwd=checkout, env=_env(), capture_output=True, text=True, check=True
    ).stdout
    return float(json.loads(out.strip().splitlines()[-1])["us_per_send"])


def instructions(checkout: Path, sends: int, built: int) -> int:
    """Instructions of the child with ``sends`` counted SENDs (valgrind's total)."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *_child_cmd(sends, 1, built)]
    env = {**_env(), "RMQ_LONE_SEND_STEADY": "1"}
    err = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, check=True).stderr
    found = re.search(r"Collected\s*:\s*(\d+)", err)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{err[-2000:]}")
    return int(found.group(1))


def syscalls(checkout: Path, sends: int, built: int) -> dict[str, int]:
    """System calls by name of the child with ``sends`` counted SENDs (``strace -f -c``)."""
    with tempfile.NamedTemporaryFile(prefix="rmq-strace-", suffix=".txt") as out:
        cmd = ["strace", "-f", "-c", "-o", out.name, *_child_cmd(sends, 1, built)]
        # The steady path, as for the instruction counts: the CommitLog's and the index's full looks
        # (every 50 ms of wall-clock time: a directory listing, an open) otherwise fall into one
        # child's run and not the other's, by the machine's speed.
        env = {**_env(), "RMQ_LONE_SEND_STEADY": "1"}
        subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, check=True)
        counts: dict[str, int] = {}
        for line in Path(out.name).read_text().splitlines():
            parts = line.split()
            # "% time  seconds  usecs/call  calls  [errors]  syscall"
            if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
                counts[parts[-1]] = int(parts[3])
        return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=2000, help="counted lone SENDs per child")
    parser.add_argument("--base", type=Path, help="another checkout (accelerators built) to compare")
    parser.add_argument("--instructions", action="store_true", help="count instructions with valgrind")
    parser.add_argument("--syscalls", action="store_true", help="count system calls with strace")
    parser.add_argument("--pairs", type=int, default=0, help="A B pairs of CPU time per SEND")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--built", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.rounds, args.built)
        return 0
    if args.sends < 1 or args.pairs < 0:
        parser.error("--sends must be at least 1 and --pairs at least 0")
    if args.base is not None and not (args.base / "server").is_dir():
        parser.error(f"--base {args.base} is not a checkout (no server/ in it)")
    checkouts = {"B": REPO} if args.base is None else {"A": args.base.resolve(), "B": REPO}
    result: dict[str, Any] = {}
    for name, path in checkouts.items():
        if args.instructions:
            result[f"{name} instructions per SEND"] = round(
                (instructions(path, args.sends, 0) - instructions(path, 0, args.sends)) / args.sends
            )
        if args.syscalls:
            many, none = syscalls(path, args.sends, 0), syscalls(path, 0, args.sends)
            per = {k: round((v - none.get(k, 0)) / args.sends, 3) for k, v in many.items()}
            result[f"{name} system calls per SEND"] = {k: v for k, v in sorted(per.items()) if v >= 0.005}
    if args.pairs:
        times: dict[str, list[float]] = {name: [] for name in checkouts}
        for _ in range(args.pairs):
            for name, path in checkouts.items():
                times[name].append(round(cpu_us(path, args.sends), 2))
        result["CPU us per SEND"] = times
        if "A" in times:
            result["B / A per pair"] = [round(b / a, 3) for a, b in zip(times["A"], times["B"], strict=True)]
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
