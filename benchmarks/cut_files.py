"""Cut stress for ``serve``: mapped files truncated and rewritten under it while it answers a load.

The suite runs 60 light rounds (``tests/server/test_live_truncation.py``); this runs the real thing
longer, bounded by ``--rounds``: a copy of ``shared/stores/java-4.9.7-a`` is served by
``rmq-query serve --refresh-interval 0.05`` on ``--port``, ``rmq-query bench --kind mixed`` drives it,
and each round cuts the newest CommitLog file to a seeded random length, rewrites the newest index
file the way ``cp`` does (O_TRUNC, part of it, then all of it), and restores the CommitLog file. It
reports how many rounds ran, whether serve survived (its exit status on SIGTERM, or the signal that
killed it: -7 is SIGBUS), its log lines and tracebacks, and the load's answers and errors.

    python -m benchmarks.cut_files --port 31052 --rounds 300 --seed 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JAVA = "java-4.9.7-a"
#: The newest CommitLog file of java-4.9.7-a and where its data ends inside it.
NEWEST = f"{4194304:020d}"
DATA_END = 136101
CLI = (sys.executable, "-m", "clients.cli")
LOAD = ("--kind", "mixed", "--connections", "4", "--depth", "4", "--json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, required=True, help="serve's port (it also binds port-2)")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=int, default=20, help="how long the bench load runs")
    parser.add_argument("--stores", type=Path, default=REPO / "tests" / "golden" / "stores")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="cut-files-"))
    try:
        shutil.copytree(args.stores / JAVA, work / JAVA)
        shutil.copy(args.stores / f"{JAVA}.broker.conf", work)
        for p in [work, *work.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        print(json.dumps(run(work, args.port, args.rounds, args.seed, args.seconds)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def run(work: Path, port: int, rounds: int, seed: int, seconds: int) -> dict[str, object]:
    conf = work / f"{JAVA}.broker.conf"
    log_path = work / "serve.log"
    with open(log_path, "w") as log:
        serve = subprocess.Popen(
            [*CLI, "serve", "--config", str(conf), "--port", str(port), "--refresh-interval", "0.05"],
            cwd=REPO,
            stderr=log,
        )
    time.sleep(3)
    target = ("-n", f"127.0.0.1:{port}", "--store", str(work / JAVA), "--config", str(conf))
    bench = subprocess.Popen(
        [*CLI, "bench", *target, *LOAD, "--seconds", str(seconds)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    commitlog = work / JAVA / "commitlog" / NEWEST
    index = sorted(p for p in (work / JAVA / "index").iterdir() if p.name.isdigit())[-1]
    commitlog_data, index_data = commitlog.read_bytes(), index.read_bytes()
    rng = random.Random(seed)
    done = 0
    try:
        for _ in range(rounds):
            if serve.poll() is not None:
                break
            os.truncate(commitlog, rng.randrange(0, DATA_END))
            with open(index, "wb") as fh:  # cp: O_TRUNC, then the bytes in pieces
                time.sleep(rng.random() * 0.01)
                fh.write(index_data[: rng.randrange(len(index_data))])
                fh.flush()
                time.sleep(rng.random() * 0.01)
                fh.seek(0)
                fh.write(index_data)
            time.sleep(rng.random() * 0.02)
            with open(commitlog, "r+b") as fh:
                fh.write(commitlog_data)
            done += 1
            time.sleep(rng.random() * 0.02)
        load = json.loads(bench.communicate(timeout=seconds + 120)[0].strip().splitlines()[-1])
    finally:
        if bench.poll() is None:
            bench.kill()
        alive = serve.poll() is None
        if alive:
            serve.send_signal(signal.SIGTERM)
        status = serve.wait(timeout=60)
    text = log_path.read_text()
    return {
        "rounds": done,
        "serveSurvived": alive,
        "serveStatus": status,
        "logLines": text.count("\n"),
        "tracebacks": text.count("Traceback"),
        "guardFaultLines": text.count("faulted ("),
        "load": {k: load.get(k) for k in ("requests", "ok", "notFound", "errors", "errorsByKind")},
    }


if __name__ == "__main__":
    sys.exit(main())
