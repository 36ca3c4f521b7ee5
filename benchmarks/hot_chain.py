"""What the walked-segment cache does for a hot key's chain beyond repeated ranges, and what it costs.

Over ``vs_java``'s narrow store (``--narrow-store DIR``: ``DIR/store`` and ``DIR/bench.json``, as
``python -m benchmarks.store_query --narrow-store`` reads them), in process, through
``IndexService.query_offsets``:

* distinct ranges: one all-time query walks the hot key's whole chain (warming its pages, and with
  the cache recording its segments), then ``--ranges`` seeded 1 s ranges anywhere in the span, each
  asked once (none repeats);
* the first walk of a freshly opened store (a 9,001-entry walk paying its page faults, and recording)
  and the same walk right after;
* an ordinary query: unique keys (a chain of an entry or two), where the cache cannot help.

No Python from ``benchmarks`` is imported, so the script can time another checkout's code:
``cd B && PYTHONPATH=B python /path/to/benchmarks/hot_chain.py --narrow-store DIR``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from store.config.store_config import StoreConfig
from store.message_store import MessageStore

TOPIC = "HotTopic"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--narrow-store", type=Path, required=True, help="vs_java's narrow store directory")
    parser.add_argument("--ranges", type=int, default=400, help="distinct ranges asked once each")
    args = parser.parse_args()
    root = args.narrow_store
    meta = json.loads((root / "bench.json").read_text())
    t0 = meta["ranges"][0][0] - meta["records"] * 10 // 100  # the ranges start at 10% of the span
    config = StoreConfig.for_store(root / "store")

    with MessageStore.open(config) as s:
        s.index.query_offsets(TOPIC, "hot", 64, t0, t0)
        rng = random.Random(5)
        starts = [t0 + rng.randrange(meta["records"] - 1000) for _ in range(args.ranges)]
        times, visited = [], 0
        for b in starts:
            started = time.perf_counter()
            visited += s.index.query_offsets(TOPIC, "hot", 64, b, b + 999).visited
            times.append((time.perf_counter() - started) * 1e6)
    mean, p50, first20 = statistics.mean(times), statistics.median(times), statistics.mean(times[:20])
    print(
        f"{len(starts)} distinct ranges: mean {mean:.1f} us, p50 {p50:.1f} us, "
        f"first 20 mean {first20:.1f} us, {visited / len(starts):.0f} entries per query"
    )

    first, again = [], []
    b, e = meta["ranges"][0]
    for _ in range(15):
        with MessageStore.open(config) as s:
            s.index.query_offsets(TOPIC, "hot", 64, b, e)  # the pages in the page cache
        with MessageStore.open(config) as s:
            started = time.perf_counter()
            s.index.query_offsets(TOPIC, "hot", 64, b, e)
            first.append((time.perf_counter() - started) * 1e6)
            started = time.perf_counter()
            s.index.query_offsets(TOPIC, "hot", 64, b, e)
            again.append((time.perf_counter() - started) * 1e6)
    first_p50, again_p50 = statistics.median(first), statistics.median(again)
    print(f"the 10% range on a fresh open: first walk p50 {first_p50:.1f} us, the next {again_p50:.1f} us")

    with MessageStore.open(config) as s:
        keys = [f"k-{n}" for n in range(1, 200_000, 997) if n % meta["every"]]
        for _ in range(3):
            for k in keys:
                s.index.query_offsets(TOPIC, k, 64, 0, 2**62)
        per = []
        for _ in range(20):
            started = time.perf_counter()
            for k in keys:
                s.index.query_offsets(TOPIC, k, 64, 0, 2**62)
            per.append((time.perf_counter() - started) / len(keys) * 1e6)
    print(f"unique keys: query_offsets p50 {statistics.median(per):.2f} us ({len(keys)} keys)")


if __name__ == "__main__":
    main()
