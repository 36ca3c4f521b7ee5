"""Resident memory while serving a store whose files total several GiB.

Generates a store of ``--size-gib`` GiB of CommitLog (16 KiB bodies unless ``--body-bytes``, indexed
with the default 5M/20M geometry, or left unindexed for the serving process to index with
``--build-index``), then, in a fresh process, opens it with ``MessageStore`` and runs ``--queries``
random key queries (64 hits max each) and as many random views, reporting VmRSS and its anonymous
and file-backed parts and the peak VmHWM (from /proc/self/status) after opening and after the
load. File-backed pages
are mapped CommitLog/IndexFile pages the kernel may drop at will; anonymous memory is the process's.

    python -m benchmarks.store_rss --size-gib 3
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from store.write.writer import StoreWriter

TOPIC = "RssTopic"
MAX = 2**63 - 1


def memory() -> dict[str, int]:
    fields = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                fields[name] = int(value.split()[0]) // 1024  # MiB
    return fields


def generate(root: Path, size: int, body_bytes: int = 16384, *, index: bool = True) -> int:
    config = StoreConfig.for_store(root, broker_ip1="127.0.0.1", message_index_enable=index)
    body = (bytes(range(256)) * (body_bytes // 256 + 1))[:body_bytes]
    n = 0
    with StoreWriter(config) as writer:
        while writer.position < size:
            writer.append(TOPIC, body, keys=f"k-{n} group-{n % 5000}", queue_id=n % 8)
            n += 1
    return n


def measure(root: Path, messages: int, queries: int, *, build_index: bool = False) -> None:
    before = memory()
    config = StoreConfig.for_store(root)
    rng = random.Random(1)
    with MessageStore.open(config, build_index=build_index) as store:
        opened = memory()
        paths = [p for p in root.rglob("*") if p.is_file()]
        files = sum(p.stat().st_size for p in paths)
        used = sum(p.stat().st_blocks * 512 for p in paths)
        started = time.perf_counter()
        cpu_started = time.process_time()
        hits = 0
        for _ in range(queries):
            hits += len(store.query_message(TOPIC, f"group-{rng.randrange(5000)}", 64, 0, MAX).buffers)
            off = store.commitlog.min_offset + rng.randrange(store.commitlog.max_offset)
            store.view_message(off)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        after = memory()
    print(
        f"store files total {files / (1 << 30):.2f} GiB apparent, {used / (1 << 30):.2f} GiB on disk"
        f" ({messages} messages)"
    )
    print(f"before open:  {before}")
    print(f"after open:   {opened}")
    print(
        f"after {queries} queries ({hits} records) + {queries} views in {elapsed:.1f} s"
        f" ({cpu:.1f} CPU-s): {after}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/rmq-bench-rss"))
    parser.add_argument("--size-gib", type=float, default=3.0)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--body-bytes", type=int, default=16384, help="message body size (default 16 KiB)")
    parser.add_argument(
        "--build-index",
        action="store_true",
        help="write no index; the serving process builds it (serve --build-index)",
    )
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # child mode: messages count
    args = parser.parse_args()
    if args.measure is not None:
        measure(args.dir, args.measure, args.queries, build_index=args.build_index)
        return
    if args.dir.exists():
        shutil.rmtree(args.dir)
    try:
        started = time.perf_counter()
        n = generate(args.dir, int(args.size_gib * (1 << 30)), args.body_bytes, index=not args.build_index)
        print(f"generated in {time.perf_counter() - started:.0f} s")
        cmd = [sys.executable, "-m", "benchmarks.store_rss", "--dir", str(args.dir)]
        if args.build_index:
            cmd.append("--build-index")
        subprocess.run([*cmd, "--queries", str(args.queries), "--measure", str(n)], check=True)
    finally:
        shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
