"""Throughput of ``spark.read.format("rocketmq")`` against the sequential walk (issue 36).

A CommitLog of ``--mib`` MiB is generated (``store.spark.synthetic``: ~0.5 KiB records, four topics,
mixed keys), then every row of it is produced:

- ``sequential``: ``CommitLog.iter_records`` + ``decode_message`` + ``message_row`` in this process
  (what ``rmq-query export`` does without Spark);
- ``local[N]``: the DataFrame written to Spark's ``noop`` sink (every column of every row is built
  and handed to the JVM, nothing written), session start-up not counted;
- ``local[N] topic``: the same with ``topic = 'TopicA'`` (a quarter of the records, found through
  the ConsumeQueues the benchmark builds first).

Usage: ``python benchmarks/spark_table.py --mib 128 --masters local[1] local[2]``. One JSON line
per engine: rows, seconds, rows/s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocol.message import decode_message
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.spark.message_rows import message_row
from store.spark.synthetic import write_commitlog

MIB = 1024 * 1024


def _sequential(config: StoreConfig) -> dict[str, object]:
    started = time.perf_counter()
    log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    rows = 0
    try:
        for _offset, buf in log.iter_records():
            message_row(decode_message(buf), "bench")
            rows += 1
    finally:
        log.close()
    seconds = time.perf_counter() - started
    return {
        "engine": "sequential",
        "rows": rows,
        "seconds": round(seconds, 2),
        "rows_per_s": int(rows / seconds),
    }


def _spark(config: StoreConfig, master: str, range_mib: int, cores: int = 0) -> list[dict[str, object]]:
    from store.spark.message_source import register
    from store.spark.session import build_session

    session = build_session(master, conf={"spark.cores.max": str(cores)} if cores else None)
    register(session)
    sc = session.sparkContext
    sc.parallelize(range(8), 8).count()  # start the Python workers before timing
    out = []
    try:
        for label, where in ((master, None), (f"{master} topic", "topic = 'TopicA'")):
            frame = (
                session.read.format("rocketmq")
                .option("rangeMiB", str(range_mib))
                .load(str(config.store_path_root_dir))
            )
            if where:
                frame = frame.filter(where)
            started = time.perf_counter()
            frame.write.format("noop").mode("overwrite").save()
            seconds = time.perf_counter() - started
            rows = frame.count()
            out.append(
                {
                    "engine": label,
                    "rows": rows,
                    "seconds": round(seconds, 2),
                    "rows_per_s": int(rows / seconds),
                }
            )
    finally:
        session.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=128, help="CommitLog size to generate")
    parser.add_argument("--file-mib", type=int, default=64, help="CommitLog file size")
    parser.add_argument("--range-mib", type=int, default=16, help="bytes per read task")
    parser.add_argument("--masters", nargs="*", default=["local[1]", "local[2]"])
    parser.add_argument(
        "--standalone", type=int, default=0, help="also a standalone cluster of this many 1-core workers"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rmq-table-bench-") as tmp:
        root = Path(tmp)
        log = write_commitlog(
            root / "commitlog", file_size=args.file_mib * MIB, total_bytes=args.mib * MIB, body_size=(64, 512)
        )
        config = StoreConfig.for_store(root, mapped_file_size_commit_log=args.file_mib * MIB)
        from store.consumequeue.builder import rebuild_consume_queues

        rebuild_consume_queues(config).close()
        print(json.dumps({"records": log.records, "bytes": log.record_bytes, "files": log.files}))
        print(json.dumps(_sequential(config)), flush=True)
        for master in args.masters:
            for line in _spark(config, master, args.range_mib):
                print(json.dumps(line), flush=True)
        if args.standalone:
            from benchmarks.spark_rebuild import start_standalone, stop_standalone

            url, procs = start_standalone(args.standalone, root / "cluster")
            try:
                for line in _spark(config, url, args.range_mib, cores=args.standalone):
                    line["engine"] = str(line["engine"]).replace(url, f"standalone x{args.standalone}")
                    print(json.dumps(line), flush=True)
            finally:
                stop_standalone(procs)


if __name__ == "__main__":
    main()
