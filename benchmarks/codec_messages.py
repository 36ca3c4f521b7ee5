"""Benchmark: CommitLog records decoded per second (full decode, no-body decode, index fast path).

The corpus is the 5000 records of the real RocketMQ 4.9.7 store in ``tests/golden/stores/java-4.9.7-a``
(mixed sizes, 50 compressed bodies), read into memory first so only the codec is timed. Run:

    python -m benchmarks.codec_messages [--rounds 5] [--golden PATH]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from protocol.message import decode_message, encode_message, read_index_fields

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GOLDEN = REPO_ROOT / "tests" / "golden"


def load_records(shared: Path) -> list[tuple[bytes, int]]:
    """Every record of the store as (file bytes, position), walking each CommitLog file in order."""
    records: list[tuple[bytes, int]] = []
    for path in sorted((shared / "stores" / "java-4.9.7-a" / "commitlog").iterdir()):
        data = path.read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            try:
                size = read_index_fields(data, pos).store_size
            except ValueError:
                break  # the blank marker or zero filler ends the file
            records.append((data, pos))
            pos += size
    return records


#: Records per timed slice. The machine is shared, so each slice keeps its best time over all rounds
#: and the figure is the sum of those bests: short slices find the quiet moments between neighbours.
SLICE = 250


def _rate(
    name: str, records: list[tuple[bytes, int]], rounds: int, work: Callable[[bytes, int], object]
) -> None:
    slices = [records[i : i + SLICE] for i in range(0, len(records), SLICE)]
    best = [float("inf")] * len(slices)
    clock = time.perf_counter
    for _ in range(rounds):
        for i, chunk in enumerate(slices):
            start = clock()
            for data, pos in chunk:
                work(data, pos)
            best[i] = min(best[i], clock() - start)
    total = sum(best)
    print(f"{name:<34} {len(records) / total:>12,.0f} msg/s  {total / len(records) * 1e6:7.2f} us/msg")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--rounds", type=int, default=5, help="passes over the corpus (best time per slice counts)"
    )
    parser.add_argument(
        "--golden", type=Path, default=DEFAULT_GOLDEN, help="the golden data directory (holds stores/)"
    )
    args = parser.parse_args(argv)

    records = load_records(args.golden)
    total = sum(read_index_fields(d, p).store_size for d, p in records)
    size = total / len(records)
    print(f"corpus: {len(records)} records, {size:,.0f} bytes on average")
    print(f"{args.rounds} rounds; each {SLICE}-record slice keeps its best time")
    _rate("decode_message (body, inflate)", records, args.rounds, lambda d, p: decode_message(d, p))
    _rate(
        "decode_message (+ check_crc)",
        records,
        args.rounds,
        lambda d, p: decode_message(d, p, check_crc=True),
    )
    _rate(
        "decode_message (read_body=False)",
        records,
        args.rounds,
        lambda d, p: decode_message(d, p, read_body=False),
    )
    _rate("read_index_fields", records, args.rounds, read_index_fields)
    views = [(memoryview(d), p) for d, p in records]
    _rate("read_index_fields (memoryview)", views, args.rounds, read_index_fields)
    decoded = [(decode_message(d, p), 0) for d, p in records]
    _rate("encode_message", decoded, args.rounds, lambda m, _: encode_message(m))  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
