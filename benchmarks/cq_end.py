"""What finding each consume queue's written end costs: every queue of a store opened in this
process (``ConsumeQueue``: the binary search that proposes the end, the scan that confirms it),
``--rounds`` times, CPU and wall milliseconds per open; with ``--evict`` the queue files' cached
pages are dropped before each open (``store_open.evict``). Run it from each code tree to compare
(``PYTHONPATH`` set to the tree, A B A B, pinned with ``taskset``).

    PYTHONPATH=/tmp/old taskset -c 1 python -m benchmarks.cq_end --store /tmp/full --rounds 50
    PYTHONPATH=. taskset -c 1 python -m benchmarks.cq_end --store /tmp/full --rounds 50
    PYTHONPATH=. taskset -c 1 python -m benchmarks.cq_end --store /tmp/full --rounds 5 --evict
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from benchmarks.store_open import evict
from store.config.store_config import StoreConfig
from store.consumequeue.consume_queue import ConsumeQueue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--evict", action="store_true", help="drop the queue files' cached pages first")
    args = parser.parse_args()
    config = StoreConfig.for_store(args.store, broker_ip1="127.0.0.1")
    root = config.consume_queue_dir
    queues = sorted((d.parent.name, int(d.name)) for d in root.glob("*/*") if d.is_dir() and d.name.isdigit())
    cpu: list[float] = []
    wall: list[float] = []
    entries = 0
    for _ in range(args.rounds):
        if args.evict:
            evict(root)
        c, w = time.process_time(), time.perf_counter()
        opened = [ConsumeQueue(root, t, q, config.consume_queue_file_size) for t, q in queues]
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
        entries = sum(q.max_offset for q in opened)
        for q in opened:
            q.close()
    print(
        f"{len(queues)} queues, {entries:,} entries: CPU ms min {min(cpu) * 1e3:.2f} median "
        f"{statistics.median(cpu) * 1e3:.2f}; wall ms min {min(wall) * 1e3:.2f} median "
        f"{statistics.median(wall) * 1e3:.2f} ({args.rounds} opens)"
    )


if __name__ == "__main__":
    main()
