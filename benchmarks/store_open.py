"""What opening a large store costs, read-only (``serve``) and for writing (``serve --writable``).

Generates (once, with ``--make-gib``) a store of that many GiB of CommitLog in the broker's default
1 GiB files, 600-byte bodies, its index and consume queues built by ``rmq-query rebuild-index``; then
opens it in fresh processes, alternating the code trees given with ``--repo`` (A B A B), and prints
one row per open: CPU seconds, wall seconds and the CommitLog bytes the open walked
(``CommitLog.bytes_visited``, summed over the CommitLog views the store holds). Pin with ``taskset``.

    python -m benchmarks.store_open --store /tmp/big --make-gib 2.5
    python -m benchmarks.store_open --store /tmp/many --make-gib 0.05 --queues 1000 --rounds 0
    taskset -c 1 python -m benchmarks.store_open --store /tmp/big --mode writable \\
        --repo /tmp/old --repo . --rounds 2
    taskset -c 1 python -m benchmarks.store_open --store /tmp/many --mode writable \\
        --repo /tmp/old --repo . --rounds 3 --evict-queues
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from store.config.store_config import StoreConfig
from store.write.writer import StoreWriter

#: Run in the child, from the code tree under test: open, measure, close.
CHILD = r"""
import json, sys, time
from pathlib import Path
from store.config.store_config import StoreConfig
root, mode = Path(sys.argv[1]), sys.argv[2]
config = StoreConfig.for_store(root, broker_ip1="127.0.0.1")
wall, cpu = time.perf_counter(), time.process_time()
if mode == "writable":
    from server.broker.writable_store import WritableStore
    store = WritableStore(config)
    logs = list({id(c): c for c in (store.write.writer._reader, store.reader.commitlog)}.values())
else:
    from store.message_store import MessageStore
    store = MessageStore.open(config)
    logs = [store.commitlog.mapped_files]
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
walked = sum(c.bytes_visited for c in logs)
end = logs[0].max_offset
store.close()
print(json.dumps({"cpu": cpu, "wall": wall, "walked": walked, "commitlog": end}))
"""


def make(root: Path, gib: float, body_bytes: int, queues: int = 8) -> int:
    """A store of ``gib`` GiB of records in 1 GiB files spread over ``queues`` queues of one topic,
    then its index and consume queues (one 6 MB file per queue at the broker's default size)."""
    config = StoreConfig.for_store(root, broker_ip1="127.0.0.1")
    body = (bytes(range(256)) * (body_bytes // 256 + 1))[:body_bytes]
    n = 0
    with StoreWriter(config, index=False, consume_queues=False) as writer:
        while writer.position < gib * (1 << 30):
            writer.append("OpenTopic", body, keys=f"k-{n}", queue_id=n % queues)
            n += 1
    subprocess.run([sys.executable, "-m", "clients.cli", "rebuild-index", "--store", str(root)], check=True)
    return n


def evict(directory: Path) -> None:
    """Drop the page cache of every file under ``directory`` (``POSIX_FADV_DONTNEED``; clean pages
    only, hence the ``fsync``): the next open reads them from disk, as after a reboot, without
    dropping the whole machine's cache under the other processes sharing it."""
    evict_files([path for path in directory.rglob("*") if path.is_file()])


def evict_files(files: list[Path]) -> None:
    """``evict`` for these files only."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--make-gib", type=float, help="generate the store first (it must not exist)")
    parser.add_argument("--body-bytes", type=int, default=600)
    parser.add_argument("--queues", type=int, default=8, help="queues the generated records go to")
    parser.add_argument("--mode", choices=("read", "writable"), default="read")
    parser.add_argument("--repo", type=Path, action="append", help="code tree to open with (repeat: A B A B)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--evict-queues",
        action="store_true",
        help="drop the consume queue files' cached pages before each open (a cold queue cache)",
    )
    args = parser.parse_args()
    if args.make_gib:
        made = make(args.store, args.make_gib, args.body_bytes, args.queues)
        print(f"generated {made} records", flush=True)
    repos = args.repo or [Path.cwd()]
    for _ in range(args.rounds):
        for repo in repos:
            if args.evict_queues:
                evict(args.store / "consumequeue")
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(args.store), args.mode],
                cwd=repo,
                capture_output=True,
                text=True,
                check=True,
            )
            row = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"| {repo} | {args.mode} | {row['cpu']:.2f} | {row['wall']:.2f} | {row['walked']:,} | "
                f"{row['commitlog']:,} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
