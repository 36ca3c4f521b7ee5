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
        self.proc = subprocess.Popen(
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
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.transcript: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self._until(lambda line: line == "READY")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _next(self) -> str:
        try:
            line = self._lines.get(timeout=LINE_TIMEOUT)
        except queue.Empty:
            raise AssertionError(
                "ClusterFailover said nothing in time:\n" + "\n".join(self.transcript[-40:])
            ) from None
        if line is None:
            raise AssertionError("ClusterFailover exited:\n" + "\n".join(self.transcript[-40:]))
        self.transcript.append(line)
        return line

    def _until(self, done: object) -> list[str]:
        seen: list[str] = []
        while True:
            line = self._next()
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
        self._until(lambda line: line.startswith('{"awaited"'))
        return json.loads(self.transcript[-1])["missing"]

    def finish(self, seconds: int) -> dict:
        """Wait for every message sent OK to be received; ``missing`` and ``received``."""
        self._say(f"finish {seconds}")
        line = self._until(lambda line: line.startswith('{"missing"'))
        del line
        result = json.loads(self.transcript[-1])
        self.proc.wait(LINE_TIMEOUT)
        return result

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
