"""The issue 19 consumer scenarios on the official Java 4.9.7 client, compiled and run for a test.

``tests/support/java/Scenarios.java`` holds one subcommand per row of the issue's table; each run
prints one JSON line of observations. ``JavaKit`` copies the real 4.9.7 (``RMQ_ROCKETMQ_HOME``) to a
temporary folder (its scripts write beside themselves and the shared folder is read-only), compiles
the program there once, and runs a scenario or the real ``mqadmin`` against a name-server address
with a timeout, killing the JVM (by its pid) when it overruns. Whether an observation is a pass is
``scenario_checks``'s to say, never the program's.

``WritableServer`` is ``rmq-query serve --writable`` as a plain child process (the scenarios run in
threads, outside any event loop), so a test can stop it and start it again on the same store;
``RealBroker`` is the real 4.9.7 name server and broker, for the recording script.
"""

from __future__ import annotations

import json
import logging
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.mqadmin_env import KEEP_CHANNEL_ON_TIMEOUT
from tests.support.paths import HAVE_ROCKETMQ, REPO_ROOT, ROCKETMQ_HOME, ROCKETMQ_SKIP_REASON

JAVA_BIN = ROCKETMQ_HOME
SOURCE = REPO_ROOT / "tests" / "support" / "java" / "Scenarios.java"

#: Seconds a scenario's own waits may take (``scenario.waitMs``); the JVM gets more (start, shutdown).
WAIT_SECONDS = 40
#: Seconds a scenario's JVM may run in all before it is killed.
RUN_TIMEOUT = 110
#: Seconds a server gets to start or to stop.
PROCESS_TIMEOUT = 20
#: What mqadmin prints (its stack trace) when a request of its own got no answer within its timeout:
#: ``RemotingTimeoutException``, or ``RemotingSendRequestException: send request to <...> failed``:
#: mqadmin against a listener that accepts and never answers printed either, from one run to the
#: next (more often the second with ``JavaKit``'s JVM flags). The one failure a patient ``mqadmin``
#: reruns.
MQADMIN_TIMED_OUT = re.compile(
    r"org\.apache\.rocketmq\.remoting\.exception\.Remoting(?:Timeout|SendRequest)Exception[^\n]*"
)

log = logging.getLogger(__name__)


