"""System calls and wake-ups per SEND: ours against the real 4.9.7 broker, same load (issue 33).

    taskset -c 0 python -m benchmarks.send_syscalls [--base DIR] [--rows sync1,sync16] [--seconds 6]
        [--warmup 3] [--servers java,A,B] [--port 20800] [--no-perf]

Under ``sync1`` the server is idle most of the time and a SEND's round trip is what counts, so its
fixed costs outside the store (system calls, wake-ups of the loop and of other threads, the GIL
passed between them) decide the latency. This runs the official Java producer
(``benchmarks/java/BrokerPathLoad.java``, as ``broker_path_vs_java`` does: core 0) against each
server (core 1, fresh store), and over a window in the middle of the timed row reads:

- every thread's voluntary and involuntary context switches (``/proc/PID/task/TID/status``), by
  the thread's name, and the process's CPU time, without a tracer attached;
- then, in a second run of the same row, ``perf stat`` on the kernel's system-call tracepoints for
  the window: system calls by kind, and in all (``raw_syscalls:sys_enter``). Tracepoints cost
  little (``strace -c`` stops the process at every call and halved the rate); they need root, or
  a ``perf_event_paranoid`` that allows them.

Per-SEND figures are counts over the window divided by the SENDs stored in it: the growth of the
CommitLog's allocated blocks (both stores create its files sparse) over one record's size, to a page
or so per window. The real broker is the JVM under ``start-broker.sh`` (found as its child process).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks import alternating, vs_java
from benchmarks import broker_path_vs_java as bp

#: Seconds after the load's JVM starts before the window opens: JVM start, routes, warm-up, 1 s.
LEAD = 2.5
#: The system calls counted one by one (the rest only in the total): those a request can make.
CALLS = (
    "read", "write", "readv", "writev", "recvfrom", "sendto", "recvmsg", "sendmsg", "epoll_wait",
    "epoll_pwait", "epoll_ctl", "poll", "ppoll", "select", "futex", "newfstatat", "fstat", "pwrite64",
    "pread64", "lseek", "getpid", "gettid", "madvise", "fsync", "fdatasync", "msync", "ioctl",
    "getdents64", "openat", "close", "mmap", "munmap", "sched_yield", "nanosleep", "clock_nanosleep",
    "clock_gettime", "getrusage", "sysinfo", "mprotect",
)  # fmt: skip


def java_pid(root: int) -> int:
    """The JVM below ``root`` (a launcher script's child), else ``root``."""
    pids = [root]
    while pids:
        pid = pids.pop()
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm == "java":
            return pid
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                pids += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return root


def switches(pid: int) -> dict[str, tuple[int, int]]:
    """Per thread name (threads of one name summed): voluntary and involuntary context switches. The
    process's first thread is ``main`` (ours: the event loop's); Python's own threads are all named
    ``python`` by the kernel, so ours beside the loop's show as one ``python`` row."""
    out: Counter[str] = Counter()
    invol: Counter[str] = Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue
        name = re.sub(r"[-_ ]?\d+$", "", re.search(r"^Name:\s*(.*)$", status, re.M).group(1))
        if task.name == str(pid):
            name = "main"
        out[name] += int(re.search(r"^voluntary_ctxt_switches:\s*(\d+)", status, re.M).group(1))
        invol[name] += int(re.search(r"^nonvoluntary_ctxt_switches:\s*(\d+)", status, re.M).group(1))
    return {n: (out[n], invol[n]) for n in out}


def stored_bytes(store: Path) -> int:
    """The bytes the CommitLog files hold on disk: both stores create them sparse (``ftruncate``,
    ``RandomAccessFile.setLength``), so their allocated blocks grow with the records written."""
    return sum(f.stat().st_blocks * 512 for f in (store / "commitlog").glob("*"))


def record_size(store: Path) -> int:
    """The first record's length (its first 4 bytes): the load's records differ by a digit or two."""
    first = min((store / "commitlog").glob("*"))
    with open(first, "rb") as f:
        return int.from_bytes(f.read(4), "big")


def run_row(
    rmq: Path,
    classes: Path,
    server: vs_java.Server,
    store: Path,
    row: str,
    seconds: float,
    warmup: float,
    trace: bool,
) -> dict:
    """One load JVM with ``row``; over a window inside the timed row, the switches or the system calls."""
    pid = java_pid(server.process.pid) if isinstance(server, bp.JavaBroker) else server.process.pid
    script = (
        f". '{rmq}/bin/_env.sh'; exec taskset -c {vs_java.LOAD_CORE} "
        "$JAVA -Xms256m -Xmx512m -XX:+UseSerialGC "
        f'$RMQ_JDK_OPTS $RMQ_CLIENT_OPTS -cp "$RMQ_CP:{classes}" BrokerPathLoad {bp.namesrv_of(server)} '
        f"{bp.TOPIC} {seconds} {warmup} {row}"
    )
    load = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    window = max(seconds - 2.0, 1.0)
    time.sleep(warmup + LEAD)
    result: dict = {"window": window}
    stored = stored_bytes(store)
    window_bytes = 0
    if trace:
        # a tracepoint the kernel lacks (e.g. fstat, on x86-64 newfstatat) fails the whole ``perf stat``
        known = [c for c in CALLS if Path(f"/sys/kernel/tracing/events/syscalls/sys_enter_{c}").is_dir()]
        events = ["raw_syscalls:sys_enter", "context-switches"] + [f"syscalls:sys_enter_{c}" for c in known]
        # perf takes a while to attach its counters to every thread: the window is its workload's
        # run, which notes the CommitLog's blocks when it starts and when it ends
        marks = store.parent / "perf-window"
        blocks = f"stat -c %b {store}/commitlog/*"
        workload = f"{blocks} > {marks}.0; sleep {window}; {blocks} > {marks}.1"
        counted = subprocess.run(
            ["perf", "stat", "-x,", "-e", ",".join(events), "-p", str(pid), "--", "sh", "-c", workload],
            capture_output=True, text=True,
        )  # fmt: skip
        result["calls"] = parse_perf(counted.stderr)
        ends = [sum(int(b) for b in Path(f"{marks}.{k}").read_text().split()) for k in (0, 1)]
        window_bytes = (ends[1] - ends[0]) * 512  # stat's %b counts 512-byte blocks
        if "all" not in result["calls"]:
            raise RuntimeError(f"perf stat counted nothing (run as root?):\n{counted.stderr[-2000:]}")
    else:
        before, cpu = switches(pid), bp.cpu_seconds(pid)
        time.sleep(window)
        after, cpu = switches(pid), bp.cpu_seconds(pid) - cpu
        result["cpu_s"] = cpu
        result["switches"] = {
            n: (after[n][0] - before.get(n, (0, 0))[0], after[n][1] - before.get(n, (0, 0))[1]) for n in after
        }
    stored = window_bytes if trace else stored_bytes(store) - stored
    stdout, stderr = load.communicate(timeout=seconds + warmup + 120)
    lines = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
    if not lines:
        raise RuntimeError(f"{server.name}: no result from the load:\n{stdout[-2000:]}\n{stderr[-2000:]}")
    result.update(lines[-1])
    # the sends acknowledged in the window, from the bytes stored meanwhile (a mean rate would do only
    # if the tracer did not slow the row down)
    result["sends"] = stored / record_size(store)
    result["sends_by_rate"] = result["msgs_per_s"] * window
    return result


def parse_perf(text: str) -> dict[str, int]:
    """``perf stat -x,``'s lines: system call (``all`` for the total) -> calls."""
    calls: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) > 3 and parts[0].isdigit():
            event = parts[2]
            name = {"raw_syscalls:sys_enter": "all", "context-switches": "(context switches)"}.get(event)
            name = name or event.rsplit("sys_enter_", 1)[-1]
            calls[name] = int(parts[0])
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", type=Path, help="a built checkout to measure too (A)")
    parser.add_argument("--rows", default="sync1,sync16")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--port", type=int, default=20800)
    parser.add_argument("--no-perf", action="store_true", help="only the context switches")
    parser.add_argument("--servers", default="java,A,B", help="of java, A (needs --base), B")
    args = parser.parse_args()
    rows = [r for r in args.rows.split(",") if r]
    names = [n for n in args.servers.split(",") if n and (n != "A" or args.base is not None)]
    if shutil.which("javac") is None or not bp.RMQ_BIN.is_dir():
        parser.error(f"needs a JDK (javac) and {bp.RMQ_BIN}")
    if not args.no_perf and shutil.which("perf") is None:
        parser.error("needs perf (or --no-perf)")
    with tempfile.TemporaryDirectory(prefix="send-syscalls-") as tmp:
        rmq, classes = bp.prepare_java(Path(tmp), bp.SOURCE)

        stores: dict[int, Path] = {}

        def start(name: str, work: Path, port: int) -> vs_java.Server:
            stores[port] = work / "store"
            if name == "java":
                return bp.start_java(rmq, work, port)
            checkout = bp.REPO if name == "B" else args.base
            (work / "store").mkdir()
            server = alternating.start_writable(
                checkout, work / "store", port, work / "serve.log", *bp.QUIET_PORTS
            )
            server.name = name
            return server

        def run(server: vs_java.Server) -> dict:
            out = {}
            for row in rows:
                out[row] = {
                    "switches": run_row(
                        rmq, classes, server, stores[server.port], row, args.seconds, args.warmup, False
                    )
                }
                if not args.no_perf:
                    out[row]["perf"] = run_row(
                        rmq, classes, server, stores[server.port], row, args.seconds, args.warmup, True
                    )
            return out

        runs = alternating.alternate(names, 1, args.port, start, run, "send-syscalls-")
    print(f"load average {os.getloadavg()}")
    for row in rows:
        print(f"\n### {row}\n")
        print("| per SEND | " + " | ".join(names) + " |")
        print("|---|" + "---:|" * len(names))
        got = {n: runs[n][0][row] for n in names}
        print(
            "| msgs/s (no tracer) | "
            + " | ".join(f"{got[n]['switches']['msgs_per_s']:,.0f}" for n in names)
            + " |"
        )
        print(
            "| p50 ms (no tracer) | "
            + " | ".join(f"{got[n]['switches']['p50_ms']:.3f}" for n in names)
            + " |"
        )
        print(
            "| server CPU µs (no tracer) | "
            + " | ".join(
                f"{got[n]['switches']['cpu_s'] / got[n]['switches']['sends'] * 1e6:.1f}" for n in names
            )
            + " |"
        )
        threads = sorted({t for n in names for t in got[n]["switches"]["switches"]})
        for kind, k in (("voluntary", 0), ("involuntary", 1)):
            total = {n: sum(v[k] for v in got[n]["switches"]["switches"].values()) for n in names}
            cells = " | ".join(f"{total[n] / got[n]['switches']['sends']:.2f}" for n in names)
            print(f"| {kind} context switches, all threads | {cells} |")
        for t in threads:
            cells = []
            for n in names:
                v = got[n]["switches"]["switches"].get(t)
                cells.append("" if v is None else f"{v[0] / got[n]['switches']['sends']:.3f}")
            if any(c not in ("", "0.000") for c in cells):
                print(f"| voluntary switches, thread {t} | " + " | ".join(cells) + " |")
        if args.no_perf:
            continue
        print(
            "| msgs/s under perf | "
            + " | ".join(f"{got[n]['perf']['msgs_per_s']:,.0f}" for n in names)
            + " |"
        )
        calls = sorted({c for n in names for c in got[n]["perf"]["calls"]})
        for c in sorted(calls, key=lambda c: -max(got[n]["perf"]["calls"].get(c, 0) for n in names)):
            cells = [f"{got[n]['perf']['calls'].get(c, 0) / got[n]['perf']['sends']:.3f}" for n in names]
            if any(float(x) >= 0.005 for x in cells):
                print(f"| {c} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
