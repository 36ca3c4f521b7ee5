"""The in-process cost of one ``WritableStore.put`` (what a SEND costs the server past its frame),
and where it goes: the append, the CommitLog's part of the settle, each dispatcher, the index audit.

    taskset -c 1 python -m benchmarks.put_cost --puts 5000 [--group N] [--files F]

``--group N``: N appends settled once (``append`` N times, then ``settle``), as the compiled request
path stores the SENDs of one read; the figures are still per record. ``--files F``: 64 KiB CommitLog
files, F of them written before the timing (how a put's cost grows with the store's files).

A fresh store in a temporary directory with the test kit's geometry (``clients.testkit``); one
256-byte record a put with KEYS, TAGS and a fresh UNIQ_KEY, four queues in turn. The parts are
timed by wrapping the store's own methods, so their sum is a little less than the whole.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clients.testkit.server import kit_store_config
from server.broker.writable_store import WritableStore
from store.consumequeue.builder import ConsumeQueueBuilder
from store.write.writer import StoreRecord

#: The parts timed: the append; the walk's path (``commitlog_refresh``: the CommitLog's refresh,
#: ``reput``: the reput's pass); the written span's path (``commitlog_written``: the CommitLog's end
#: moved over the writer's own records, ``dispatch_written``: both dispatchers handed them, of
#: which ``cq_dispatch`` and ``index_dispatch`` on either path); the index audit; the refresh of the
#: consume queues written.
PARTS = (
    "append",
    "commitlog_refresh",
    "reput",
    "commitlog_written",
    "dispatch_written",
    "cq_dispatch",
    "index_dispatch",
    "index_audit",
    "queues_refresh",
)
#: The CommitLog file size of a ``--files`` run: small, so that many files are quick to write.
FILL_FILE_SIZE = 64 * 1024


def _timed(acc: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[name] += time.perf_counter() - started

    return wrapped


def measure(puts: int, group: int = 1, files: int = 0) -> dict[str, float]:
    """Microseconds per put, whole and by part; ``group`` appends per settle; ``files`` CommitLog
    files of 64 KiB written first (0: the test kit's geometry, from an empty store)."""
    with tempfile.TemporaryDirectory() as tmp:
        overrides = {"mapped_file_size_commit_log": FILL_FILE_SIZE} if files else {}
        store = WritableStore(kit_store_config(Path(tmp) / "store", **overrides))
        try:
            props = "KEYS\x01key-%d\x02TAGS\x01TagA\x02UNIQ_KEY\x01%032X\x02"
            filler = b"f" * 2000
            for i in range(files * (FILL_FILE_SIZE // 2100)):  # ~31 records a file
                store.put([StoreRecord("PutCostFill", filler, props % (i, i))])
            records = [
                StoreRecord("PutCost", b"x" * 256, props % (i, i), queue_id=i % 4) for i in range(puts)
            ]
            parts = dict.fromkeys(PARTS, 0.0)
            reader = store.reader
            commitlog = reader.commitlog
            store.writer.put_batch = _timed(parts, "append", store.writer.put_batch)  # type: ignore[method-assign]
            commitlog.refresh = _timed(parts, "commitlog_refresh", commitlog.refresh)  # type: ignore[method-assign]
            commitlog.refresh_written = _timed(parts, "commitlog_written", commitlog.refresh_written)  # type: ignore[method-assign]
            reput = reader._reput  # the benchmark looks inside on purpose
            if reput is not None:
                reput.run_once = _timed(parts, "reput", reput.run_once)  # type: ignore[method-assign]
                reput.dispatch_written = _timed(parts, "dispatch_written", reput.dispatch_written)  # type: ignore[method-assign]
                for d in reput.dispatchers:
                    name = "cq_dispatch" if isinstance(d, ConsumeQueueBuilder) else "index_dispatch"
                    d.dispatch = _timed(parts, name, d.dispatch)  # type: ignore[method-assign]
            reader.index.audit = _timed(parts, "index_audit", reader.index.audit)  # type: ignore[method-assign]
            reader.queues.refresh_some = _timed(parts, "queues_refresh", reader.queues.refresh_some)  # type: ignore[method-assign]
            started = time.perf_counter()
            if group == 1:
                for rec in records:
                    store.put([rec])
            else:
                for first in range(0, puts, group):
                    for rec in records[first : first + group]:
                        store.append([rec])
                    store.settle()
            whole = time.perf_counter() - started
        finally:
            store.close()
    return {"put_us": whole / puts * 1e6, **{f"{k}_us": v / puts * 1e6 for k, v in parts.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--puts", type=int, default=5000, help="puts to time (default 5000)")
    parser.add_argument("--group", type=int, default=1, help="appends per settle (default 1: a put each)")
    parser.add_argument("--files", type=int, default=0, help="64 KiB CommitLog files written first")
    args = parser.parse_args(argv)
    if args.puts < 1 or args.group < 1 or args.files < 0:
        parser.error("--puts and --group must be at least 1, --files at least 0")
    print(json.dumps({k: round(v, 1) for k, v in measure(args.puts, args.group, args.files).items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
