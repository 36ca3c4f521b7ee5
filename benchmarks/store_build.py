"""Index build rate: generate a CommitLog of at least ``--size-gib`` GiB, then time a full rebuild.

The CommitLog is written by ``StoreWriter`` (1 GiB files, index disabled while writing) with
``--body``-byte bodies and three index keys per message (UNIQ_KEY, ``order-N``, ``user-N%1000``);
the rebuild uses the broker's default geometry (5,000,000 slots, 20,000,000 entries: 420,000,040-byte
IndexFiles). The store lives under ``--dir`` and is deleted afterwards unless ``--keep``.

    python -m benchmarks.store_build --size-gib 1
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from store.config.store_config import StoreConfig
from store.index.builder import rebuild_index
from store.write.writer import StoreWriter


def generate(root: Path, size_bytes: int, body_size: int) -> tuple[int, float]:
    config = StoreConfig.for_store(root, message_index_enable=False, broker_ip1="127.0.0.1")
    body = bytes(range(256)) * (body_size // 256 + 1)
    body = body[:body_size]
    started = time.perf_counter()
    n = 0
    with StoreWriter(config) as writer:
        while writer.position < size_bytes:
            writer.append("BenchTopic", body, keys=f"order-{n} user-{n % 1000}", queue_id=n % 8)
            n += 1
    return n, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/rmq-bench-build"))
    parser.add_argument("--size-gib", type=float, default=1.0)
    parser.add_argument("--body", type=int, default=1000)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    root = args.dir
    if root.exists():
        shutil.rmtree(root)
    size = int(args.size_gib * (1 << 30))
    try:
        messages, gen_s = generate(root, size, args.body)
        config = StoreConfig.for_store(root)
        print(f"generated {messages} messages, {size / (1 << 30):.2f} GiB CommitLog in {gen_s:.1f} s")
        started = time.perf_counter()
        cpu_started = time.process_time()
        builder = rebuild_index(config)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        print(
            f"rebuild: {builder.records_indexed} records, {builder.keys_indexed} keys in {elapsed:.1f} s"
            f" = {builder.keys_indexed / elapsed:,.0f} keys/s, {builder.records_indexed / elapsed:,.0f}"
            f" records/s, {size / elapsed / (1 << 20):.1f} MiB/s of CommitLog"
        )
        print(f"rebuild CPU time {cpu:.1f} s = {builder.keys_indexed / cpu:,.0f} keys per CPU-second")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
