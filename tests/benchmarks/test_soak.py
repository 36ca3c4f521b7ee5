"""A few-second run of the soak script (``benchmarks.soak``) against a real ``serve`` process.

The long run is recorded in RELIABILITY.md; this bounded one pins the same verdicts: no error of any
kind (wrong code, lost connection, late answer, server log ERROR), every answer owed to the stalled
reader delivered in order, every garbage connection closed by the server, flat server memory, and
the other connections served while the reader is stalled.
"""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.soak import parse_args, percentiles, run_soak


async def test_a_short_soak_holds(stores_dir: Any) -> None:
    args = parse_args(
        ["--duration", "3", "--connections", "8", "--depth", "4", "--stall-requests", "300", "--timeout", "5"]
    )
    args.store = stores_dir / "java-4.9.7-a"
    result = await run_soak(args)
    assert result["errors"] == 0, result
    assert result["serve_exit_status"] == 0
    assert result["slow_reader"] == {"sent": 300, "answered": 300}
    garbage = result["garbage_connections"]
    assert garbage["sent"] >= 2 and garbage["closed_by_server"] == garbage["sent"]
    assert result["answered"] > 1000
    rss = result["rss_mib"]
    assert rss["end"] - rss["start"] < 32, rss
    stalled = result["latency_others"]["stalled"]
    assert stalled["count"] > 100 and stalled["p99_ms"] < 1000, stalled


def test_percentiles() -> None:
    assert percentiles([]) == {"count": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    got = percentiles([i / 1000 for i in range(1, 101)])
    assert got == {"count": 100, "p50_ms": 51.0, "p99_ms": 100.0, "max_ms": 100.0}


def test_arguments_default_to_a_minute_of_64_connections() -> None:
    args = parse_args([])
    assert (args.duration, args.connections, args.depth) == (60.0, 64, 8)
    with pytest.raises(SystemExit):
        parse_args(["--duration", "soon"])
