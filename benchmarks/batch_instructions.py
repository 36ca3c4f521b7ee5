"""Instructions per batch SEND (32 x 1 KiB) in-process, a loop turn per read, counted by valgrind.

    python -m benchmarks.batch_instructions [--batches 200] [--checkout DIR ...]

A synchronous producer's batches reach the server one per read and one per turn of its loop, so
each pays what a writable store's settle does once a turn (``MessageStore.once_per_turn``) and the
loop's own callbacks. Timings of ~100 us on a shared host move by more than the few microseconds a
change of that work makes; instruction counts do not. For each checkout (this one by default;
``--checkout`` adds others, e.g. ``main`` with its accelerators built) a child process starts
``serve --writable``'s dispatcher over a fresh store at the default geometry (``QueryServer`` with
``write_path``, as ``request_costs.on_writable_server``), feeds 50 batches to warm up, then
``--batches`` more through a ``RemotingConnection`` (``request_costs._CountingTransport``), turning
the loop after each, under ``valgrind --tool=callgrind``, which counts only between two markers
around those batches (``getppid`` zeroes the counts, ``getpgrp`` dumps them: ``--zero-before``,
``--dump-before``). Subtracting a run without batches, as the first version did, left the ~2.3
billion instructions of the start in both, and they moved by millions between runs (tens of
thousands a batch of noise). The batches are ``request_costs.batch_rows``' shape: each message with
KEYS, TAGS and its own UNIQ_KEY, the header's ``WAIT=true``; 100 distinct batches sent in turn.

Everything timed by the clock while the batches are sent reads a clock that moves ``--step-us`` (100
us, about a batch's native cost) per batch, not the real one: the store's interval gates (the index
audit every ``AUDIT_EVERY``, the CommitLog's full check every ``FULL_CHECK_EVERY``, the queue table's
and the disk check's intervals), the event loop's timers (the loop watchdog's beat every 25 ms, the
server's periodic work) and the watchdog thread's look. Under valgrind a batch takes milliseconds,
and with the real clock all of those ran far more often than at the native rate, and how often
depended on the host's load: one checkout counted 363,742 and 401,862 instructions a batch under
load averages of 3 and 11. ``--step-us 0`` keeps the real clock. What it cannot see:
the kernel's share (the ``pwrite``, the answer's ``write`` and its wake-up: pair it with
``/tmp/strace_run.sh``-style system call counts and a timing on the wire).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WARM_UP = 50
DISTINCT = 100
#: The modules whose interval gates read ``time.monotonic`` (the event loop's is set on the loop).
CLOCKED = (
    "store.message_store",
    "store.commitlog.mapped_files",
    "store.index.service",
    "store.consumequeue.queue_table",
    "server.loop_watchdog",
)


class _BatchClock:
    """``time`` for the store's interval gates, ``monotonic`` moved by the harness by a fixed step
    per batch: the same gates open in every run, whatever valgrind's slowdown and the host's load."""

    def __init__(self, step: float) -> None:
        self.now = time.monotonic()
        self.step = step

    def monotonic(self) -> float:
        return self.now

    def tick(self) -> None:
        self.now += self.step

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


def _chunks() -> list[bytes]:
    """``DISTINCT`` SEND_BATCH_MESSAGE frames of 32 x 1 KiB (``request_costs.batch_rows``' shape)."""
    from protocol.codes import LanguageCode, RequestCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.frame import encode_frame
    from protocol.message_id import UniqueIdGenerator
    from protocol.send_message import SendMessageRequestHeader, encode_batch_body

    ids = UniqueIdGenerator()
    chunks = []
    for b in range(DISTINCT):
        messages = [
            (0, b"x" * 1024, {"KEYS": f"batch-{b}-{m}", "TAGS": "TagB", "UNIQ_KEY": ids.next_id()})
            for m in range(32)
        ]
        header = SendMessageRequestHeader(
            "load_group", "CostTopic", "TBW102", 4, b % 4, 0, 1700000000000 + b, 0,
            "WAIT\x01true\x02", 0, False, None, True, "broker-a",
        )  # fmt: skip
        command = RemotingCommand(
            RequestCode.SEND_BATCH_MESSAGE, LanguageCode.JAVA, 407, b, 0, None,
            header.to_ext_fields(v2=True), encode_batch_body(messages), SerializeType.JSON,
        )  # fmt: skip
        chunks.append(encode_frame(command))
    return chunks


def child(batches: int, step_us: int) -> None:
    """Send ``WARM_UP`` + ``batches`` batches, a loop turn after each (run under valgrind by
    ``main``, in the checkout measured: its code is imported, whichever checkout this file is in);
    with ``step_us`` the store's gates on the batch clock (``_BatchClock``)."""
    sys.path.insert(0, os.getcwd())
    import importlib

    clock = _BatchClock(step_us / 1e6) if step_us else None
    if clock is not None:
        for name in CLOCKED:
            importlib.import_module(name).time = clock  # type: ignore[attr-defined]
    from benchmarks.request_costs import _CountingTransport
    from server.app import QueryServer, ServerSettings
    from server.broker.writable_store import WritableStore
    from server.remoting.buffer_budget import BufferBudget
    from server.remoting.connection import RemotingConnection
    from server.remoting.write_path import write_path
    from store.config.store_config import StoreConfig

    chunks = _chunks()
    with tempfile.TemporaryDirectory(prefix="rmq-batch-instr-") as tmp:
        # No CommitLog cache window: its worker thread takes a job when it is idle, which under
        # valgrind's thread scheduling is a different number of jobs (and GIL hand-overs) each run.
        config = StoreConfig.for_store(
            Path(tmp) / "store", broker_ip1="127.0.0.1", broker_name="broker-a", commit_log_cache_window=0
        )
        disk = None
        if clock is not None:
            from store.write.disk_space import DiskSpaceCheck

            disk = DiskSpaceCheck(config.store_path_commit_log, monotonic=clock.monotonic)
        store = WritableStore(config, disk_check=disk)
        store.create_topic("CostTopic")

        async def run() -> None:
            server = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
            await server.start()
            try:
                transport = _CountingTransport()
                connection = RemotingConnection(server.dispatcher, idle_timeout=0, budget=BufferBudget())
                connection.connection_made(transport)  # type: ignore[arg-type]
                loop = asyncio.get_running_loop()
                if clock is not None:
                    # from the real time now on, the loop's timers too; only ``sleep(0)`` is awaited
                    # meanwhile, so no wait of the loop is computed on it
                    clock.now = time.monotonic()
                    loop.time = clock.monotonic  # type: ignore[method-assign]
                for i in range(WARM_UP + batches):
                    if i == WARM_UP:
                        os.getppid()  # the marker valgrind zeroes its counts at
                    if clock is not None:
                        clock.tick()
                    connection.data_received(chunks[i % DISTINCT])
                    await asyncio.sleep(0)
                os.getpgrp()  # the marker valgrind dumps the counts at
                if clock is not None:
                    del loop.time  # the real clock again before the server stops
                assert transport.writes >= WARM_UP + batches  # every batch was answered
                connection.connection_lost(None)
            finally:
                await server.stop()

        try:
            asyncio.run(run())
        finally:
            store.close()


def instructions(checkout: Path, batches: int, step_us: int) -> int:
    """The instructions of ``batches`` batches after the warm-up, counted between the markers."""
    with tempfile.TemporaryDirectory(prefix="rmq-batch-instr-cg-") as tmp:
        out_file = Path(tmp) / "cg.out"
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", "--zero-before=getppid",
               "--dump-before=getpgrp", sys.executable, __file__, "--child", str(batches),
               "--step-us", str(step_us)]  # fmt: skip
        env = {**os.environ, "PYTHONHASHSEED": "0"}  # one hash seed: the same dict and set layouts
        done = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, check=False)
        dump = Path(f"{out_file}.1")
        match = re.search(r"^summary: (\d+)", dump.read_text(), re.M) if dump.exists() else None
        if done.returncode != 0 or match is None:
            raise RuntimeError(f"no instruction count from valgrind:\n{done.stderr[-2000:]}")
        return int(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--checkout", type=Path, action="append", default=[])
    parser.add_argument("--step-us", type=int, default=100, help="the store's clock step per batch (0: real)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.step_us)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed", file=sys.stderr)
        return 2
    print("| checkout | instructions per batch (32 x 1 KiB, a loop turn each) |")
    print("|---|---:|")
    for checkout in [REPO, *args.checkout]:
        per_batch = instructions(checkout, args.batches, args.step_us) // args.batches
        print(f"| {checkout} | {per_batch:,} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
