"""The broker path against the real 4.9.7 broker, loaded by the official Java 4.9.7 clients (issue 33).

    taskset -c 0 python -m benchmarks.broker_path_vs_java [--base DIR] [--rounds 3] [--seconds 10]
        [--warmup 5] [--rows sync1,sync16,async256,batch32,push,orderly,lite,e2e] [--messages 200000]
        [--port 20700] [--short]

Each server runs on core 1 (``taskset -c 1``) on a fresh, empty store: the real name server and
broker from a copy of ``RMQ_ROCKETMQ_HOME`` (default settings; the topic auto-created with
8 queues), ours as ``serve --writable`` of this checkout (B) and, with ``--base``, of another built
checkout (A) (gRPC and HTTP off). The load is ``benchmarks/java/BrokerPathLoad.java`` on the real
DefaultMQProducer, compiled here once, one JVM per server and round on core 0 (run this script on
core 0 too): a warm-up (which creates the topic), then each row for ``--seconds`` after 1 s uncounted
(1 KiB bodies with a key): sync send from 1 and 16 threads, async send with 256 in flight, batches of
32. The consume rows run in a second JVM, ``benchmarks/java/BrokerPathConsume.java`` on the real
DefaultMQPushConsumer: ``push``, ``--messages`` messages stored first (not timed), then a new group
consuming them from the first offset (msgs/s); ``orderly``, the same with a
``MessageListenerOrderly`` (LOCK_BATCH_MQ first, each queue in order); ``lite``, the same with a
``DefaultLitePullConsumer`` (subscribe, ``poll()`` until all arrived); ``e2e``, a push consumer
while one producer sends 200 msgs/s (``--warmup`` uncounted, then ``--seconds``): p50 / p99 of
the listener's time minus the send's (one JVM, one clock), and the sends' own p99 (a message's
latency includes its send). All give the server process's CPU seconds over their timed part (per
message for the send rows), from ``/proc/<pid>/stat`` (the JVM's or our Python's, every thread), and
the load JVM's own CPU seconds per second over the same part ("the Java client's core busy": at
about 1.0 its one core is saturated, so the row's rate is the client's limit, not the server's), and
the rate divided by it ("the client's ceiling": the rate at which the client's own work would fill
its core, so the most any server could reach with this client; below the table, B's ceiling over
the real broker's rate, the most "B / java" could be on each row).
Rounds alternate the servers, the order reversed every round. The table gives per row the median
over rounds and the median of the per-round ratios (each round's in brackets); ``--short`` is
``--rounds 1 --seconds 3 --warmup 3 --messages 20000``, a few minutes in all.

``--port`` (default 20700; each server takes up to its port + 10 and the real broker's name server
its port + 5) lies below Linux's ephemeral range (32768-60999), where a client's outgoing connection
can hold a port the next server needs.

A row whose sends failed or whose messages did not all arrive (errors > 0) is printed with its error
count: its figures are not comparable.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import alternating, vs_java

REPO = Path(__file__).resolve().parents[1]
#: The real RocketMQ 4.9.7 (``RMQ_ROCKETMQ_HOME``, as for the tests: ``tests/golden/README.md``).
RMQ_BIN = Path(os.environ.get("RMQ_ROCKETMQ_HOME", REPO.parent / "shared" / "rocketmq-4.9.7-bin"))
SOURCE = REPO / "benchmarks" / "java" / "BrokerPathLoad.java"
CONSUME_SOURCE = REPO / "benchmarks" / "java" / "BrokerPathConsume.java"
TOPIC = "BrokerPath"
ROWS = ("sync1", "sync16", "async256", "batch32", "push", "orderly", "lite", "e2e")
#: The rows of BrokerPathConsume (the others are BrokerPathLoad's).
CONSUME_ROWS = ("push", "orderly", "lite", "e2e")
#: (row, the result's key, the label, larger is better; None: no ratio, a fact about the load)
CELLS = (
    ("sync1", "msgs_per_s", "sync send, 1 thread, msgs/s", True),
    ("sync1", "p50_ms", "sync send, 1 thread, p50 ms", False),
    ("sync1", "cpu_us_per_msg", "sync send, 1 thread: the server's CPU us per message", False),
    ("sync1", "client_busy", "sync send, 1 thread: the Java client's core busy", None),
    ("sync1", "client_ceiling", "sync send, 1 thread: the client's ceiling, msgs/s (rate / busy)", None),
    ("sync16", "msgs_per_s", "sync send, 16 threads, msgs/s", True),
    ("sync16", "cpu_us_per_msg", "sync send, 16 threads: the server's CPU us per message", False),
    ("sync16", "client_busy", "sync send, 16 threads: the Java client's core busy", None),
    ("sync16", "client_ceiling", "sync send, 16 threads: the client's ceiling, msgs/s (rate / busy)", None),
    ("async256", "msgs_per_s", "async send, 256 in flight, msgs/s", True),
    ("async256", "p99_ms", "async send, 256 in flight, p99 ms", False),
    ("async256", "cpu_us_per_msg", "async send, 256 in flight: the server's CPU us per message", False),
    ("async256", "client_busy", "async send, 256 in flight: the Java client's core busy", None),
    ("async256", "client_ceiling", "async send, 256 in flight: the client's ceiling, msgs/s", None),
    ("batch32", "msgs_per_s", "batch send, 32 x 1 KiB, msgs/s", True),
    ("batch32", "cpu_us_per_msg", "batch send, 32 x 1 KiB: the server's CPU us per message", False),
    ("batch32", "client_busy", "batch send, 32 x 1 KiB: the Java client's core busy", None),
    ("batch32", "client_ceiling", "batch send, 32 x 1 KiB: the client's ceiling, msgs/s (rate / busy)", None),
    ("push", "msgs_per_s", "push consumer from the first offset, msgs/s", True),
    ("push", "cpu_s", "push consumer, the server's CPU seconds", False),
    ("push", "client_busy", "push consumer: the Java client's core busy", None),
    ("push", "client_ceiling", "push consumer: the client's ceiling, msgs/s (rate / busy)", None),
    ("orderly", "msgs_per_s", "orderly push consumer from the first offset, msgs/s", True),
    ("orderly", "cpu_s", "orderly push consumer, the server's CPU seconds", False),
    ("orderly", "client_busy", "orderly push consumer: the Java client's core busy", None),
    ("orderly", "client_ceiling", "orderly push consumer: the client's ceiling, msgs/s (rate / busy)", None),
    ("lite", "msgs_per_s", "lite pull consumer from the first offset, msgs/s", True),
    ("lite", "cpu_s", "lite pull consumer, the server's CPU seconds", False),
    ("lite", "client_busy", "lite pull consumer: the Java client's core busy", None),
    ("lite", "client_ceiling", "lite pull consumer: the client's ceiling, msgs/s (rate / busy)", None),
    ("e2e", "p50_ms", "end to end, push consumer at 200 msgs/s, p50 ms", False),
    ("e2e", "p99_ms", "end to end, push consumer at 200 msgs/s, p99 ms", False),
    ("e2e", "send_p99_ms", "end to end: its sends' own p99 ms", False),
    ("e2e", "cpu_s", "end to end: the server's CPU seconds", False),
)
QUIET_PORTS = ("--grpc-port", "0", "--http", "off")


@dataclass
class JavaBroker(vs_java.Server):
    """The real name server (``namesrv``) and broker, both stopped by their pids."""

    namesrv: subprocess.Popen[bytes] | None = None
    namesrv_port: int = 0

    def stop(self) -> None:
        super().stop()
        if self.namesrv is not None and self.namesrv.poll() is None:
            self.namesrv.send_signal(signal.SIGTERM)
            try:
                self.namesrv.wait(20)
            except subprocess.TimeoutExpired:
                self.namesrv.kill()
                self.namesrv.wait()


def _wait_for(log: Path, text: bytes, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"no {text!r} in {log}")
        time.sleep(0.3)


def start_java(rmq: Path, work: Path, port: int) -> JavaBroker:
    """The real name server on ``port + 5`` and broker on ``port`` (it binds port - 2 and + 1 too)."""
    ns_port = port + 5
    env = {**os.environ, "RMQ_NAMESRV_DIR": str(work / "namesrv")}
    ns_log, br_log = work / "namesrv.out", work / "broker.out"
    with open(ns_log, "wb") as out:
        namesrv = subprocess.Popen(
            ["taskset", "-c", vs_java.SERVER_CORE, str(rmq / "bin" / "start-namesrv.sh"), str(ns_port)],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    _wait_for(ns_log, b"boot success", namesrv)
    (work / "store").mkdir()
    with open(br_log, "wb") as out:
        broker = subprocess.Popen(
            ["taskset", "-c", vs_java.SERVER_CORE, str(rmq / "bin" / "start-broker.sh"), str(work / "store"),
             str(port), f"127.0.0.1:{ns_port}"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = JavaBroker("java", port, broker, namesrv, ns_port)
    try:
        _wait_for(br_log, b"boot success", broker)
    except RuntimeError:
        server.stop()
        raise
    time.sleep(1.0)
    return server


def prepare_java(tmp: Path, *sources: Path) -> tuple[Path, Path]:
    """A copy of the real 4.9.7 under ``tmp`` (its scripts write beside themselves) and ``sources``
    compiled against its client: (the copy, the classes directory)."""
    rmq, classes = tmp / "rmq", tmp / "classes"
    shutil.copytree(RMQ_BIN, rmq)
    javac = ["javac", "-nowarn", "-encoding", "UTF-8", "-cp", f"{rmq}/lib/*", "-d", str(classes)]
    subprocess.run([*javac, *map(str, sources)], check=True)
    return rmq, classes


def namesrv_of(server: vs_java.Server) -> str:
    """Where the producer asks for routes: the real name server, or ours (it answers them itself)."""
    if isinstance(server, JavaBroker):
        return f"127.0.0.1:{server.namesrv_port}"
    return f"127.0.0.1:{server.port}"


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far, all its threads (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_jvm(script: str, server: vs_java.Server, rows: list[str], budget: float) -> dict[str, dict]:
    """One load JVM (``script`` execs it, so its pid is the JVM's) against ``server``: row -> its JSON
    result, with ``cpu_s``, the server's CPU seconds between the row's start and end marks, and
    ``client_busy``, the JVM's CPU seconds over the same span per second of it: near 1.0 the load's
    one core is saturated and the row measures the client as much as the server."""
    out: dict[str, dict] = {}
    lines: list[str] = []
    at: dict[str, tuple[float, float, float]] = {}
    spans: dict[str, tuple[float, float]] = {}
    # stderr to a file (a pipe nobody reads while the rows run could fill and stall the JVM)
    with (
        tempfile.TemporaryFile("w+") as err,
        subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, stderr=err, text=True) as jvm,
    ):
        assert jvm.stdout is not None
        watchdog = threading.Timer(budget, jvm.kill)  # a JVM that hangs ends the round, not the run
        watchdog.start()
        for line in jvm.stdout:
            lines.append(line)
            if not line.startswith("{"):
                continue
            result = json.loads(line)
            row = result["row"]
            if result.get("mark") == "start":
                at[row] = (time.monotonic(), cpu_seconds(server.process.pid), cpu_seconds(jvm.pid))
                continue
            if result.get("mark") == "end":
                t0, server0, client0 = at[row]
                span = time.monotonic() - t0
                busy = (cpu_seconds(jvm.pid) - client0) / span
                spans[row] = (cpu_seconds(server.process.pid) - server0, busy)
                continue
            result["cpu_s"], result["client_busy"] = spans.get(row, (float("nan"), float("nan")))
            if result.get("msgs"):
                result["cpu_us_per_msg"] = result["cpu_s"] / result["msgs"] * 1e6
            if result.get("msgs_per_s") and result["client_busy"] > 0:
                # the rate at which this client's own work would fill its one core
                result["client_ceiling"] = result["msgs_per_s"] / result["client_busy"]
            out[row] = result
            print(f"  {server.name} {json.dumps(result)}", file=sys.stderr)
        try:
            jvm.wait(60)
        except subprocess.TimeoutExpired:
            jvm.kill()
            jvm.wait()
        watchdog.cancel()
        err.seek(0)
        errors = err.read()
    if set(out) != set(rows):
        raise RuntimeError(f"{server.name}: the load printed {sorted(out)} (exit {jvm.returncode}):\n"
                           f"{''.join(lines)[-2000:]}\n{errors[-3000:]}")  # fmt: skip
    return out


def _java(rmq: Path, classes: Path, main: str) -> str:
    """The shell line that execs one load JVM of ``main`` on the load core."""
    return (
        f". '{rmq}/bin/_env.sh'; exec taskset -c {vs_java.LOAD_CORE} "
        "$JAVA -Xms256m -Xmx512m -XX:+UseSerialGC "
        f'$RMQ_JDK_OPTS $RMQ_CLIENT_OPTS -cp "$RMQ_CP:{classes}" {main}'
    )


def run_consume(
    rmq: Path, classes: Path, server: vs_java.Server, args: argparse.Namespace
) -> dict[str, dict]:
    """One JVM of ``BrokerPathConsume`` on core 0 against ``server``: row -> its JSON result."""
    rows = [r for r in args.rows if r in CONSUME_ROWS]
    script = _java(rmq, classes, f"BrokerPathConsume {namesrv_of(server)} {TOPIC} {args.messages} "
                                 f"{args.seconds} {args.warmup} {' '.join(rows)}")  # fmt: skip
    # storing the messages first and a whole row's consumption are not bounded by --seconds
    return run_jvm(script, server, rows, budget=args.warmup + len(rows) * (args.seconds + 300) + 300)


def run_load(rmq: Path, classes: Path, server: vs_java.Server, args: argparse.Namespace) -> dict[str, dict]:
    """The rows against ``server``: the send rows in one JVM of ``BrokerPathLoad`` on core 0, then
    the consume rows in one of ``BrokerPathConsume``; row -> its JSON result."""
    out = {}
    if any(r not in CONSUME_ROWS for r in args.rows):
        out.update(run_send(rmq, classes, server, args))
    if any(r in CONSUME_ROWS for r in args.rows):
        out.update(run_consume(rmq, classes, server, args))
    return out


def run_send(rmq: Path, classes: Path, server: vs_java.Server, args: argparse.Namespace) -> dict[str, dict]:
    """One JVM of ``BrokerPathLoad`` on core 0 against ``server``: row -> its JSON result."""
    rows = [r for r in args.rows if r not in CONSUME_ROWS]
    script = _java(rmq, classes, f"BrokerPathLoad {namesrv_of(server)} {TOPIC} {args.seconds} {args.warmup} "
                                 f"{' '.join(rows)}")  # fmt: skip
    return run_jvm(script, server, rows, budget=args.warmup + len(rows) * (args.seconds + 1) + 120)


def _ratios(ours: list[dict], other: list[dict], row: str, key: str, larger: bool) -> str:
    """Per round, ours against the other (``other / ours`` for a latency, so larger is better)."""
    per = []
    for a, b in zip(ours, other, strict=True):
        x, y = a[row][key], b[row][key]
        per.append(float("nan") if x <= 0 or y <= 0 else (x / y if larger else y / x))
    return alternating.ratio_cell(per)


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.broker_path_vs_java", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--base", type=Path, help="a built checkout to compare against (A)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated, of " + ", ".join(ROWS))
    parser.add_argument(
        "--messages", type=int, default=200_000, help="the push, orderly and lite rows' messages"
    )
    parser.add_argument("--port", type=int, default=20700)
    parser.add_argument(
        "--short", action="store_true", help="--rounds 1 --seconds 3 --warmup 3 --messages 20000"
    )
    args = parser.parse_args()
    if args.short:
        args.rounds, args.seconds, args.warmup, args.messages = 1, 3.0, 3.0, 20_000
    args.rows = [r for r in args.rows.split(",") if r]
    if any(r not in ROWS for r in args.rows):
        parser.error(f"--rows: each of {', '.join(ROWS)}")
    if shutil.which("javac") is None or not RMQ_BIN.is_dir():
        parser.error(f"needs a JDK (javac) and {RMQ_BIN}")
    names = ["java", "B"] if args.base is None else ["java", "A", "B"]
    with tempfile.TemporaryDirectory(prefix="broker-path-") as tmp:
        rmq, classes = prepare_java(Path(tmp), SOURCE, CONSUME_SOURCE)

        def start(name: str, work: Path, port: int) -> vs_java.Server:
            if name == "java":
                return start_java(rmq, work, port)
            checkout = REPO if name == "B" else args.base
            (work / "store").mkdir()
            server = alternating.start_writable(
                checkout, work / "store", port, work / "serve.log", *QUIET_PORTS
            )
            server.name = name
            return server

        runs = alternating.alternate(
            names, args.rounds, args.port, start, lambda s: run_load(rmq, classes, s, args), "broker-path-"
        )
    print(f"load average {os.getloadavg()}; cpu {alternating.cpu_model()}; {args.rounds} rounds of "
          f"{args.seconds} s a row")  # fmt: skip
    ours = [n for n in names if n != "java"]
    head = "| row | " + " | ".join(names) + " | " + " | ".join(f"{n} / java" for n in ours)
    head += " | B / A |" if "A" in names else " |"
    print(head)
    print("|---|" + "---:|" * (len(names) + len(ours) + ("A" in names)))
    for row, key, label, larger in CELLS:
        if row not in args.rows:
            continue
        cells = []
        for n in names:
            values = [r[row][key] for r in runs[n]]
            errors = sum(r[row]["errors"] for r in runs[n])
            cells.append(f"{statistics.median(values):,.2f}" + (f" ({errors} errors)" if errors else ""))

        if larger is None:
            cells += ["-"] * (len(ours) + ("A" in names))
        else:
            cells += [_ratios(runs[n], runs["java"], row, key, larger) for n in ours]
            if "A" in names:
                cells.append(_ratios(runs["B"], runs["A"], row, key, larger))
        print(f"| {label} | " + " | ".join(cells) + " |")
    ceilings = []
    ceiling_rows = {row for row, key, _, _ in CELLS if key == "client_ceiling"}  # not e2e's fixed rate
    for row in args.rows:
        if row in ceiling_rows and all("client_ceiling" in r[row] for r in runs["B"]):
            most = statistics.median(r[row]["client_ceiling"] for r in runs["B"])
            java = statistics.median(r[row]["msgs_per_s"] for r in runs["java"])
            ceilings.append(f"{row} {most / java:.2f}x")
    if ceilings:
        print(
            "the most B / java could be with this one-core client (B's client ceiling / java's rate): "
            + ", ".join(ceilings)
        )
    print("(ratios: larger is better for ours; latency and CPU ratios are java / ours; the client's core")
    print(" busy is the load JVM's CPU seconds per second of the timed part, on its one core: near 1.0 the")
    print(" row's rate is bounded by the client, whatever the server)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
