"""What the server did while each slow message of the end-to-end row was in flight (issue 33's e2e).

    taskset -c 0 python -m benchmarks.loop_turns [--checkout DIR] [--seconds 8] [--warmup 3]
        [--threshold-ms 0.5] [--uvloop] [--port 21500] [--slowest 0.02] [--json OUT]

The end-to-end row of ``benchmarks.broker_path_vs_java`` (the official 4.9.7 push consumer while one
producer sends 200 msgs/s) gives a p99 only. This runs that row once against ``serve --writable`` of
``--checkout`` (core 1, fresh store) started under a probe, and the Java side (core 0) writes every
counted message's send time and latency (``BP_E2E_DUMP``). The probe records in the server, on the
same monotonic clock as the JVM's ``System.nanoTime``:

- every cyclic-GC collection (``gc.callbacks``): when, how long, which generation;
- every job of the default executor (the consume queues' sync, the offsets' flush...): when and how
  long, and on which thread;
- with the asyncio loop (the default here; ``--uvloop`` keeps the server's own loop, whose turns
  cannot be hooked): every loop turn longer than ``--threshold-ms`` with the callbacks that ran in
  it (those over 50 µs by name), and every ``select`` that came back more than the threshold after
  its timeout (the thread was kept from running: the GIL held by another thread, or the core);
- the SENDs' wake-ups of held pulls (``StoreChanges.notify_queue``) and the answers of woken pulls.

``--syscalls`` also attaches ``perf trace -p`` to the server for the row and prints its system calls
that took longer than the threshold (the waits of the loop's ``epoll`` and of idle threads left
out), by thread and call: a ``pwrite`` that waits for the file system's journal shows there.

It then prints a summary of each kind and, for the slowest ``--slowest`` share of the messages,
which of those events overlapped the message's flight (from its send to its delivery): what is left
with no server event over it is the client's or the machine's. Hold ``flock -o /work/bench.lock``
around it. The probe itself costs a few µs per callback (asyncio loop), so its latencies are not the
row's: it says where the tail comes from, ``broker_path_vs_java`` says how large it is.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Bounds on what the probe keeps (records of each kind), so a long run cannot grow it without end.
MAX_RECORDS = 200_000
#: Callbacks shorter than this are counted but not named in a slow turn's list (ns).
NAMED_CALLBACK_NS = 50_000


def _callback_name(callback: object) -> str:
    """A short name for what a loop handle ran: a task's coroutine, a bound method's class and name."""
    owner = getattr(callback, "__self__", None)
    if owner is not None:
        get_coro = getattr(owner, "get_coro", None)
        if get_coro is not None:
            coro = get_coro()
            return f"task {getattr(coro, '__qualname__', type(coro).__name__)}"
        return f"{type(owner).__name__}.{getattr(callback, '__name__', '?')}"
    return getattr(callback, "__qualname__", type(callback).__name__)


def request_codes(data: bytes) -> list[int]:
    """The request codes of the whole frames at the start of ``data`` (a read of the remoting
    protocol: length, header length with its serialization in the top byte, then the header)."""
    codes = []
    at = 0
    while at + 10 <= len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        kind, header = data[at + 4], data[at + 8 : at + 8 + 64]
        if kind == 1:  # ROCKETMQ: the code is the header's first two bytes
            codes.append(int.from_bytes(header[:2], "big"))
        else:  # JSON
            found = re.search(rb'"code":(-?\d+)', header)
            codes.append(int(found.group(1)) if found else -1)
        at += 4 + length
    return codes


def install_probe(out: Path, threshold_ns: int, hook_loop: bool) -> None:
    """Record GC collections, executor jobs, slow loop turns and held-pull wake-ups in this process,
    written to ``out`` as JSON when it exits. Called before the server's modules run."""
    import asyncio
    import atexit
    import concurrent.futures.thread as futures_thread
    import gc
    import threading

    clock = time.monotonic_ns
    records: dict[str, list] = {
        "gc": [], "jobs": [], "turns": [], "late": [], "notify": [], "woken": [], "reads": []
    }  # fmt: skip
    counts = {"turns": 0, "callbacks": 0}

    def keep(kind: str, item: object) -> None:
        if len(records[kind]) < MAX_RECORDS:
            records[kind].append(item)

    gc_start = [0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_start[0] = clock()
        else:
            keep("gc", (gc_start[0], clock() - gc_start[0], info["generation"], info["collected"]))

    gc.callbacks.append(on_gc)

    run_job = futures_thread._WorkItem.run

    def timed_job(self: futures_thread._WorkItem) -> None:
        start = clock()
        try:
            run_job(self)
        finally:
            name = getattr(self.fn, "__qualname__", repr(self.fn))
            keep("jobs", (start, clock() - start, name, threading.get_native_id()))

    futures_thread._WorkItem.run = timed_job  # type: ignore[method-assign]

    from server import store_changes

    notify = store_changes.StoreChanges.notify_queue

    def timed_notify(self: store_changes.StoreChanges, topic: str, queue_id: int) -> None:
        # held pulls wait on a wake-up (``_wakers``) since h44, on an event before
        woke = (topic, queue_id) in self._queues or (topic, queue_id) in getattr(self, "_wakers", ())
        notify(self, topic, queue_id)
        if woke:
            keep("notify", (clock(), queue_id))

    store_changes.StoreChanges.notify_queue = timed_notify  # type: ignore[method-assign]

    from server.remoting.processors import pull_message

    woken_answer = pull_message.woken_answer

    python_pass = [False]  # whether the last woken answer was made by ``woken_answer``

    def timed_woken(response: object) -> object:
        keep("woken", (clock(),))
        python_pass[0] = True
        return woken_answer(response)

    pull_message.woken_answer = timed_woken

    answer_woken = getattr(pull_message.PullMessageProcessor, "answer_woken", None)
    if answer_woken is not None:
        # h44: the SEND that wakes a held pull answers it, compiled or through ``woken_answer``
        # (which then records it above): a compiled answer is recorded here.
        def timed_answer_woken(self: object, waiting: object) -> object:
            python_pass[0] = False
            answered = answer_woken(self, waiting)
            if answered is not None and not python_pass[0]:
                keep("woken", (clock(),))
            return answered

        pull_message.PullMessageProcessor.answer_woken = timed_answer_woken  # type: ignore[method-assign]

    from server.remoting import connection

    data_received = connection.RemotingConnection.data_received

    def timed_read(self: connection.RemotingConnection, data: bytes) -> None:
        start, cpu = clock(), time.thread_time_ns()
        data_received(self, data)
        took = clock() - start
        if took > threshold_ns // 2:
            keep("reads", (start, took, request_codes(bytes(data[:4096])), time.thread_time_ns() - cpu))

    connection.RemotingConnection.data_received = timed_read  # type: ignore[method-assign]

    if hook_loop:
        from asyncio import events

        cpu_clock = time.thread_time_ns
        turn: dict = {"start": 0, "cpu": 0, "named": []}
        run_handle = events.Handle._run

        def timed_run(self: events.Handle) -> None:
            start = clock()
            run_handle(self)
            took = clock() - start
            counts["callbacks"] += 1
            if took > NAMED_CALLBACK_NS:
                turn["named"].append((_callback_name(self._callback), took))

        events.Handle._run = timed_run  # type: ignore[method-assign]

        def new_loop() -> asyncio.AbstractEventLoop:
            loop = asyncio.new_event_loop()
            selector = loop._selector  # type: ignore[attr-defined]
            select = selector.select

            def timed_select(timeout: float | None = None) -> list:
                enter = clock()
                if turn["start"]:
                    counts["turns"] += 1
                    took = enter - turn["start"]
                    if took > threshold_ns:
                        keep("turns", (turn["start"], took, turn["named"], cpu_clock() - turn["cpu"]))
                turn["named"] = []
                events_ready = select(timeout)
                back = clock()
                turn["start"] = back
                turn["cpu"] = cpu_clock()
                if timeout is not None and back - enter > timeout * 1e9 + threshold_ns:
                    keep("late", (enter, back - enter, int(timeout * 1e9), len(events_ready)))
                return events_ready

            selector.select = timed_select
            return loop

        from clients.cli import serve

        serve._loop_factory = lambda: new_loop

    def dump() -> None:
        out.write_text(json.dumps({"counts": counts, **records}))

    atexit.register(dump)


def _probe_main(argv: list[str]) -> int:
    """The server child: ``--probe OUT THRESHOLD_NS HOOK_LOOP -- serve ...``."""
    out, threshold, hook = Path(argv[1]), int(argv[2]), argv[3] == "1"
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]  # run by path: this directory is not the checkout's import root
    install_probe(out, threshold, hook)
    from clients.cli import main as cli_main

    return cli_main(argv[5:])


