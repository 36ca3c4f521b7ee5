"""A filtered read of a big store against a full scan: bytes touched, rows and time (issue 36).

The issue asks that ``where topic = X and storeTimestamp between H and H+1h`` over a 16 GiB store
touch only that topic's ranges. ``--generate`` writes such a store with ``StoreWriter`` (1 GiB
CommitLog files, ``--topics`` topics of 4 queues each, ``--body``-byte bodies, store times spread
evenly over ``--hours`` hours, written in small per-queue batches so the topics interleave along the
CommitLog every few KiB) and its ConsumeQueues. Then, for each engine (the sequential ``export``
walk in this process, and Spark at each ``--masters``):

- ``full``: every row of the store (the ``topic``/``storeTimestamp`` columns only, so the figure is
  the walk's, not the bodies' copying);
- ``filtered``: ``topic = X AND storeTimestamp BETWEEN H AND H + 1h``, X the first topic and H an
  hour in the middle of the span.

What a read touched is measured from the outside: before each read the store's CommitLog pages are
dropped from the page cache (``posix_fadvise(DONTNEED)`` on the store's own files, nothing else), and
after it the CommitLog's resident bytes (``mincore``, what ``fincore`` reports) are the bytes the
read brought in; the summed ``read_bytes`` of ``/proc/<pid>/io`` of this process and its children
(Spark's JVM and its Python workers) is the disk's side of the same figure.

    python -m benchmarks.spark_filtered_scale --dir /work/h23-big --gib 16 --generate-only
    flock -o /work/bench.lock taskset -c 0,1 python -m benchmarks.spark_filtered_scale --dir /work/h23-big
    python -m benchmarks.spark_filtered_scale --dir /work/h23-big --clean
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.store_open import evict_files
from store.config.store_config import StoreConfig
from store.write.writer import StoreRecord, StoreWriter

GIB = 1 << 30
HOUR_MS = 3_600_000
#: The first store timestamp of the generated store (2026-11-28T00:00:00Z).
T0 = 1_795_824_000_000
QUEUES = 4
#: Records per ``put_batch`` (one topic and queue, one store timestamp).
BATCH = 4


def topic_name(i: int) -> str:
    return f"scale-topic-{i:03d}"


def generate(root: Path, gib: int, topics: int, body_size: int, hours: int) -> dict[str, int]:
    """Write ``gib`` GiB of CommitLog and its ConsumeQueues (no IndexFiles)."""
    config = StoreConfig.for_store(root, broker_ip1="127.0.0.1", message_index_enable=False)
    limit = gib * GIB
    record_guess = body_size + 140
    batches = limit // (record_guess * BATCH) + 1
    step = hours * HOUR_MS / batches
    body = (bytes(range(256)) * (body_size // 256 + 1))[:body_size]
    n = 0
    started = time.perf_counter()
    with StoreWriter(config) as writer:
        b = 0
        while writer.position < limit:
            topic = topic_name((b * 7) % topics)
            queue = (b // topics) % QUEUES
            ts = T0 + int(b * step)
            recs = [
                StoreRecord(
                    topic,
                    body,
                    f"KEYS\x01order-{n + j}\x02TAGS\x01t{(n + j) % 5}\x02",
                    queue_id=queue,
                    born_timestamp=ts - 2,
                )
                for j in range(BATCH)
            ]
            writer.put_batch(recs, store_timestamp=ts)
            n += BATCH
            b += 1
            if b % 200_000 == 0:
                print(f"  {writer.position / GIB:.2f} GiB, {n} records", file=sys.stderr, flush=True)
    return {"records": n, "bytes": limit, "seconds": int(time.perf_counter() - started)}


def commitlog_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "commitlog").iterdir() if p.name.isdigit())


def resident_bytes(files: list[Path]) -> int:
    """The bytes of ``files`` in the page cache now (util-linux ``fincore``: ``mincore`` per page)."""
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", *map(str, files)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return sum(int(v) for v in out.split())


def _descendants(pid: int) -> list[int]:
    out = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for child in children:
        out.extend(_descendants(int(child)))
    return out


def read_bytes_now() -> dict[int, int]:
    """``read_bytes`` of this process and each of its descendants (Spark's JVM, its Python workers)."""
    out = {}
    for pid in _descendants(os.getpid()):
        try:
            for line in Path(f"/proc/{pid}/io").read_text().splitlines():
                if line.startswith("read_bytes:"):
                    out[pid] = int(line.split()[1])
        except OSError:
            continue
    return out


def _delta(before: dict[int, int], after: dict[int, int]) -> int:
    # A process that started during the read counts from zero; one that ended is not seen (Spark's
    # Python workers are reused for the session, started before the first timed read).
    return sum(v - before.get(pid, 0) for pid, v in after.items())


def measured(label: str, files: list[Path], run) -> dict[str, object]:
    evict_files(files)  # the store's own pages only, not the machine's cache
    resident0 = resident_bytes(files)
    io0 = read_bytes_now()
    started = time.perf_counter()
    rows = run()
    seconds = time.perf_counter() - started
    io1 = read_bytes_now()
    touched = resident_bytes(files) - resident0
    return {
        "read": label,
        "rows": rows,
        "seconds": round(seconds, 2),
        "touched_mib": round(touched / (1 << 20), 1),
        "read_bytes_mib": round(_delta(io0, io1) / (1 << 20), 1),
    }


def where(topic: str, lo: int, hi: int) -> str:
    return f"topic = '{topic}' AND storeTimestamp BETWEEN {lo} AND {hi}"


def sequential(
    root: Path, files: list[Path], topic: str, lo: int, hi: int, full: bool = True
) -> list[dict[str, object]]:
    """The ``rmq-query export`` walk (no Spark): the same planned tasks, one after another."""
    from store.spark.message_plan import open_store, plan_store
    from store.spark.message_rows import RowFilter, range_rows, record_rows

    source = open_store(root)
    cols = ("topic", "storeTimestamp")

    def count(row_filter: RowFilter) -> int:
        tasks, _ = plan_store(source, row_filter)
        n = 0
        for t in tasks:
            if t.offsets is not None:
                rows = record_rows(t.rng, t.offsets, t.broker, cols, t.row_filter)
            else:
                rows = range_rows(t.rng, t.broker, cols, t.row_filter)
            n += sum(1 for _ in rows)
        return n

    narrow = RowFilter(frozenset({topic}), lo, hi, queued_only=True)
    out = [measured("sequential full", files, lambda: count(RowFilter()))] if full else []
    return [*out, measured("sequential filtered", files, lambda: count(narrow))]


def spark(
    root: Path, files: list[Path], master: str, topic: str, lo: int, hi: int, full: bool = True
) -> list[dict[str, object]]:
    from store.spark.message_source import register
    from store.spark.session import build_session

    session = build_session(master)
    register(session)
    session.sparkContext.parallelize(range(8), 8).count()  # the Python workers, before any figure
    out = []
    try:
        frame = session.read.format("rocketmq").option("columns", "topic,storeTimestamp").load(str(root))
        if full:
            out.append(measured(f"{master} full", files, lambda: frame.count()))
        out.append(measured(f"{master} filtered", files, lambda: frame.filter(where(topic, lo, hi)).count()))
    finally:
        session.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--gib", type=int, default=16)
    parser.add_argument("--topics", type=int, default=64)
    parser.add_argument("--hours", type=int, default=8)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--masters", nargs="*", default=["local[1]", "local[2]"])
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument("--no-sequential", action="store_true")
    parser.add_argument("--filtered-only", action="store_true", help="leave out the full scans")
    parser.add_argument("--clean", action="store_true")
    args = parser.parse_args()
    root = args.dir
    if args.clean:
        shutil.rmtree(root, ignore_errors=True)
        return
    if not (root / "commitlog").is_dir():
        print(
            json.dumps({"generated": generate(root, args.gib, args.topics, args.body, args.hours)}),
            flush=True,
        )
    if args.generate_only:
        return
    files = commitlog_files(root)
    topic = topic_name(0)
    lo = T0 + (args.hours // 2) * HOUR_MS
    hi = lo + HOUR_MS - 1
    print(
        json.dumps(
            {"store_gib": round(sum(f.stat().st_size for f in files) / GIB, 2), "where": where(topic, lo, hi)}
        )
    )
    if not args.no_sequential:
        for line in sequential(root, files, topic, lo, hi, not args.filtered_only):
            print(json.dumps(line), flush=True)
    for master in args.masters:
        for line in spark(root, files, master, topic, lo, hi, not args.filtered_only):
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
