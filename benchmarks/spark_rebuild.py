"""Sequential builder vs Spark: rebuild the index of generated CommitLogs of several sizes, side by side.

For each ``--sizes-mib`` size, a CommitLog is generated under ``--dir`` (1 GiB files by default, the
broker's; ``store.spark.synthetic``: ~1.1 KiB records, mixed keys), its index is rebuilt once by the
sequential ``IndexBuilder`` and once by the Spark pipeline on ``--master`` (``local[2]``), the two
outputs are compared byte for byte, and the CommitLog and both indexes are deleted before the next
size (at most one size is on disk at a time). The Spark session is started once; its start-up time is
reported separately and not counted in any rebuild. Geometry: the broker's default (5,000,000 slots,
20,000,000 entries) unless given.

    python -m benchmarks.spark_rebuild --sizes-mib 512,1024,2048 --master 'local[2]'
"""

from __future__ import annotations

import argparse
import filecmp
import io
import shutil
import time
from pathlib import Path

from store.config.store_config import DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, StoreConfig
from store.index.builder import IndexBuilder
from store.spark.rebuild import rebuild_index_spark
from store.spark.session import build_session
from store.spark.synthetic import write_commitlog

MIB = 1 << 20


def _same(a: Path, b: Path) -> bool:
    left, right = sorted(a.iterdir()), sorted(b.iterdir())
    return len(left) == len(right) and all(
        filecmp.cmp(x, y, shallow=False) for x, y in zip(left, right, strict=True)
    )


def _spin(_: int) -> float:
    """CPU seconds' worth of pure Python; returns its wall time."""
    started = time.perf_counter()
    total = 0
    for i in range(5_000_000):
        total += i
    return time.perf_counter() - started


def cpu_check() -> str:
    """How much two processes really run in parallel here (shared vCPUs can give far less than 2x)."""
    from concurrent.futures import ProcessPoolExecutor

    alone = _spin(0)
    with ProcessPoolExecutor(2) as pool:
        started = time.perf_counter()
        list(pool.map(_spin, range(4)))
        pair = time.perf_counter() - started
    speedup = 4 * alone / pair
    return (
        f"CPU check: one loop alone {alone:.2f} s; four on 2 processes {pair:.2f} s (speed-up {speedup:.2f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/rmq-spark-bench"))
    parser.add_argument("--sizes-mib", default="512,1024,2048", help="CommitLog sizes, comma-separated")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--file-mib", type=int, default=1024, help="mappedFileSizeCommitLog in MiB")
    parser.add_argument("--range-mib", type=int, default=64, help="CommitLog bytes per Spark decode task")
    parser.add_argument("--max-hash-slot-num", type=int, default=DEFAULT_MAX_HASH_SLOT_NUM)
    parser.add_argument("--max-index-num", type=int, default=DEFAULT_MAX_INDEX_NUM)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes_mib.split(",")]
    file_size = args.file_mib * MIB

    print(cpu_check())
    started = time.perf_counter()
    session = build_session(args.master)
    # Start the Python workers once, so the first size does not pay for it.
    session.sparkContext.parallelize(range(4), 4).map(lambda x: x).count()
    print(f"spark session {args.master} started (with its workers) in {time.perf_counter() - started:.1f} s")
    print(
        "| CommitLog | records | keys | index files | engine | seconds | records/s | MiB/s | identical |\n"
        "|---|---|---|---|---|---|---|---|---|"
    )
    try:
        for size_mib in sizes:
            root = args.dir / f"store-{size_mib}"
            shutil.rmtree(root, ignore_errors=True)
            try:
                t = time.perf_counter()
                log = write_commitlog(
                    root / "commitlog", file_size=file_size, total_bytes=size_mib * MIB, body_size=(256, 1536)
                )
                gen_s = time.perf_counter() - t
                mib = log.record_bytes / MIB
                print(
                    f"<!-- generated {log.records} records, {mib:.0f} MiB in {log.files} files,"
                    f" {gen_s:.1f} s -->"
                )
                config = StoreConfig.for_store(
                    root,
                    mapped_file_size_commit_log=file_size,
                    max_hash_slot_num=args.max_hash_slot_num,
                    max_index_num=args.max_index_num,
                )
                seq_dir = root / "index-sequential"
                t = time.perf_counter()
                builder = IndexBuilder(
                    config, index_dir=seq_dir, checkpoint_path=root / "checkpoint-sequential"
                )
                builder.run_once()
                builder.close()
                seq_s = time.perf_counter() - t
                spark_dir = root / "index-spark"
                t = time.perf_counter()
                result = rebuild_index_spark(
                    config,
                    spark=session,
                    out_dir=spark_dir,
                    range_bytes=args.range_mib * MIB,
                    progress_out=io.StringIO(),
                )
                spark_s = time.perf_counter() - t
                same = _same(seq_dir, spark_dir) and result.keys_indexed == builder.keys_indexed
                n_files = len(result.files)
                for engine, secs in (("sequential", seq_s), (f"spark {args.master}", spark_s)):
                    print(
                        f"| {mib:.0f} MiB | {log.records:,} | {result.keys_indexed:,} | {n_files} | {engine} "
                        f"| {secs:.1f} | {log.records / secs:,.0f} | {mib / secs:.1f} | {same} |"
                    )
                stages = ", ".join(f"{k} {v:.1f} s" for k, v in result.stage_seconds.items())
                print(f"<!-- spark stages at {size_mib} MiB: {stages} -->")
            finally:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        session.stop()


if __name__ == "__main__":
    main()