def _overlaps(events: list, start: int, end: int) -> list:
    """The (start, duration, ...) records that overlap [start, end)."""
    return [e for e in events if e[0] < end and e[0] + e[1] > start]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f}"


def summarize(probe: dict, messages: list[tuple[int, int]], sends: dict[int, int], slowest: float) -> None:
    """Print each kind's totals and what overlapped the slowest messages."""
    if not messages:
        print("no messages were counted")
        return
    start = min(m[0] for m in messages)
    end = max(m[0] + m[1] * 1000 for m in messages)
    window = end - start
    lats = sorted(m[1] for m in messages)
    k = len(lats)
    print(f"{k} messages over {window / 1e9:.1f} s: p50 {lats[k // 2] / 1000:.2f} ms, "
          f"p99 {lats[min(k - 1, int(k * 0.99))] / 1000:.2f} ms, max {lats[-1] / 1000:.2f} ms")  # fmt: skip
    kinds = ("gc", "jobs", "turns", "late", "reads")
    inside = {kind: [e for e in probe.get(kind, []) if start <= e[0] < end] for kind in kinds}
    counts = probe["counts"]
    if counts["turns"]:
        print(f"loop: {counts['turns']} turns, {counts['callbacks']} callbacks in the whole run; "
              f"{len(inside['turns'])} turns over the threshold and {len(inside['late'])} late selects "
              "in the counted window")  # fmt: skip
    for gen in (0, 1, 2):
        runs = [g[1] for g in inside["gc"] if g[2] == gen]
        if runs:
            print(f"gc generation {gen}: {len(runs)} collections, {_ms(sum(runs))} ms in all, max "
                  f"{_ms(max(runs))} ms, over 0.5 ms: {sum(r > 500_000 for r in runs)}")  # fmt: skip
    by_job: dict[str, list[int]] = {}
    for job in inside["jobs"]:
        by_job.setdefault(job[2], []).append(job[1])
    for name, runs in sorted(by_job.items()):
        print(f"executor {name}: {len(runs)} jobs, {_ms(sum(runs))} ms in all, max {_ms(max(runs))} ms")
    if inside["turns"]:
        busy = [t for t in inside["turns"] if t[3] > t[1] / 2]
        print(f"turns over the threshold: {len(inside['turns'])}, of which {len(busy)} on the core for over "
              f"half their time (the server's own work; the others waited for the core or the kernel): "
              f"longest {_ms(max((t[3] for t in inside['turns']), default=0))} ms of CPU")  # fmt: skip
    named: dict[str, list[int]] = {}
    for turn in inside["turns"]:
        for name, took in turn[2]:
            named.setdefault(name, []).append(took)
    for name, runs in sorted(named.items(), key=lambda item: -sum(item[1]))[:12]:
        print(f"  in slow turns: {name}: {len(runs)} calls, max {_ms(max(runs))} ms")
    by_code: dict[str, list[tuple[int, int]]] = {}
    for read in inside["reads"]:
        by_code.setdefault(",".join(map(str, sorted(set(read[2])))) or "?", []).append((read[1], read[3]))
    for codes, runs in sorted(by_code.items(), key=lambda item: -len(item[1])):
        busy = [cpu for took, cpu in runs if cpu > took / 2]
        longest, most_cpu = max(r[0] for r in runs), max(r[1] for r in runs)
        print(f"  reads over half the threshold, request codes {codes}: {len(runs)}, max {_ms(longest)} ms; "
              f"{len(busy)} mostly on the core (max CPU {_ms(most_cpu)} ms)")  # fmt: skip
    notify = sorted(n[0] for n in probe["notify"])
    woken = sorted(w[0] for w in probe["woken"])
    gaps = []
    j = 0
    for at in notify:
        while j < len(woken) and woken[j] < at:
            j += 1
        if j < len(woken) and woken[j] - at < 100_000_000:
            gaps.append(woken[j] - at)
    if gaps:
        gaps.sort()
        print(f"held pull woken -> its answer made: {len(gaps)}, p50 {gaps[len(gaps) // 2] / 1000:.0f} µs, "
              f"p99 {gaps[int(len(gaps) * 0.99)] / 1000:.0f} µs, max {gaps[-1] / 1000:.0f} µs")  # fmt: skip
    slow = sorted(messages, key=lambda m: -m[1])[: max(1, int(k * slowest))]
    print(f"\nthe slowest {len(slow)} messages (latency, its send's own, what overlapped its flight):")
    blamed = {"gc": 0, "jobs": 0, "turns": 0, "late": 0, "none": 0}
    for sent, lat in slow:
        flight_end = sent + lat * 1000
        found = []
        for kind in ("gc", "jobs", "turns", "late"):
            hits = _overlaps(inside[kind], sent, flight_end)
            if hits:
                blamed[kind] += 1
                found.append(f"{kind} {len(hits)} ({_ms(max(h[1] for h in hits))} ms)")
        if not found:
            blamed["none"] += 1
        send = sends.get(sent)
        send_text = f"{send / 1000:.2f}" if send is not None else "?"
        print(
            f"  {lat / 1000:6.2f} ms  send {send_text} ms  at +{(sent - start) / 1e9:5.2f} s  "
            + (", ".join(found) or "-")
        )
    print(
        "slow messages with each kind over their flight: " + ", ".join(f"{k} {v}" for k, v in blamed.items())
    )


