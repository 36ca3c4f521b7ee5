"""Sequential builder vs Spark: rebuild the index of generated CommitLogs, side by side, alternating.

For each ``--sizes-mib`` size, a CommitLog is generated under ``--dir`` (1 GiB files by default, the
broker's; ``store.spark.synthetic``: ~1.1 KiB records, mixed keys). Then, ``--rounds`` times, its index
is rebuilt by each engine: the sequential ``IndexBuilder`` and the Spark pipeline on each of
``--masters`` (e.g. ``local[1],local[2]``), the engines' order flipped every round (A B C, C B A, ...).
Every run is a child process (one SparkContext per process); a Spark child starts its session and
its Python workers first, and only the rebuild itself is timed (start-up is printed apart). Every
output is compared byte for byte with the first sequential one. The CommitLog and the indexes are
deleted before the next size. Geometry: the broker's default (5,000,000 slots, 20,000,000 entries)
unless given.

``--standalone N`` also starts a Spark standalone master and N workers (1 core each) on 127.0.0.1 with
the ``spark-class`` launcher PySpark ships, adds ``spark://127.0.0.1:PORT`` (with ``--executors`` 1..N
executor cores: ``spark.cores.max``) to the engines, and stops them (by their process ids) at the end.

    python -m benchmarks.spark_rebuild --sizes-mib 1024 --masters 'local[1],local[2]' --rounds 3
    python -m benchmarks.spark_rebuild --sizes-mib 1024 --masters '' --standalone 2 --rounds 2
"""

from __future__ import annotations

import argparse
import filecmp
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from store.config.store_config import DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, StoreConfig

MIB = 1 << 20
SEQUENTIAL = "sequential"
#: ``--range-mib`` for a ``--before`` checkout whose rebuild has no default by the cores.
BEFORE_RANGE_MIB = 64


def _same(a: Path, b: Path) -> bool:
    """The same index files in the same order (names differ: the sequential builder names a file by
    its creation time, the Spark rebuild by its first key's store time)."""
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


def _config(root: Path, args: argparse.Namespace) -> StoreConfig:
    return StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=args.file_mib * MIB,
        max_hash_slot_num=args.max_hash_slot_num,
        max_index_num=args.max_index_num,
    )


def child(args: argparse.Namespace) -> None:
    """One timed rebuild by one engine into ``--out``; prints one JSON line."""
    config = _config(args.store, args)
    out: dict[str, object] = {"engine": args.engine}
    if args.engine == SEQUENTIAL:
        from store.index.builder import IndexBuilder

        started = time.perf_counter()
        cpu = time.process_time()
        builder = IndexBuilder(config, index_dir=args.out, checkpoint_path=args.out.parent / "checkpoint-seq")
        builder.run_once()
        builder.close()
        out.update(seconds=time.perf_counter() - started, cpu=time.process_time() - cpu)
        out.update(keys=builder.keys_indexed, records=builder.records_indexed)
    else:
        from store.spark.rebuild import rebuild_index_spark
        from store.spark.session import build_session

        conf = {"spark.cores.max": str(args.cores_max)} if args.cores_max else None
        started = time.perf_counter()
        session = build_session(args.engine, conf=conf)
        sc = session.sparkContext
        # Start the Python workers (and, on a cluster, wait for the executors) before timing.
        parallel = args.cores_max or sc.defaultParallelism
        probe = sc.parallelize(range(4 * parallel), 4 * parallel).map(_probe).collect()
        out["startup"] = time.perf_counter() - started
        out["workers"] = sorted(set(probe))
        try:
            started = time.perf_counter()
            result = rebuild_index_spark(
                config,
                spark=session,
                out_dir=args.out,
                range_bytes=args.range_mib * MIB or None,
                progress_out=io.StringIO(),
            )
            out.update(
                seconds=time.perf_counter() - started, keys=result.keys_indexed, records=result.records
            )
            out["stages"] = result.stage_seconds
        finally:
            session.stop()
    print(json.dumps(out))


def _probe(_: int) -> str:
    """Which code a Spark Python worker runs: the project path and whether the walk is compiled."""
    import store
    from store.index import index_range

    compiled = index_range.index_range is not index_range.index_range_reference
    return f"{Path(store.__file__).parent.parent} {'compiled' if compiled else 'pure-python'}"


