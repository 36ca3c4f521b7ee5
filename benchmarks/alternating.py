"""Servers measured in alternating rounds (the order reversed every round), for the three-way
benchmarks (``pull_vs``, ``send_vs``: a base checkout A, this checkout B, the Java 4.9.7 broker)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from benchmarks import vs_java

R = TypeVar("R")


def alternate(
    names: list[str],
    rounds: int,
    port: int,
    start: Callable[[str, Path, int], vs_java.Server],
    run: Callable[[vs_java.Server], R],
    prefix: str,
) -> dict[str, list[R]]:
    """``run`` each server ``rounds`` times, in ``names``' order then reversed, each round's server
    started by ``start(name, its work directory, its port)`` and stopped after; per name, the runs."""
    results: dict[str, list[R]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for round_no in range(rounds):
            order = names if round_no % 2 == 0 else names[::-1]
            for k, name in enumerate(order):
                work = Path(tmp) / f"r{round_no}-{name}"
                work.mkdir()
                server = start(name, work, port + 10 * k)
                try:
                    print(f"round {round_no + 1}: {name}", file=sys.stderr, flush=True)
                    results[name].append(run(server))
                finally:
                    server.stop()
    return results


def start_writable(checkout: Path, store: Path, port: int, log: Path, *options: str) -> vs_java.Server:
    """``serve --writable`` of ``checkout`` over ``store`` on core ``vs_java.SERVER_CORE``, with
    ``options``, once it listens on ``port`` (and a second more to settle)."""
    cmd = ["taskset", "-c", vs_java.SERVER_CORE, sys.executable, "-m", "clients.cli", "serve", "--writable"]
    cmd += ["--store", str(store), "--port", str(port), "--log-level", "WARNING", *options]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    with open(log, "wb") as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=checkout, env=env)
    vs_java.wait_port(port, 60, process)
    time.sleep(1.0)
    return vs_java.Server(str(checkout), port, process)


def print_header(names: list[str]) -> None:
    """The load, the CPU and a table's head: a column per server, B's ratio to A (and to Java)."""
    print(f"load average {os.getloadavg()}; cpu {cpu_model()}")
    print("| row | " + " | ".join(names) + " | B / A | " + ("B / java |" if "java" in names else ""))
    print("|---|" + "---:|" * (len(names) + 1 + ("java" in names)))


def ratio_cell(ratios: list[float]) -> str:
    """The median ratio and each round's, as the tables print them."""
    return f"{statistics.median(ratios):.2f}x ({' '.join(f'{r:.2f}' for r in ratios)})"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"
