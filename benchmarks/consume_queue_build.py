"""ConsumeQueue rates: build (entries/s), offset-by-time searches/s and store-side pulls/s.

Generates a CommitLog of ``--messages`` records (``--body`` bytes, tags, ``--queues`` queues of one
topic, store times 1 ms apart) with ``StoreWriter`` (no index, no consume queues), then:

- build: ``ConsumeQueueBuilder`` over the whole CommitLog, CPU seconds (the machine is shared);
- search: ``MessageStore.offset_by_time`` for random timestamps in the stored range, random queues;
- pull: ``MessageStore.get_message`` of 32 messages from random offsets (what PULL_MESSAGE reads).

Each timed part runs ``--rounds`` times (best kept). The store is deleted afterwards unless ``--keep``.

    python -m benchmarks.consume_queue_build --messages 200000
"""

from __future__ import annotations

import argparse
import random
import shutil
import time
from pathlib import Path

from store.config.store_config import StoreConfig
from store.consumequeue.builder import ConsumeQueueBuilder
from store.message_store import MessageStore
from store.write.writer import StoreWriter

T0 = 1_790_000_000_000


def generate(root: Path, messages: int, body_size: int, queues: int) -> StoreConfig:
    config = StoreConfig.for_store(root, message_index_enable=False, broker_ip1="127.0.0.1")
    body = bytes(body_size)
    with StoreWriter(config, consume_queues=False) as writer:
        for n in range(messages):
            writer.append(
                "BenchTopic",
                body,
                tags=f"tag-{n % 16}",
                queue_id=n % queues,
                unique_key=False,
                store_timestamp=T0 + n,
            )
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/rmq-bench-cq"))
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--body", type=int, default=100)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--searches", type=int, default=20_000)
    parser.add_argument("--pulls", type=int, default=5_000)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    root = args.dir
    if root.exists():
        shutil.rmtree(root)
    try:
        config = generate(root, args.messages, args.body, args.queues)
        best_build = float("inf")
        for _ in range(args.rounds):
            shutil.rmtree(config.consume_queue_dir, ignore_errors=True)
            cpu = time.process_time()
            builder = ConsumeQueueBuilder(config)
            builder.run_once()
            builder.close()
            best_build = min(best_build, time.process_time() - cpu)
            assert builder.entries_written == args.messages
        print(
            f"build: {args.messages} entries in {best_build:.2f} CPU s = "
            f"{args.messages / best_build:,.0f} entries/s"
        )
        rng = random.Random(1)
        with MessageStore.open(config) as store:
            best_search = float("inf")
            for _ in range(args.rounds):
                probes = [
                    (rng.randrange(args.queues), T0 + rng.randrange(args.messages))
                    for _ in range(args.searches)
                ]
                cpu = time.process_time()
                for qid, ts in probes:
                    store.offset_by_time("BenchTopic", qid, ts)
                best_search = min(best_search, time.process_time() - cpu)
            print(
                f"search: {args.searches / best_search:,.0f} offset-by-time searches/s "
                f"({args.messages // args.queues} entries a queue)"
            )
            best_pull = float("inf")
            per_queue = args.messages // args.queues
            for _ in range(args.rounds):
                probes = [
                    (rng.randrange(args.queues), rng.randrange(per_queue - 32)) for _ in range(args.pulls)
                ]
                cpu = time.process_time()
                for qid, offset in probes:
                    store.get_message("BenchTopic", qid, offset, 32)
                best_pull = min(best_pull, time.process_time() - cpu)
            print(
                f"pull: {args.pulls / best_pull:,.0f} getMessage(32)/s = "
                f"{32 * args.pulls / best_pull:,.0f} messages/s"
            )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
