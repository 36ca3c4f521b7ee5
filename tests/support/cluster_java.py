"""``tests/server/java/ClusterFailover.java`` compiled and driven line by line (see its comment).

Shared by the test against ``--brokers 2`` and, later, a recorder against the real name server and
two real brokers, so both run the same program.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
from pathlib import Path

from tests.support.paths import REPO_ROOT
from tests.support.sql_filter_java import JDK_OPTS, RMQ_BIN

SOURCE = REPO_ROOT / "tests" / "server" / "java" / "ClusterFailover.java"
#: Seconds any one answer of the program may take before the test fails.
LINE_TIMEOUT = 20


def compile_program(root: Path) -> str:
    """The program compiled under ``root`` against a copy of the 4.9.7 jars; its class path."""
    shutil.copytree(RMQ_BIN / "lib", root / "lib")
    classes = root / "classes"
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", str(root / "lib" / "*"), str(SOURCE)], check=True, timeout=120
    )
    return f"{root / 'lib' / '*'}:{classes}"


class FailoverProgram:
    """The running program: ``send`` a phase, ``finish``; ``close`` kills it if still running."""

    def __init__(self, class_path: str, namesrv: str, topic: str, logs: Path) -> None:
        self._start(
            [
                "java",
                *JDK_OPTS,
                f"-Drocketmq.client.logRoot={logs}",
                "-Drocketmq.client.rebalance.waitInterval=1000",
                "-cp",
                class_path,
                "ClusterFailover",
                namesrv,
                topic,
            ],
            subprocess.STDOUT,
        )

    def _start(self, argv: list[str], stderr: object) -> None:
        """Start ``argv`` (a program speaking ClusterFailover's lines) and wait for its READY;
        its stderr goes to ``stderr`` (a file, or ``subprocess.STDOUT``)."""
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,  # type: ignore[arg-type]
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.transcript: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        try:
            self._until(lambda line: line == "READY")
        except BaseException:
            # No caller holds the program yet to close it: a JVM whose main thread died at start
            # (the client's threads keep it alive) would outlive the test.
            self.close()
            raise

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _next(self, timeout: float = LINE_TIMEOUT) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                "ClusterFailover said nothing in time:\n" + "\n".join(self.transcript[-40:])
            ) from None
        if line is None:
            raise AssertionError("ClusterFailover exited:\n" + "\n".join(self.transcript[-40:]))
        self.transcript.append(line)
        return line

    def _until(self, done: object, timeout: float = LINE_TIMEOUT) -> list[str]:
        seen: list[str] = []
        while True:
            line = self._next(timeout)
            if done(line):  # type: ignore[operator]
                return seen
            seen.append(line)

    def _say(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def send(self, count: int, phase: str) -> list[dict]:
        """``count`` synchronous sends; one result per send (``broker``/``status`` or ``error``)."""
        self._say(f"send {count} {phase}")
        lines = self._until(lambda line: line == "DONE")
        return [json.loads(line) for line in lines if line.startswith("{")]

    def wait_received(self, phase: str, seconds: int) -> list[str]:
        """Wait for every message of ``phase`` sent OK to be received; those still missing."""
        self._say(f"await {phase} {seconds}")
        self._until(lambda line: line.startswith('{"awaited"'), seconds + LINE_TIMEOUT)
        return json.loads(self.transcript[-1])["missing"]

    def finish(self, seconds: int) -> dict:
        """Wait for every message sent OK to be received; ``missing`` and ``received``."""
        self._say(f"finish {seconds}")
        line = self._until(lambda line: line.startswith('{"missing"'), seconds + LINE_TIMEOUT)
        del line
        result = json.loads(self.transcript[-1])
        self.proc.wait(LINE_TIMEOUT)
        return result

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _masked(value: object, names: dict[str, str]) -> object:
    """``value`` with each broker address replaced by ``<brokerName>`` and map keys as strings."""
    if isinstance(value, str):
        return f"<{names[value]}>" if value in names else value
    if isinstance(value, list):
        return [_masked(v, names) for v in value]
    if isinstance(value, dict):
        return {str(k): _masked(v, names) for k, v in value.items()}
    return value


async def cluster_snapshot(namesrv: str, topic: str) -> dict[str, object]:
    """The name server's answers about ``topic`` and the cluster, addresses masked so that two
    clusters on other ports compare: the route, the cluster table, the topic list (sorted)."""
    from clients.topic_admin import TopicAdmin, decode_fastjson

    async with TopicAdmin(namesrv) as admin:
        raw_route = await admin.route_body(topic)
        route = None if raw_route is None else decode_fastjson(raw_route)
        from protocol.codes import RequestCode

        response = await admin.client.invoke(namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
        info = decode_fastjson(response.body)
        topics = sorted(await admin.topic_list())
    names = {
        str(address): str(name)
        for name, broker in (info.get("brokerAddrTable") or {}).items()
        for address in (broker.get("brokerAddrs") or {}).values()
    }
    if route is not None:
        for broker in route.get("brokerDatas") or []:
            for address in (broker.get("brokerAddrs") or {}).values():
                names.setdefault(str(address), str(broker.get("brokerName")))
    return {
        "route": _masked(route, names),
        "clusterInfo": _masked(info, names),
        "topics": topics,
    }


def phase_summary(results: list[dict]) -> dict[str, object]:
    """What a phase of sends showed: the brokers that took them, how many failed."""
    return {
        "brokers": sorted({r["broker"] for r in results if "broker" in r}),
        "errors": sum(1 for r in results if "error" in r),
        "sent": len(results),
    }
