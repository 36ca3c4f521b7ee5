"""VIEW_MESSAGE_BY_ID throughput of this checkout against another one, alternated A B A B, as ratios.

    python -m clients.benchmarks.ab_view OTHER_CHECKOUT [--rounds 4] [--seconds 3] [--port 34140]

A is ``OTHER_CHECKOUT`` (say ``git archive main | tar -x -C /tmp/main`` with its accelerators built
in place), B is this checkout. Every round starts each side's ``serve`` (pinned to core 1, run from
its own directory so it uses its own code) over a fresh copy of ``../shared/stores/java-4.9.7-a``
and blasts it with ``rmqblast`` 16 connections x 8 in flight from core 0, the order flipped every
round. Reported per side: requests/s, and requests per second of the server's own CPU time
(``/proc/PID/stat`` over the run, warmup and drain included, divided into every answer received):
on a machine whose cores are shared with other work the second figure is the steadier one, since it
does not count the time the server waited for the core. Each start uses a new port (the range is in
the ephemeral range, where a client's port may hold the previous one for a moment).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from clients.benchmarks.vs_java import (
    GOLDEN,
    LOAD_CORE,
    SERVER_CORE,
    SHARED,
    blast,
    build_rmqblast,
    golden_copy,
    wait_port,
)
from clients.samples import sample_store

REPO = Path(__file__).resolve().parents[2]


def server_cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid``, in seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_side(
    repo: Path, port: int, work: Path, rmqblast: Path, offsets: Path, seconds: float
) -> tuple[float, float]:
    """(requests/s, requests per server CPU-second) of one ``serve`` started from ``repo``."""
    copy = work / f"copy-{port}"
    copy.mkdir()
    store, conf = golden_copy(copy)
    cmd = ["taskset", "-c", SERVER_CORE, sys.executable, "-m", "clients.cli", "serve", "--store", str(store)]
    cmd += ["--config", str(conf), "--port", str(port), "--log-level", "WARNING"]
    with open(work / f"serve-{port}.log", "wb") as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=repo)
    try:
        wait_port(port, 60, process)
        before = server_cpu_seconds(process.pid)
        result = blast(rmqblast, port, "view", {"offsets": offsets}, 16, 8, seconds, LOAD_CORE)
        cpu = server_cpu_seconds(process.pid) - before
    finally:
        process.terminate()
        process.wait(20)
        shutil.rmtree(copy, ignore_errors=True)
    if result["errors"]:
        raise RuntimeError(f"{repo}: {result['errors']} errors: {json.dumps(result)}")
    return result["rps"], (result["received"] / cpu if cpu > 0 else 0.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the checkout to compare with (A)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--port", type=int, default=34140, help="first port; each start takes the next")
    args = parser.parse_args()
    sides = {"A": args.other.resolve(), "B": REPO}
    results: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
    port = args.port
    with tempfile.TemporaryDirectory(prefix="ab-view-") as tmp:
        work = Path(tmp)
        rmqblast = build_rmqblast(work)
        offsets = work / "offsets"
        offsets.write_text("\n".join(map(str, sample_store(SHARED / "stores" / GOLDEN).offsets)) + "\n")
        for round_no in range(args.rounds):
            for side in ("A", "B") if round_no % 2 == 0 else ("B", "A"):
                rps, per_cpu = run_side(sides[side], port, work, rmqblast, offsets, args.seconds)
                port += 1
                results[side].append((rps, per_cpu))
                print(f"round {round_no + 1} {side}: {rps:,.0f} /s, {per_cpu:,.0f} /cpu-s", flush=True)
    for index, label in ((0, "requests/s"), (1, "requests per server CPU-second")):
        a = [r[index] for r in results["A"]]
        b = [r[index] for r in results["B"]]
        ratios = [y / x for x, y in zip(a, b, strict=True) if x > 0]
        print(
            f"{label}: A median {statistics.median(a):,.0f}, B median {statistics.median(b):,.0f}, "
            f"B/A median {statistics.median(ratios):.2f} (per round {' '.join(f'{r:.2f}' for r in ratios)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
