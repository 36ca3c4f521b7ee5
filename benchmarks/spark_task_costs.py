"""Where a Spark decode stage's time goes: the job's wall time against the work inside its tasks.

First, on ``local[1]`` and ``local[2]``, jobs of 17 tasks that do nothing with Spark's defaults and
with each setting the pipeline's session changes. Then generates a CommitLog
(``store.spark.synthetic``, one ``--size-mib`` file), cuts it as the index
rebuild does (``plan_file_sampled``) and, on ``local[1]`` then ``local[2]``, twice each: a job of as
many tasks that do nothing, then the decode job (``decode_range_to_file``), each task timing its own
work; on ``local[2]`` also with larger ranges. Last, the same decode in this process without Spark.
What the job costs beyond the sum of its tasks' work is Spark's (scheduling, serialization, the
Python worker round trip per task).

    python -m benchmarks.spark_task_costs --size-mib 1024
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path

from store.spark.decode import decode_range_to_file
from store.spark.ranges import CommitLogRange, list_files, plan_file_sampled
from store.spark.rebuild import decode_plan
from store.spark.session import _quiet_log4j2_file, build_session
from store.spark.synthetic import write_commitlog

MIB = 1 << 20
#: Jobs of 17 idle tasks per setting (the JVM warms up over the first few).
IDLE_JOBS = 5


def _timed(rng: CommitLogRange, entries: str) -> tuple[float, float, int]:
    """One decode task's own wall and CPU time, and its worker's pid."""
    wall, cpu = time.perf_counter(), time.process_time()
    decode_range_to_file(rng, entries)
    return time.perf_counter() - wall, time.process_time() - cpu, os.getpid()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/rmq-spark-task-costs"))
    parser.add_argument("--size-mib", type=int, default=1024)
    args = parser.parse_args()
    root = args.dir
    shutil.rmtree(root, ignore_errors=True)
    size = args.size_mib * MIB
    write_commitlog(root / "commitlog", file_size=size, total_bytes=size, body_size=(256, 1536))
    files = list_files(root / "commitlog")
    entries = root / "entries"

    def cut(mib: int) -> list[CommitLogRange]:
        return decode_plan([plan_file_sampled(f, mib * MIB) for f in files])

    def fresh() -> str:
        shutil.rmtree(entries, ignore_errors=True)
        entries.mkdir()
        return str(entries)

    ranges = cut(64)
    quiet = f"-Dlog4j.configurationFile=file:{_quiet_log4j2_file()}"
    # What a task doing nothing costs with Spark's defaults and with each setting ``build_session``
    # changes (issue 22): the loopback TCP socket to the Python worker, and the JVM's C2 compiler.
    variants = [
        (
            "TCP socket, C2 JIT (Spark's defaults)",
            {"spark.python.unix.domain.socket.enabled": "false"},
            quiet,
        ),
        ("Unix socket, C2 JIT", {}, quiet),
        ("Unix socket, C1 JIT (build_session's)", {}, None),
    ]
    for master in ("local[1]", "local[2]"):
        for name, conf, java in variants:
            extra = dict(conf)
            if java is not None:
                extra.update({"spark.driver.extraJavaOptions": java, "spark.executor.extraJavaOptions": java})
            session = build_session(master, conf=extra)
            sc = session.sparkContext
            sc.parallelize(range(8), 8).map(lambda x: x).count()  # start the Python workers
            idle = []
            for _ in range(IDLE_JOBS):
                started = time.perf_counter()
                sc.parallelize(range(17), 17).map(lambda x: x).collect()
                idle.append(time.perf_counter() - started)
            each = ", ".join(f"{t:.2f}" for t in idle)
            print(f"{master}, {name}: 17 tasks doing nothing {each} s (median {statistics.median(idle):.2f})")
            session.stop()
    try:
        for master in ("local[1]", "local[2]"):
            session = build_session(master)
            sc = session.sparkContext
            sc.parallelize(range(8), 8).map(lambda x: x).count()  # start the Python workers
            sizes = [(64, ranges)] * 2 + ([(128, cut(128)), (256, cut(256))] if master == "local[2]" else [])
            for mib, rs in sizes:
                where = fresh()
                started = time.perf_counter()
                sc.parallelize(range(len(rs)), len(rs)).map(lambda x: x).collect()
                idle = time.perf_counter() - started
                started = time.perf_counter()
                done = sc.parallelize(rs, len(rs)).map(lambda r, w=where: _timed(r, w)).collect()
                job = time.perf_counter() - started
                print(
                    f"{master}, {mib} MiB ranges: {len(rs)} tasks doing nothing {idle:.2f} s; decode job "
                    f"{job:.2f} s; inside the tasks wall {sum(d[0] for d in done):.2f} s, "
                    f"CPU {sum(d[1] for d in done):.2f} s; Python workers {len(set(d[2] for d in done))}"
                )
            session.stop()
        where = fresh()
        wall, cpu = time.perf_counter(), time.process_time()
        for rng in ranges:
            decode_range_to_file(rng, where)
        print(
            f"in this process: wall {time.perf_counter() - wall:.2f} s, CPU {time.process_time() - cpu:.2f} s"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
