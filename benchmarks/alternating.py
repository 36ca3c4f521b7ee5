"""Servers measured in alternating rounds (the order reversed every round), for the three-way
benchmarks (``pull_vs``, ``send_vs``: a base checkout A, this checkout B, the Java 4.9.7 broker)."""

from __future__ import annotations

import statistics
import sys
import tempfile
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


def ratio_cell(ratios: list[float]) -> str:
    """The median ratio and each round's, as the tables print them."""
    return f"{statistics.median(ratios):.2f}x ({' '.join(f'{r:.2f}' for r in ratios)})"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"
