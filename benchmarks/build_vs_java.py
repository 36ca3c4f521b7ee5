"""Index building on one core: the sequential builder against the Java 4.9.7 broker's reput.

One command generates a store (``--records`` records of ``--body`` bytes, three keys each:
UNIQ_KEY, ``order-N``, ``user-N%1000``; the broker's default geometry: 1 GiB CommitLog files,
5,000,000 slots, 20,000,000 entries), then alternates, ``--rounds`` times:

- ours: ``rmq-query rebuild-index --store S`` on the store without ``index/``, in a fresh process
  pinned with ``taskset -c CPU`` (wall time of the whole command; CPU time of the process), and
  the same builder in-process with its phases timed: opening the store (the CommitLog walk that
  finds the written end) and indexing;
- Java: the real broker (``/tmp/rmqjava/bin/start-broker.sh``, pinned to the same CPU) started on a
  copy of the store without ``index/`` and ``consumequeue/``: its start-up reput rebuilds both
  before it prints "boot success"; then started again on the now indexed copy. Its reput time is
  the difference of the two boot times (the issue's method; the broker checks every 1 s whether
  reput has caught up, so this rounds up to its 1 s polls), and, finer, the time from the first to
  the last key appearing in its IndexFile header (polled every 2 ms from the other core). CPU times
  are the JVM's (all its threads, /proc/PID/stat).

Prints a table and the ratios (ours over Java, keys/s). The driver pins itself to the other CPU.
``--spark`` also times ``rebuild-index --engine spark`` at ``local[1]`` and ``local[2]`` on the store.
``--baseline DIR`` also times the ``rebuild-index`` command of another checkout in every round, A B
alternating (the before/after of a change; the command's own index and consume-queue times are
reported for both).

    python -m benchmarks.build_vs_java --records 300000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

JAVA_BIN = Path("/tmp/rmqjava/bin")
_TICK = os.sysconf("SC_CLK_TCK")
_NO_NAMESRV = "127.0.0.1:1"  # unreachable on purpose: the broker only logs warnings


def generate(root: Path, records: int, body_size: int) -> None:
    """A store like ``store_build``'s, by record count; reused when it already exists."""
    from store.config.store_config import StoreConfig
    from store.write.writer import StoreWriter

    done = root / "generated.json"
    want = {"records": records, "body": body_size}
    if done.exists() and json.loads(done.read_text()) == want:
        return
    shutil.rmtree(root, ignore_errors=True)
    config = StoreConfig.for_store(root, message_index_enable=False, broker_ip1="127.0.0.1")
    body = (bytes(range(256)) * (body_size // 256 + 1))[:body_size]
    with StoreWriter(config) as writer:
        for n in range(records):
            writer.append("BenchTopic", body, keys=f"order-{n} user-{n % 1000}", queue_id=n % 8)
    done.write_text(json.dumps(want))


def measure_ours_in_process(store: Path) -> dict[str, float]:
    """The builder's phases in this process (run pinned by the caller): open, index, close."""
    import tempfile

    from store.config.store_config import StoreConfig
    from store.index.builder import IndexBuilder

    config = StoreConfig.for_store(store)
    with tempfile.TemporaryDirectory(dir=store) as scratch:
        t0, c0 = time.perf_counter(), time.process_time()
        builder = IndexBuilder(config, index_dir=Path(scratch), checkpoint_path=Path(scratch) / "cp")
        t1, c1 = time.perf_counter(), time.process_time()
        builder.run_once()
        t2, c2 = time.perf_counter(), time.process_time()
        builder.close()
        t3 = time.perf_counter()
    return {
        "keys": builder.keys_indexed,
        "records": builder.records_indexed,
        "open_s": t1 - t0,
        "open_cpu": c1 - c0,
        "index_s": t2 - t1,
        "index_cpu": c2 - c1,
        "close_s": t3 - t2,
    }


_CLI = [sys.executable, "-m", "clients.cli"]


def _pinned(cpu: int) -> list[str]:
    return ["taskset", "-c", str(cpu), sys.executable]


def _phase_seconds(stdout: str, starts: str) -> float:
    """The "in X s" of the command's output line that starts with ``starts``; 0 for the queues'
    line "in the same CommitLog pass" (both built in the time the index line gives)."""
    line = next(line for line in stdout.splitlines() if line.startswith(starts))
    if line.endswith("in the same CommitLog pass"):
        return 0.0
    return float(line.rsplit(" in ", 1)[1].split()[0])


def run_ours(store: Path, cpu: int, checkout: Path | None = None) -> dict[str, float]:
    """``rebuild-index`` (index, then consume queues) from this checkout or from ``checkout``."""
    code = checkout or Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(code))
    # Like the Java side (a copy of the CommitLog alone): a store whose index and consume queues were
    # removed (else the timing includes unlinking them).
    shutil.rmtree(store / "index", ignore_errors=True)
    shutil.rmtree(store / "consumequeue", ignore_errors=True)
    os.sync()
    started = time.perf_counter()
    before = os.times()
    proc = subprocess.run(
        [*_pinned(cpu), "-m", "clients.cli", "rebuild-index", "--store", str(store)],
        capture_output=True,
        text=True,
        env=env,
        cwd=code,
        check=True,
    )
    wall = time.perf_counter() - started
    after = os.times()
    cpu_s = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    keys = int(proc.stdout.split("indexed ")[1].split(" ")[0])
    timed = {
        "cmd_s": wall,
        "cmd_cpu": cpu_s,
        "cmd_keys": keys,
        "cmd_index_s": _phase_seconds(proc.stdout, "indexed "),
        "cmd_cq_s": _phase_seconds(proc.stdout, "built "),
    }
    timed["cmd_build_s"] = timed["cmd_index_s"] + timed["cmd_cq_s"]
    if checkout is not None:
        return timed
    phases = subprocess.run(
        [*_pinned(cpu), "-m", "benchmarks.build_vs_java", "--_phases", str(store)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    result = json.loads(phases.stdout.strip().splitlines()[-1])
    result.update(timed)
    return result


def _jvm_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / _TICK


def _index_count(index_dir: Path) -> int:
    try:
        names = [n for n in os.listdir(index_dir) if n.isdigit()]
        if not names:
            return 0
        with open(index_dir / sorted(names)[-1], "rb") as fh:
            head = fh.read(40)
        return struct.unpack(">qqqqii", head)[5] if len(head) == 40 else 0
    except OSError:
        return 0


def _boot_java(store: Path, port: int, cpu: int, want_keys: int | None) -> dict[str, float]:
    """Start the broker on ``store`` and time its boot (and, given ``want_keys``, its reput)."""
    log = store.parent / f"broker-{port}.out"
    started = time.perf_counter()
    with open(log, "wb") as out:
        broker = [str(JAVA_BIN / "start-broker.sh"), str(store), str(port), _NO_NAMESRV]
        proc = subprocess.Popen(
            ["taskset", "-c", str(cpu), *broker],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    result: dict[str, float] = {}
    index_dir = store / "index"
    try:
        deadline = started + 600
        while time.perf_counter() < deadline:
            now = time.perf_counter()
            if want_keys is not None and "last_key_s" not in result:
                count = _index_count(index_dir)
                if count >= 2 and "first_key_s" not in result:
                    result["first_key_s"], result["first_key_cpu"] = now - started, _jvm_cpu(proc.pid)
                if count >= want_keys + 1:
                    result["last_key_s"], result["last_key_cpu"] = now - started, _jvm_cpu(proc.pid)
            if b"boot success" in log.read_bytes():
                result["boot_s"], result["boot_cpu"] = now - started, _jvm_cpu(proc.pid)
                break
            if proc.poll() is not None:
                raise RuntimeError(f"the broker exited early; see {log}")
            time.sleep(0.002)
        else:
            raise RuntimeError(f"the broker did not boot within 600 s; see {log}")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return result


def run_java(template: Path, work: Path, port: int, cpu: int, keys: int) -> dict[str, float]:
    store = work / "store"
    shutil.rmtree(work, ignore_errors=True)
    store.mkdir(parents=True)
    for part in ("commitlog", "checkpoint", "config"):
        subprocess.run(["cp", "-a", str(template / part), str(store / part)], check=True)
    os.sync()  # the copy's writeback must not overlap the timed boot
    cold = _boot_java(store, port, cpu, keys)
    indexed = _index_count(store / "index") - 1
    if indexed != keys:
        raise RuntimeError(f"the broker indexed {indexed} keys, the store has {keys}")
    warm = _boot_java(store, port, cpu, None)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "keys": indexed,
        "diff_s": cold["boot_s"] - warm["boot_s"],
        "diff_cpu": cold["boot_cpu"] - warm["boot_cpu"],
        "span_s": cold["last_key_s"] - cold["first_key_s"],
        "span_cpu": cold["last_key_cpu"] - cold["first_key_cpu"],
        "cold_boot_s": cold["boot_s"],
        "warm_boot_s": warm["boot_s"],
    }


def run_spark(store: Path, master: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    out = store.parent / "spark-out"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    spark = ["--engine", "spark", "--master", master, "--out", str(out)]
    proc = subprocess.run(
        [*_CLI, "rebuild-index", "--store", str(store), *spark],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, range(os.cpu_count() or 1)),  # every core: Spark's to use
    )
    wall = time.perf_counter() - started
    shutil.rmtree(out, ignore_errors=True)
    return {"wall_s": wall, "report": " / ".join(proc.stdout.strip().splitlines()[-2:])}


def _row(name: str, keys: float, secs: list[float], cpus: list[float]) -> str:
    s, c = statistics.median(secs), statistics.median(cpus)
    return f"| {name} | {keys:,.0f} | {s:.2f} | {c:.2f} | {keys / s:,.0f} | {keys / c:,.0f} |"


def _report(
    ours: list[dict[str, float]],
    java: list[dict[str, float]],
    template: Path,
    args: argparse.Namespace,
    base: list[dict[str, float]] | None = None,
) -> None:
    from store.commitlog.mapped_files import CommitLog

    keys = ours[0]["keys"]
    cl = CommitLog(template / "commitlog", 1 << 30)
    mib = cl.max_offset / (1 << 20)
    cl.close()
    print(
        f"\nstore: {int(ours[0]['records']):,} records, {keys:,.0f} keys, {mib:.0f} MiB of CommitLog "
        f"({args.body}-byte bodies), default geometry; both pinned to CPU {args.cpu}; "
        f"medians of {args.rounds}\n"
    )
    print("| what | keys | seconds | CPU seconds | keys/s | keys per CPU-s |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = {
        "ours: `rebuild-index` command (process start to exit)": (
            [o["cmd_s"] for o in ours],
            [o["cmd_cpu"] for o in ours],
        ),
        "ours: builder, open (CommitLog end walk) + index": (
            [o["open_s"] + o["index_s"] for o in ours],
            [o["open_cpu"] + o["index_cpu"] for o in ours],
        ),
        "ours: builder, index phase only": ([o["index_s"] for o in ours], [o["index_cpu"] for o in ours]),
        "Java: reput, boot(unindexed) - boot(indexed)": (
            [j["diff_s"] for j in java],
            [j["diff_cpu"] for j in java],
        ),
        "Java: reput, first to last key in its IndexFile": (
            [j["span_s"] for j in java],
            [j["span_cpu"] for j in java],
        ),
    }
    for name, (secs, cpus) in rows.items():
        print(_row(name, keys, secs, cpus))
    med = {name: (statistics.median(s), statistics.median(c)) for name, (s, c) in rows.items()}
    names = list(rows)
    print("\nratios (ours keys/s over Java keys/s; >1 means faster than Java):")
    for mine, theirs in [(names[0], names[3]), (names[1], names[3]), (names[2], names[4])]:
        print(
            f"- {mine} / {theirs}: {med[theirs][0] / med[mine][0]:.2f} (wall), "
            f"{med[theirs][1] / med[mine][1]:.2f} (CPU)"
        )
    per_round = [j["diff_s"] / o["cmd_s"] for o, j in zip(ours, java, strict=True)]
    print(f"- per-round wall ratio, command / boot difference: {', '.join(f'{x:.2f}' for x in per_round)}")
    print(
        "- the command's own report (medians): index "
        f"{statistics.median(o['cmd_index_s'] for o in ours):.2f} s, then consume queues "
        f"{statistics.median(o['cmd_cq_s'] for o in ours):.2f} s (0: built in the same pass)"
    )
    if base:
        print(
            f"\nbaseline {args.baseline} (same rounds, A B alternating; command wall s, CPU s, its "
            "own index s + queues s):"
        )
        for b, o in zip(base, ours, strict=True):
            print(
                f"- baseline {b['cmd_s']:.2f} {b['cmd_cpu']:.2f} {b['cmd_index_s']:.2f}+{b['cmd_cq_s']:.2f}"
                f" | this {o['cmd_s']:.2f} {o['cmd_cpu']:.2f} {o['cmd_index_s']:.2f}+{o['cmd_cq_s']:.2f}"
                f" | speed-up {b['cmd_s'] / o['cmd_s']:.2f}x"
            )
        for what in ("cmd_s", "cmd_cpu", "cmd_build_s"):
            b_med = statistics.median(b[what] for b in base)
            o_med = statistics.median(o[what] for o in ours)
            ratios = sorted(b[what] / o[what] for b, o in zip(base, ours, strict=True))
            print(
                f"- {what}: baseline {b_med:.2f}, this {o_med:.2f}, median per-round speed-up "
                f"{statistics.median(ratios):.2f}x"
            )
        j_med = statistics.median(j["diff_s"] for j in java)
        b_cmd = statistics.median(b["cmd_s"] for b in base)
        print(f"- baseline command / boot difference (wall): {j_med / b_cmd:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/rmq-build-vs-java"))
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--body", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="0: only generate (and --spark)")
    parser.add_argument("--cpu", type=int, default=1, help="the core both are pinned to")
    parser.add_argument("--port", type=int, default=31411)
    parser.add_argument("--spark", action="store_true", help="also time the Spark engine at local[1] and [2]")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (its accelerators built in place): its rebuild-index command is timed in "
        "every round too, before or after this one's (the order flips each round)",
    )
    parser.add_argument("--_phases", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._phases is not None:
        print(json.dumps(measure_ours_in_process(args._phases)))
        return
    other = {c for c in os.sched_getaffinity(0) if c != args.cpu}
    if other:
        os.sched_setaffinity(0, other)
    template = args.dir / "store"
    generate(template, args.records, args.body)
    ours: list[dict[str, float]] = []
    java: list[dict[str, float]] = []
    base: list[dict[str, float]] = []
    for r in range(args.rounds):
        if args.baseline is not None and r % 2 == 0:
            base.append(run_ours(template, args.cpu, args.baseline))
        ours.append(run_ours(template, args.cpu))
        if args.baseline is not None and r % 2 == 1:
            base.append(run_ours(template, args.cpu, args.baseline))
        java.append(run_java(template, args.dir / "java", args.port, args.cpu, int(ours[-1]["keys"])))
        print(f"round {r + 1}: ours {json.dumps(ours[-1])}\n         java {json.dumps(java[-1])}", flush=True)
        if base:
            print(f"         baseline {json.dumps(base[-1])}", flush=True)
    if ours:
        _report(ours, java, template, args, base)
    if args.spark:
        for master in ("local[1]", "local[2]") * max(args.rounds, 2):
            s = run_spark(template, master)
            print(
                f"spark {master}: {s['wall_s']:.1f} s wall (incl. Spark start-up); {s['report']}", flush=True
            )


if __name__ == "__main__":
    main()
