"""Key query latency against index chain length (default 5M/20M geometry).

For each chain length L, key ``hot-L`` is written L times: once early (phase A), then L-1 times
after a 5 s gap (phase B). Two queries are timed per key:

* ``latest``: ``query_message(topic, hot-L, 64, 0, MAX)``, the mqadmin default: the walk stops after
  min(L, 64) entries and reads that many records;
* ``oldest``: the time range of phase A only, so the walk visits all L entries of the chain (the
  newer ones are outside the range) and returns one record.

Each query runs ``--repeat`` times on a warm store; p50/p99 are reported in microseconds.

    python -m benchmarks.store_query

``--narrow-store DIR`` instead times the whole in-process request path of ``vs_java``'s narrow
time-range queries (the store its ``narrow`` group writes, ``DIR/bench.json`` naming the ranges):
``QueryMessageProcessor`` with the server's query pool, from the request command to the response
command, awaiting the pool when the query moves there; no sockets, no event-loop load.

    python -m benchmarks.store_query --narrow-store /tmp/narrow --repeat 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import time
from pathlib import Path

from protocol.index_key import build_index_key, index_key_hash
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from store.write.writer import StoreWriter

TOPIC = "LatencyTopic"
MAX = 2**63 - 1


def build(root: Path, lengths: list[int]) -> tuple[int, int]:
    config = StoreConfig.for_store(root, broker_ip1="127.0.0.1")
    now = [1_700_000_000_000]

    def clock() -> int:
        now[0] += 10
        return now[0]

    body = b"q" * 200
    with StoreWriter(config, clock=clock) as w:
        phase_a_begin = now[0] + 10
        for n in lengths:
            w.append(TOPIC, body, keys=f"hot-{n}")
        phase_a_end = now[0]
        now[0] += 5_000
        remaining = {n: n - 1 for n in lengths}
        while any(remaining.values()):
            for n in lengths:
                if remaining[n]:
                    w.append(TOPIC, body, keys=f"hot-{n} filler-{remaining[n]}")
                    remaining[n] -= 1
    return phase_a_begin, phase_a_end


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def narrow(root: Path, repeat: int) -> None:
    """Per range, the p50 of one QUERY_MESSAGE through the processor (pool included), in us."""
    from protocol.codes import LanguageCode, RequestCode
    from protocol.command import RemotingCommand
    from server.query_pool import QueryPool
    from server.remoting.processors.query_message import QueryMessageProcessor

    ranges = json.loads((root / "bench.json").read_text())["ranges"]

    async def run() -> None:
        with MessageStore.open(StoreConfig.for_store(root / "store")) as store:
            pool = QueryPool()
            processor = QueryMessageProcessor(store, pool=pool)
            key = {"topic": "HotTopic", "key": "hot", "maxNum": "64"}
            fields = [{**key, "beginTimestamp": str(b), "endTimestamp": str(e)} for b, e in ranges]
            requests = [
                RemotingCommand(
                    code=RequestCode.QUERY_MESSAGE, language=LanguageCode.JAVA, version=407, opaque=i, flag=0,
                    ext_fields=f,
                )
                for i, f in enumerate(fields)
            ]  # fmt: skip
            samples: list[list[float]] = [[] for _ in requests]
            for n in range(50 + repeat):
                for i, request in enumerate(requests):
                    t0 = time.perf_counter()
                    answer = processor.query_message(request)
                    if not isinstance(answer, RemotingCommand):
                        answer = await answer
                    if n >= 50:  # the first 50 rounds warm up
                        samples[i].append((time.perf_counter() - t0) * 1e6)
            pool.close()
        every = [x for s in samples for x in s]
        print("range start (ms after the first) | p50 us | p99 us")
        for (b, _), s in zip(ranges, samples, strict=True):
            print(f"{b - ranges[0][0]:>10} | {statistics.median(s):8.1f} | {percentile(s, 0.99):8.1f}")
        print(f"all ranges: mean {statistics.mean(every):.1f} us, p50 {statistics.median(every):.1f} us")

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/rmq-bench-query"))
    parser.add_argument("--lengths", default="1,10,100,1000,10000,50000")
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--narrow-store", type=Path, help="time vs_java's narrow-range queries (see above)")
    args = parser.parse_args()
    if args.narrow_store is not None:
        narrow(args.narrow_store, args.repeat)
        return
    lengths = [int(x) for x in args.lengths.split(",")]
    if args.dir.exists():
        shutil.rmtree(args.dir)
    try:
        started = time.perf_counter()
        begin_a, end_a = build(args.dir, lengths)
        print(f"store with {sum(lengths)} messages written in {time.perf_counter() - started:.1f} s")
        config = StoreConfig.for_store(args.dir)
        with MessageStore.open(config) as store:
            # Phase A times as the index stores them: whole seconds after the file's begin.
            file_begin = store.index.files[0].header.begin_timestamp
            begin = file_begin + (begin_a - file_begin) // 1000 * 1000
            end = file_begin + (end_a - file_begin) // 1000 * 1000
            print(f"{'chain':>7} {'query':>7} {'hits':>5} {'visited':>8} {'p50 us':>9} {'p99 us':>9}")
            for n in lengths:
                key = f"hot-{n}"
                for label, lo, hi in (("latest", 0, MAX), ("oldest", begin, end)):
                    samples: list[float] = []
                    hits = 0
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        hits = len(store.query_message(TOPIC, key, 64, lo, hi).buffers)
                        samples.append((time.perf_counter() - t0) * 1e6)
                    key_hash = index_key_hash(build_index_key(TOPIC, key))
                    visited = sum(f.select_by_hash([], key_hash, 64, lo, hi) for f in store.index.files)
                    print(
                        f"{n:>7} {label:>7} {hits:>5} {visited:>8} "
                        f"{statistics.median(samples):>9.1f} {percentile(samples, 0.99):>9.1f}"
                    )
    finally:
        shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
