"""What a put costs when it is the first into a consume queue a read has just opened, against N queues.

    flock -o /work/bench.lock taskset -c 1 python -m benchmarks.first_put_cost --queues 1000 \
        --sample 500 --base DIR --rounds 2

A put's settle refreshes the queues it wrote that a reader has open (``QueueTable.refresh_some``):
from the builder's written tail when the queue had a full look within ``FULL_LOOK_EVERY``, else in
full (a directory listing, a ``stat`` per file, the file checks). This builds a store of
``--queues`` queues (topics of 8 queues, one record each, in batches), reopens it, and for
``--sample`` queues picked at random opens each by a read (``QueueTable.get``, as a pull or an
offset request does) right before putting one record into it (``first``), then puts a second
(``next``); then puts one record into as many queues no read opened (``unopened``). Median wall
microseconds per put of each kind, per checkout: this one and ``--base`` (another checkout with its
accelerators built), each in a child process of its own code, A B A B for ``--rounds``.
Whether the first put's cost grows with the number of queues is read by running it at two sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: Queues per topic (the brief's 50k topics x 8 queues shape).
QUEUES_PER_TOPIC = 8
#: Records per put while the store is built.
BUILD_BATCH = 512


def child(queues: int, sample: int, seed: int) -> dict[str, float]:
    """In the checkout measured (``PYTHONPATH``): the three medians, in microseconds."""
    from server.broker.writable_store import WritableStore
    from store.config.store_config import StoreConfig
    from store.write.writer import StoreRecord

    def record(topic: int, queue_id: int, n: int) -> StoreRecord:
        props = f"UNIQ_KEY\x01U{n:031d}\x02WAIT\x01true"
        return StoreRecord(f"T{topic}", b"x" * 100, props, queue_id=queue_id)

    root = Path(tempfile.mkdtemp(prefix="first-put-"))
    try:
        config = StoreConfig.for_store(
            root,
            mapped_file_size_consume_queue=1000 * 20,
            mapped_file_size_commit_log=64 << 20,
            broker_ip1="127.0.0.1",
        )
        keys = [(t, q) for t in range(max(1, queues // QUEUES_PER_TOPIC)) for q in range(QUEUES_PER_TOPIC)]
        n = 0
        with WritableStore(config) as store:
            for start in range(0, len(keys), BUILD_BATCH):
                batch = [record(t, q, n + i) for i, (t, q) in enumerate(keys[start : start + BUILD_BATCH])]
                n += len(batch)
                store.put(batch)
        rng = random.Random(seed)
        picked = rng.sample(keys, min(sample, len(keys) // 2))
        others = rng.sample(sorted(set(keys) - set(picked)), len(picked))
        first: list[float] = []
        following: list[float] = []
        unopened: list[float] = []
        with WritableStore(config) as store:
            table = store.reader.queues
            for t, q in picked:
                table.get(f"T{t}", q)  # opened by a read
                a = time.perf_counter()
                store.put([record(t, q, n)])
                b = time.perf_counter()
                store.put([record(t, q, n + 1)])
                c = time.perf_counter()
                n += 2
                first.append(b - a)
                following.append(c - b)
            for t, q in others:
                a = time.perf_counter()
                store.put([record(t, q, n)])
                unopened.append(time.perf_counter() - a)
                n += 1
        return {
            "first": round(statistics.median(first) * 1e6, 1),
            "next": round(statistics.median(following) * 1e6, 1),
            "unopened": round(statistics.median(unopened) * 1e6, 1),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_child(checkout: Path, queues: int, sample: int, seed: int) -> dict[str, float]:
    """``child`` in a process whose packages are ``checkout``'s."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    command = [sys.executable, str(Path(__file__).resolve()), "--child"]
    command += ["--queues", str(queues), "--sample", str(sample), "--seed", str(seed)]
    done = subprocess.run(
        command, cwd=checkout, env=env, capture_output=True, text=True, check=True, timeout=1800
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=1000, help="queues in the store (8 a topic)")
    parser.add_argument("--sample", type=int, default=500, help="queues opened then put into")
    parser.add_argument("--base", type=Path, help="another checkout (accelerators built) to compare")
    parser.add_argument("--rounds", type=int, default=1, help="A B rounds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.queues < 2 * QUEUES_PER_TOPIC or args.sample < 1 or args.rounds < 1:
        parser.error(f"--queues must be at least {2 * QUEUES_PER_TOPIC}, --sample and --rounds at least 1")
    if args.child:
        print(json.dumps(child(args.queues, args.sample, args.seed)))
        return 0
    if args.base is not None and not (args.base / "server").is_dir():
        parser.error(f"--base {args.base} is not a checkout (no server/ in it)")
    checkouts = {"B": REPO} if args.base is None else {"A": args.base.resolve(), "B": REPO}
    rounds: list[dict[str, Any]] = []
    for _ in range(args.rounds):
        rounds.append(
            {name: run_child(path, args.queues, args.sample, args.seed) for name, path in checkouts.items()}
        )
    result: dict[str, Any] = {"queues": args.queues, "sample": args.sample, "us per put (median)": rounds}
    if args.base is not None:
        result["B / A first put"] = [round(r["B"]["first"] / r["A"]["first"], 3) for r in rounds]
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
