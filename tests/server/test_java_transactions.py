"""The official Java 4.9.7 ``TransactionMQProducer`` against ``serve --writable`` (issue #19's
"transactions: commit, rollback, UNKNOW then check-back commit" row).

``java/TxScenario.java`` is compiled once per session against a copy of the shared 4.9.7 jars; the
server runs as a child with a 500 ms check interval and a 1 s transaction timeout, so the UNKNOW one
is checked back within about 2 s. A push consumer started after the sends must receive exactly the
committed two, once each; the producer must have answered at least one check-back (the UNKNOW
message's). Bounded: the program waits at most 20 s, the process gets 45 s, the server is stopped by
its pid.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import HAVE_ROCKETMQ, ROCKETMQ_HOME, ROCKETMQ_SKIP_REASON
from tests.support.serve_process import kill_if_running, start_writable

RMQ_BIN = ROCKETMQ_HOME
JAVA_TIMEOUT = 45

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("javac") is None or not HAVE_ROCKETMQ,
    reason=ROCKETMQ_SKIP_REASON,
)

#: ``bin/_env.sh``'s JDK 17 options the 4.9.7 client needs.
JDK_OPTS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "-Dfile.encoding=UTF-8",
]


@pytest.fixture(scope="session")
def tx_program(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The compiled scenario and its class path (the jars copied out of the shared folder)."""
    root = tmp_path_factory.mktemp("java-tx")
    shutil.copytree(RMQ_BIN / "lib", root / "lib")
    classes = root / "classes"
    source = Path(__file__).parent / "java" / "TxScenario.java"
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", str(root / "lib" / "*"), str(source)],
        check=True,
        timeout=120,
    )
    return f"{root / 'lib' / '*'}:{classes}"


async def test_commit_rollback_and_check_back_commit(tx_program: str, tmp_path: Path) -> None:
    class_path = tx_program
    server, port = await start_writable(
        tmp_path / "store",
        log=tmp_path / "serve.log",
        args=("--transaction-check-interval-ms", "500", "--transaction-timeout-ms", "1000"),
    )
    logs = tmp_path / "client-logs"
    try:
        proc = await asyncio.create_subprocess_exec(
            "java",
            *JDK_OPTS,
            f"-Drocketmq.client.logRoot={logs}",
            f"-Drmq.logdir={logs}",
            "-cp",
            class_path,
            "TxScenario",
            f"127.0.0.1:{port}",
            "TxJavaTopic",
            "20",
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), JAVA_TIMEOUT)
        finally:
            await kill_if_running(proc)
    finally:
        await kill_if_running(server)
    lines = [line for line in out.decode(errors="replace").splitlines() if line.startswith("{")]
    assert lines, out.decode(errors="replace")[-2000:]
    result = json.loads(lines[-1])
    assert result["sent"] == ["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"]
    assert result["got"] == ["tx-commit", "tx-unknown"]
    assert result["deliveries"] == 2
    assert result["checks"] >= 1
