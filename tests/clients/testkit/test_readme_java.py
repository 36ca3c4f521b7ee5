"""The test kit guide's (docs/testkit.md) Java produce → consume test, compiled and run with the
official 4.9.7 client.

The ``java`` block of its "JVM and Go test suites" section is written to a file, compiled
with ``javac`` against a temporary copy of ``RMQ_ROCKETMQ_HOME`` (its scripts write logs
beside themselves) and run with that copy's JVM flags, ``NAMESRV_ADDR`` pointing at ``serve
--writable`` on an empty store started by the test, as a JVM suite would. It must print its success
line and exit 0; the consumer group's offsets the Java client committed at shutdown must then add up
to the ten messages, read back from the server with QUERY_CONSUMER_OFFSET.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from clients.client import RemotingClient
from protocol.codes import RequestCode, ResponseCode
from protocol.custom_headers import QueryConsumerOffsetRequestHeader, read_offset
from tests.support.paths import HAVE_ROCKETMQ, REPO_ROOT, ROCKETMQ_HOME, ROCKETMQ_SKIP_REASON
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable

RMQ_BIN = ROCKETMQ_HOME
#: The program's own wait is 30 s; the JVM, the client's start and its shutdown come on top.
RUN_TIMEOUT = 120


def readme_java_block() -> tuple[str, str]:
    """(class name, source) of the one ``java`` block of the JVM section."""
    guide = (REPO_ROOT / "docs" / "testkit.md").read_text(encoding="utf-8")
    section = guide.split("\n## JVM and Go test suites", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```java\n(.*?)```", section, flags=re.S)
    match = re.search(r"^public class (\w+)", block, flags=re.M)
    assert match, "the Java example must declare a public class"
    return match.group(1), block


async def committed(addr: str, group: str, topic: str, queue_id: int) -> int:
    async with RemotingClient() as client:
        response = await client.invoke(
            addr,
            RequestCode.QUERY_CONSUMER_OFFSET,
            QueryConsumerOffsetRequestHeader(group, topic, queue_id).to_ext_fields(),
        )
    assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
    return read_offset(response.ext_fields)


@pytest.mark.skipif(
    shutil.which("javac") is None or shutil.which("java") is None or not HAVE_ROCKETMQ,
    reason=ROCKETMQ_SKIP_REASON,
)
async def test_the_readme_java_example_passes_against_serve_writable(tmp_path: Path) -> None:
    rmq = tmp_path / "rmq"
    shutil.copytree(RMQ_BIN, rmq)
    name, source = readme_java_block()
    src, classes = tmp_path / "src", tmp_path / "classes"
    src.mkdir()
    (src / f"{name}.java").write_text(source, encoding="utf-8")
    compiled = await asyncio.to_thread(
        subprocess.run,
        ["javac", "-cp", f"{rmq}/lib/*", "-d", str(classes), str(src / f"{name}.java")],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert compiled.returncode == 0, compiled.stderr

    proc, port = await start_writable(tmp_path / "store", log=tmp_path / "serve.log")
    addr = f"127.0.0.1:{port}"
    try:
        script = (
            '. "$RMQ/bin/_env.sh"; exec java $RMQ_JDK_OPTS $RMQ_CLIENT_OPTS -cp "$RMQ/lib/*:$CLASSES" "$MAIN"'
        )
        env = {
            **os.environ,
            "NAMESRV_ADDR": addr,
            "RMQ": str(rmq),
            "CLASSES": str(classes),
            "MAIN": name,
            "RMQ_CLIENT_LOG_DIR": str(tmp_path / "client-logs"),
        }
        run = await asyncio.to_thread(
            subprocess.run,
            ["bash", "-c", script],
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout.strip().splitlines()[-1] == "received all 10", run.stdout
        # The Java consumer went through the server's consume side: its offsets are the server's.
        offsets = [await committed(addr, "orders-consumer", "Orders", q) for q in range(4)]
        assert sum(offsets) == 10, offsets
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0
    finally:
        await kill_if_running(proc)