#: Calls that wait by design (an idle loop's poll, a sleeping thread): not what holds a request.
WAITING_CALLS = (
    "epoll_wait",
    "epoll_pwait",
    "futex",
    "select",
    "poll",
    "clock_nanosleep",
    "nanosleep",
    "accept",
)


def open_files(pid: int, root: Path) -> dict[str, str]:
    """The process's descriptors -> the files they name (relative to ``root`` when under it)."""
    files = {}
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        files[fd.name] = target.removeprefix(f"{root}/")
    return files


def print_blocked(script: str) -> None:
    """The loop thread's switches away in uninterruptible sleep (``prev_state=D``: waiting in the
    kernel, for a page or the file system's journal), grouped by their kernel stack."""
    stacks: dict[str, int] = {}
    for event in script.split("\n\n"):
        lines = event.strip().splitlines()
        if not lines or "prev_state=D" not in lines[0]:
            continue
        frames = [line.split()[1].split("+")[0] for line in lines[1:] if len(line.split()) > 1]
        key = " < ".join(f for f in frames if not f.startswith(("__schedule", "schedule")))[:400]
        stacks[key] = stacks.get(key, 0) + 1
    print(f"\nthe loop's thread went to sleep in the kernel (D) {sum(stacks.values())} times; by stack:")
    for key, count in sorted(stacks.items(), key=lambda item: -item[1])[:10]:
        print(f"  {count}: {key}")