def _run_child(
    args: argparse.Namespace,
    engine: str,
    store: Path,
    out: Path,
    cores_max: int = 0,
    checkout: Path | None = None,
) -> dict:
    """One engine's rebuild in a child process; with ``checkout``, that copy's code (``--before``)
    runs it, given its ranges' default when this run leaves them to the rebuild (it had no such
    default: 64 MiB)."""
    cmd = [sys.executable, "-m", "benchmarks.spark_rebuild", "--child", "--engine", engine]
    cmd += ["--store", str(store), "--out", str(out), "--cores-max", str(cores_max)]
    range_mib = args.range_mib or (BEFORE_RANGE_MIB if checkout is not None else 0)
    cmd += ["--file-mib", str(args.file_mib), "--range-mib", str(range_mib)]
    cmd += ["--max-hash-slot-num", str(args.max_hash_slot_num), "--max-index-num", str(args.max_index_num)]
    shutil.rmtree(out, ignore_errors=True)
    env = None if checkout is None else dict(os.environ, PYTHONPATH=str(checkout))
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=checkout, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{engine} failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(lines[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_standalone(workers: int, work_dir: Path) -> tuple[str, list[subprocess.Popen]]:
    """A standalone master and ``workers`` 1-core workers on 127.0.0.1; returns (url, processes)."""
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(Path(pyspark.__file__).parent))
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    work_dir.mkdir(parents=True, exist_ok=True)
    master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
    procs = [
        subprocess.Popen(
            [str(spark_class), *master, "--webui-port", str(_free_port())],
            env=env,
            stdout=open(work_dir / "master.log", "w"),
            stderr=subprocess.STDOUT,
        )
    ]
    time.sleep(3)
    for n in range(workers):
        worker = [
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            "2g",
        ]
        procs.append(
            subprocess.Popen(
                [
                    str(spark_class),
                    *worker,
                    "--webui-port",
                    str(_free_port()),
                    "--work-dir",
                    str(work_dir / f"w{n}"),
                    url,
                ],
                env=env,
                stdout=open(work_dir / f"worker-{n}.log", "w"),
                stderr=subprocess.STDOUT,
            )
        )
    time.sleep(5)
    return url, procs


def stop_standalone(procs: list[subprocess.Popen]) -> None:
    for proc in reversed(procs):
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/rmq-spark-bench"))
    parser.add_argument("--sizes-mib", default="1024", help="CommitLog sizes, comma-separated")
    parser.add_argument("--masters", default="local[1],local[2]", help="Spark masters, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--standalone", type=int, default=0, help="also a standalone cluster of N workers")
    parser.add_argument("--executors", default="", help="with --standalone: executor core counts, e.g. 1,2")
    parser.add_argument("--file-mib", type=int, default=1024, help="mappedFileSizeCommitLog in MiB")
    parser.add_argument(
        "--range-mib", type=int, default=0, help="CommitLog MiB per decode task (0: the default)"
    )
    parser.add_argument("--max-hash-slot-num", type=int, default=DEFAULT_MAX_HASH_SLOT_NUM)
    parser.add_argument("--max-index-num", type=int, default=DEFAULT_MAX_INDEX_NUM)
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        help="a checkout of earlier code (C twins built): its Spark engines run too, alternating",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--engine", default=SEQUENTIAL, help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cores-max", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    from store.spark.synthetic import write_commitlog

    print(cpu_check())
    print(f"load average before: {os.getloadavg()}")
    engines: list[tuple[str, str, int, Path | None]] = [(SEQUENTIAL, SEQUENTIAL, 0, None)]
    for m in (m for m in args.masters.split(",") if m):
        engines.append((m, m, 0, None))
        if args.before is not None:
            engines.append((f"before {m}", m, 0, args.before.resolve()))
    procs: list[subprocess.Popen] = []
    if args.standalone:
        url, procs = start_standalone(args.standalone, args.dir / "standalone")
        counts = [
            int(c) for c in (args.executors or ",".join(map(str, range(1, args.standalone + 1)))).split(",")
        ]
        engines += [(f"standalone {c} executor core(s)", url, c, None) for c in counts]
    try:
        for size_mib in (int(s) for s in args.sizes_mib.split(",")):
            root = args.dir / f"store-{size_mib}"
            shutil.rmtree(root, ignore_errors=True)
            try:
                log = write_commitlog(
                    root / "commitlog",
                    file_size=args.file_mib * MIB,
                    total_bytes=size_mib * MIB,
                    body_size=(256, 1536),
                )
                print(f"\n{size_mib} MiB: {log.records:,} records in {log.files} files")
                seconds: dict[str, list[float]] = {label: [] for label, _, _, _ in engines}
                reference = root / "index-reference"
                for rnd in range(args.rounds):
                    order = engines if rnd % 2 == 0 else engines[::-1]
                    for label, engine, cores, checkout in order:
                        out = root / "index-out"
                        got = _run_child(args, engine, root, out, cores, checkout)
                        if not reference.exists():
                            if engine != SEQUENTIAL:
                                ref = _run_child(args, SEQUENTIAL, root, reference)
                                print(f"  (reference: sequential {ref['seconds']:.2f} s)")
                            else:
                                out.rename(reference)
                                out = reference
                        same = _same(reference, out)
                        seconds[label].append(got["seconds"])
                        extra = ""
                        if "stages" in got:
                            stages = ", ".join(f"{k} {v:.2f}" for k, v in got["stages"].items())
                            extra = f"; start-up {got['startup']:.1f} s; {stages}; workers {got['workers']}"
                        print(
                            f"  round {rnd + 1} {label}: {got['seconds']:.2f} s, {got['keys']:,} keys,"
                            f" identical {same}, load {os.getloadavg()[0]:.2f}{extra}"
                        )
                        if not same:
                            raise SystemExit(f"{label} wrote a different index")
                seq = statistics.median(seconds[SEQUENTIAL])
                print("| engine | seconds (each round) | median | vs sequential |\n|---|---|---:|---:|")
                for label, values in seconds.items():
                    med = statistics.median(values)
                    each = ", ".join(f"{v:.2f}" for v in values)
                    print(f"| {label} | {each} | {med:.2f} | {seq / med:.2f}x |")
            finally:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if procs:
            stop_standalone(procs)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