def java_available() -> str | None:
    """Why the scenarios cannot run here, or None when they can (a JDK and the prebuilt 4.9.7)."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        return "needs a JDK (javac) on PATH"
    if not HAVE_ROCKETMQ:
        return ROCKETMQ_SKIP_REASON
    return None


class ScenarioError(AssertionError):
    """A scenario JVM that printed no observation (crashed, or killed at its timeout)."""


class JavaKit:
    """A private copy of the 4.9.7 prebuilt with ``Scenarios`` compiled beside it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.rmq = root / "rmq"
        self.classes = root / "classes"
        shutil.copytree(JAVA_BIN, self.rmq)
        self.offsets = root / "local-offsets"
        self.offsets.mkdir()
        compiled = subprocess.run(
            ["javac", "-nowarn", "-encoding", "UTF-8", "-cp", f"{self.rmq}/lib/*", "-d", str(self.classes),
             str(SOURCE)],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        if compiled.returncode != 0:
            raise RuntimeError(f"javac failed:\n{compiled.stdout}{compiled.stderr}")

    def _java(self, main_and_args: list[str], extra_opts: str = "") -> list[str]:
        """``bash -c`` that sources ``_env.sh`` (the JDK 17 flags) and execs java, so the pid is the JVM's."""
        quoted = " ".join(_shell_quote(a) for a in main_and_args)
        script = (
            f". {_shell_quote(str(self.rmq / 'bin' / '_env.sh'))}; "
            "exec $JAVA -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "
            "$RMQ_JDK_OPTS $RMQ_CLIENT_OPTS "
            f'{extra_opts} -cp "$RMQ_CP:{self.classes}" {quoted}'
        )
        return ["bash", "-c", script]

    def run(self, namesrv: str, scenario: str, run_id: str, *args: str, timeout: float = RUN_TIMEOUT) -> dict:
        """Runs one scenario; returns its observations (the JSON line it printed)."""
        opts = (
            f"-Dscenario.waitMs={WAIT_SECONDS * 1000} "
            f"-Drocketmq.client.localOffsetStoreDir={self.offsets / run_id}"
        )
        out = _run(self._java(["Scenarios", namesrv, scenario, run_id, *args], opts), timeout)
        for line in reversed(out.stdout.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        raise ScenarioError(
            f"scenario {scenario} {run_id} printed no observation (exit {out.returncode}):\n"
            f"{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
        )

    def mqadmin(self, *args: str, timeout: float = 60, patient: bool = False) -> str:
        """The real ``mqadmin ARGS`` (``MQAdminStartup``); returns its standard output.

        ``patient``: for a loaded machine. mqadmin has no option nor JVM property for its request
        timeouts (``DefaultMQAdminExt``'s 5 s, the client's 3 s ``mqClientApiTimeout``), so a run that
        failed on exactly an unanswered request (``MQADMIN_TIMED_OUT``) is run once more, with a
        logged reason. Only for commands that may run twice (reads, and ``updateTopic``, which creates
        or updates to the same config)."""
        main = ["org.apache.rocketmq.tools.command.MQAdminStartup", *args]
        # the flag: a background refresh that times out does not close the command's channel (h25)
        opts = "-Drmq.logdir=" + str(self.root / "mqadmin-logs") + " " + KEEP_CHANNEL_ON_TIMEOUT
        out = _run(self._java(main, opts), timeout)
        timed_out = MQADMIN_TIMED_OUT.search(out.stdout + out.stderr) if patient else None
        if timed_out is not None:
            log.warning("mqadmin %s hit its own timeout (%s); running it once more", args[0], timed_out[0])
            out = _run(self._java(main, opts), timeout)
        return out.stdout


def _shell_quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Runs ``cmd``; past ``timeout`` seconds the process (the JVM, exec'd) is killed by its pid."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        stderr += f"\n(killed after {timeout} s)"
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


class WritableServer:
    """``serve --writable --store STORE --port 0 [ARGS]`` as a child process, restartable on its store."""

    def __init__(self, store: Path, *args: str, log: Path | None = None) -> None:
        self.store = store
        self.args = args
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.grpc_port = 0

    @property
    def address(self) -> str:
        """The name-server address clients use: the server answers name-server requests itself."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> WritableServer:
        with open(self.log if self.log is not None else os.devnull, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(self.store),
                 "--port", "0", *self.args],
                cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=err,
            )  # fmt: skip
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], PROCESS_TIMEOUT)
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line.startswith("NAMESRV_ADDR=127.0.0.1:"):
            self.kill()
            raise RuntimeError(f"serve --writable {' '.join(self.args)} did not start: {line!r}")
        self.port = int(line.strip().rsplit(":", 1)[1])
        ready, _, _ = select.select([self.proc.stdout], [], [], PROCESS_TIMEOUT)
        line = self.proc.stdout.readline().decode() if ready else ""
        # with --port 0 the gRPC port is a free one too, announced on the next line
        self.grpc_port = int(line.strip().rsplit(":", 1)[1]) if line.startswith("GRPC_ENDPOINTS=") else 0
        return self

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit status (killed, and -9, when it does not stop in time)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(PROCESS_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def free_port_triple() -> int:
    """A loopback port P with P-2 and P+1 free too (the broker binds its VIP channel and HA port)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        try:
            for p in (port - 2, port, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise OSError("no free port triple")


class RealBroker:
    """The real 4.9.7 name server and broker from ``kit``'s copy, on a fresh store under ``root``.

    ``broker_conf`` lines go to ``root/broker.conf`` (``start-broker.sh`` reads it). Both JVMs are
    stopped by their pids with SIGTERM (the broker then closes its store cleanly)."""

    def __init__(self, kit: JavaKit, root: Path, broker_conf: str = "") -> None:
        self.kit, self.root = kit, root
        root.mkdir(parents=True, exist_ok=True)
        (root / "broker.conf").write_text(broker_conf)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.namesrv_port = free_port_triple()
        self.broker_port = free_port_triple()

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def start(self) -> RealBroker:
        bin_dir = self.kit.rmq / "bin"
        env = dict(os.environ, RMQ_NAMESRV_DIR=str(self.root / "namesrv"))
        ns_log, br_log = self.root / "namesrv.out", self.root / "broker.out"
        with open(ns_log, "wb") as out:
            self.procs.append(
                subprocess.Popen([str(bin_dir / "start-namesrv.sh"), str(self.namesrv_port)], stdout=out,
                                 stderr=subprocess.STDOUT, env=env)
            )  # fmt: skip
        _wait_for(ns_log, "The Name Server boot success")
        with open(br_log, "wb") as out:
            self.procs.append(
                subprocess.Popen([str(bin_dir / "start-broker.sh"), str(self.root / "store"),
                                  str(self.broker_port), self.namesrv], stdout=out, stderr=subprocess.STDOUT)
            )  # fmt: skip
        _wait_for(br_log, "boot success")
        return self

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _wait_for(log: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{text!r} not in {log} after {timeout} s:\n{log.read_text(errors='replace')[-3000:]}")


#: The rows of issue 19's table, in its order: row name -> the ``Scenarios`` subcommand it runs.
ROWS = {
    "push": "push",
    "committed": "committed",
    "retry": "retry",
    "dlq": "dlq",
    "orderly": "orderly",
    "delay": "delay",
    "transaction": "transaction",
    "sendkinds": "sendkinds",
    "tags": "tags",
    "broadcast": "broadcast",
    "litepull": "litepull",
    "trace": "trace",
    "admin": "committed",
}


def normalized(value: object, run_id: str) -> object:
    """``value`` with the run id in each string replaced by ``{id}``, to compare runs with the golden file."""
    if isinstance(value, str):
        return value.replace(run_id, "{id}")
    if isinstance(value, list):
        return [normalized(v, run_id) for v in value]
    if isinstance(value, dict):
        return {normalized(k, run_id): normalized(v, run_id) for k, v in value.items()}
    return value


def trace_rows(mqadmin_output: str) -> list[list[str]]:
    """``[type, group]`` of each row ``mqadmin queryMsgTraceById`` printed (``Pub``, ``Sub``, ...)."""
    rows = []
    for line in mqadmin_output.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not parts[0].startswith("#") and parts[0] in ("Pub", "Sub", "EndTransaction"):
            rows.append(parts[:2])
    return sorted(rows)


def consumer_progress(mqadmin_output: str, topic: str) -> dict:
    """What ``mqadmin consumerProgress -g GROUP`` printed for ``topic`` and the group's retry topic."""
    queues, broker_sum, consumer_sum, retry_rows, diff_total = 0, 0, 0, 0, None
    for line in mqadmin_output.splitlines():
        parts = line.split()
        if parts[:1] == [topic] and len(parts) >= 5:
            queues += 1
            broker_sum += int(parts[3])
            consumer_sum += int(parts[4])
        elif parts and parts[0].startswith("%RETRY%"):
            retry_rows += 1
        elif line.startswith("Diff Total:"):
            diff_total = int(line.split(":")[1])
    return {
        "queues": queues,
        "brokerOffsetSum": broker_sum,
        "consumerOffsetSum": consumer_sum,
        "retryRows": retry_rows,
        "diffTotal": diff_total,
    }


def route_queues(mqadmin_output: str) -> list[dict[str, int]]:
    """The queue data of ``mqadmin topicRoute`` (fastjson's output, not strict JSON: read by field)."""
    found = []
    for block in re.findall(r"\{[^{}]*\"readQueueNums\"[^{}]*\}", mqadmin_output):
        values = {k: re.search(rf'"{k}":(\d+)', block) for k in ("readQueueNums", "writeQueueNums", "perm")}
        found.append({k: int(m.group(1)) if m else -1 for k, m in values.items()})
    return found


def run_row(kit: JavaKit, namesrv: str, broker: str, row: str, run_id: str) -> dict:
    """Runs one row of the table; returns its observations, run id normalized away.

    ``trace`` adds the rows the real ``mqadmin queryMsgTraceById`` prints; ``admin`` consumes with a
    group and shuts it down, then adds ``mqadmin consumerProgress`` for the group and ``updateTopic
    -r 8 -w 8`` (on ``broker``) followed by ``topicRoute``."""
    args = ("first",) if row == "admin" else ()
    obs = kit.run(namesrv, ROWS[row], run_id, *args)
    if row == "trace" and obs.get("msgId"):
        obs["mqadminTraceRows"] = trace_rows(
            kit.mqadmin("queryMsgTraceById", "-n", namesrv, "-i", obs["msgId"], patient=True)
        )
        del obs["msgId"]
    if row == "admin":
        if "group" not in obs:  # the scenario failed before naming its group: say how, not KeyError
            raise ScenarioError(f"the admin row observed no group: {obs.get('error', obs)}")
        progress = kit.mqadmin("consumerProgress", "-n", namesrv, "-g", obs["group"], patient=True)
        obs["consumerProgress"] = consumer_progress(progress, obs["topic"])
        topic = f"JS_admin8_{run_id}"
        update = kit.mqadmin(
            "updateTopic", "-n", namesrv, "-b", broker, "-t", topic, "-r", "8", "-w", "8", patient=True
        )
        obs["updateTopicSuccess"] = f"create topic to {broker} success." in update
        obs["topicRoute"] = route_queues(kit.mqadmin("topicRoute", "-n", namesrv, "-t", topic, patient=True))
    return normalized(obs, run_id)  # type: ignore[return-value]