def core_waits(pid: int) -> tuple[float, float, int]:
    """The process's main thread so far: seconds on its core, seconds runnable but waiting for it
    (``/proc/.../schedstat``: another task had the core), and involuntary context switches."""
    run_ns, wait_ns, _ = (int(x) for x in Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split())
    status = Path(f"/proc/{pid}/task/{pid}/status").read_text()
    switches = int(status.split("nonvoluntary_ctxt_switches:")[1].split()[0])
    return run_ns / 1e9, wait_ns / 1e9, switches


def _file_kind(path: str) -> str:
    """A store file's kind (its directory), not its name: the CommitLog, a consume queue..."""
    for kind in ("commitlog", "consumequeue", "index", "config", "checkpoint", "socket", "pipe"):
        if kind in path:
            return kind
    return path


def print_slow_calls(trace: str, files: dict[str, str], loop_tid: int) -> None:
    """``perf trace``'s lines (``time ( dur ms): comm/tid call(fd: N, ...) = ret``), by thread (the
    loop's or another), call and the kind of file its descriptor names."""
    calls: dict[tuple[str, str], list[float]] = {}
    for line in trace.splitlines():
        head, sep, rest = line.partition("): ")
        if not sep or "(" not in head:
            continue
        try:
            took = float(head.rsplit("(", 1)[1].strip().split()[0])
        except (ValueError, IndexError):
            continue
        thread, _, call = rest.partition(" ")
        name, _, arguments = call.partition("(")
        if name in WAITING_CALLS:
            continue
        if arguments.startswith("fd: "):
            name += " " + _file_kind(files.get(arguments[4:].split(",", 1)[0].split(")", 1)[0], "?"))
        who = "loop" if thread.endswith(f"/{loop_tid}") else f"thread {thread.rpartition('/')[2]}"
        calls.setdefault((who, name), []).append(took)
    print("\nsystem calls over the threshold (thread, call and file: count, max ms, total ms):")
    for (who, name), runs in sorted(calls.items(), key=lambda item: -sum(item[1])):
        print(f"  {who} {name}: {len(runs)}, max {max(runs):.2f}, total {sum(runs):.2f}")
    if not calls:
        print("  none")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--probe":
        return _probe_main(sys.argv[1:])
    from benchmarks import alternating, vs_java
    from benchmarks import broker_path_vs_java as bp

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.loop_turns", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--checkout", type=Path, default=REPO, help="the built checkout to serve")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--threshold-ms", type=float, default=0.5)
    parser.add_argument("--uvloop", action="store_true", help="keep the server's loop (no turn records)")
    parser.add_argument("--port", type=int, default=21500)
    parser.add_argument("--slowest", type=float, default=0.02, help="the share of messages to explain")
    parser.add_argument("--syscalls", action="store_true", help="perf trace the server's slow calls")
    parser.add_argument(
        "--blocked", action="store_true", help="perf record where the loop's thread sleeps in the kernel"
    )
    parser.add_argument("--from-json", type=Path, help="summarize a run kept with --json (no load)")
    parser.add_argument("--json", type=Path, help="also keep the probe's records and the messages here")
    args = parser.parse_args()
    if args.from_json is not None:
        kept = json.loads(args.from_json.read_text())
        sends = {int(at): took for at, took in kept["sends"].items()}
        summarize(kept["probe"], [tuple(m) for m in kept["messages"]], sends, args.slowest)
        return 0
    with tempfile.TemporaryDirectory(prefix="loop-turns-") as tmp_name:
        tmp = Path(tmp_name)
        rmq, classes = bp.prepare_java(tmp, bp.CONSUME_SOURCE)
        probe_out, dump = tmp / "probe.json", tmp / "e2e.txt"
        (tmp / "store").mkdir()
        cmd = ["taskset", "-c", vs_java.SERVER_CORE, sys.executable, str(Path(__file__).resolve()), "--probe",
               str(probe_out), str(int(args.threshold_ms * 1e6)), "0" if args.uvloop else "1", "--",
               "serve", "--writable", "--store", str(tmp / "store"), "--port", str(args.port),
               "--log-level", "WARNING", *bp.QUIET_PORTS]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(args.checkout)}
        with open(tmp / "serve.log", "wb") as log:
            process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=args.checkout, env=env)
        server = vs_java.Server("probed", args.port, process)
        try:
            vs_java.wait_port(args.port, 60, process)
            time.sleep(1.0)
            script = f"export BP_E2E_DUMP='{dump}'; " + bp._java(
                rmq,
                classes,
                f"BrokerPathConsume 127.0.0.1:{args.port} {bp.TOPIC} 0 {args.seconds} {args.warmup} e2e",
            )
            tracer = None
            if args.syscalls:
                trace_cmd = ["perf", "trace", "-p", str(process.pid), "--duration", str(args.threshold_ms)]
                trace_cmd += ["-o", str(tmp / "trace.txt")]
                tracer = subprocess.Popen(trace_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if args.blocked:
                record_cmd = [
                    "perf",
                    "record",
                    "-q",
                    "-e",
                    "sched:sched_switch",
                    "-g",
                    "-t",
                    str(process.pid),
                ]
                record_cmd += ["-o", str(tmp / "switches.data")]
                recorder = subprocess.Popen(record_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            before, began = core_waits(process.pid), time.monotonic()
            result = bp.run_jvm(script, server, ["e2e"], budget=args.warmup + args.seconds + 120)["e2e"]
            after, span = core_waits(process.pid), time.monotonic() - began
            files = open_files(process.pid, tmp / "store")
            if tracer is not None:
                tracer.send_signal(signal.SIGINT)
                tracer.wait(30)
            if args.blocked:
                recorder.send_signal(signal.SIGINT)
                recorder.wait(30)
                script = subprocess.run(
                    ["perf", "script", "-i", str(tmp / "switches.data")], capture_output=True, text=True
                ).stdout
        finally:
            server.stop()  # SIGTERM: the server stops as it does in service, and the probe writes
        print(f"load average {os.getloadavg()}; cpu {alternating.cpu_model()}; checkout {args.checkout}; "
              f"{'uvloop' if args.uvloop else 'asyncio loop, probed'}")  # fmt: skip
        print(
            "the row: "
            + json.dumps({k: result[k] for k in ("msgs", "p50_ms", "p99_ms", "send_p99_ms", "max_ms")})
        )
        print(f"the loop's thread over the JVM's {span:.1f} s: on its core {after[0] - before[0]:.3f} s, "
              f"runnable but waiting for it {after[1] - before[1]:.3f} s, {after[2] - before[2]} "
              "involuntary switches (other tasks on the core)")  # fmt: skip
        if not probe_out.exists():
            print("the server wrote no probe records:\n" + (tmp / "serve.log").read_text()[-3000:])
            return 1
        probe = json.loads(probe_out.read_text())
        messages, sends = [], {}
        for line in dump.read_text().splitlines():
            parts = line.split()
            if parts[0] == "send":
                sends[int(parts[1])] = int(parts[2])
            else:
                messages.append((int(parts[0]), int(parts[1])))
        if args.json is not None:
            args.json.write_text(json.dumps({"probe": probe, "messages": messages, "sends": sends}))
        summarize(probe, messages, sends, args.slowest)
        if args.blocked:
            print_blocked(script)
        if args.syscalls:
            print_slow_calls((tmp / "trace.txt").read_text(), files, process.pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
