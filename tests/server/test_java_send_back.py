"""Retry, dead letters and delay levels with the official Java 4.9.7 client against ``serve --writable``.

``tests/support/java/RetryDlq.java`` runs a push consumer (``setMaxReconsumeTimes(1)``) that answers
RECONSUME_LATER: the message must come back once through ``%RETRY%group`` with reconsumeTimes=1,
then land in ``%DLQ%group`` (read back with a pull consumer), its key, unique key and body intact.
Meanwhile a message sent with delay level 2 must reach a second push consumer after about 5 s
(issue 19, row 6). The store's ``broker.conf`` makes the retry levels 1 s (``messageDelayLevel``,
as a test author would set it on a real broker) and keeps level 2 at 5 s, so the test takes ~10 s.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import HAVE_ROCKETMQ, REPO_ROOT, ROCKETMQ_HOME, ROCKETMQ_SKIP_REASON
from tests.support.serve_process import kill_if_running, start_writable

RMQ_BIN = ROCKETMQ_HOME
SOURCE = REPO_ROOT / "tests" / "support" / "java" / "RetryDlq.java"
#: Level 2 stays the broker's 5 s; every other level is 1 s.
DELAY_LEVELS = "1s 5s " + " ".join(["1s"] * 16)
#: Seconds the Java program may run (its own waits are bounded at ~35 s).
JAVA_TIMEOUT = 40

pytestmark = pytest.mark.skipif(
    shutil.which("javac") is None or not HAVE_ROCKETMQ, reason=ROCKETMQ_SKIP_REASON
)


@pytest.fixture(scope="session")
def retry_program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The 4.9.7 prebuilt copied (its scripts write beside themselves) and RetryDlq compiled."""
    root = tmp_path_factory.mktemp("java-send-back")
    rmq = root / "rmq"
    shutil.copytree(RMQ_BIN, rmq)
    classes = root / "classes"
    classes.mkdir()
    subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", f"{rmq}/lib/*", str(SOURCE)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return rmq, classes


def _java_command(rmq: Path, classes: Path, *args: str) -> list[str]:
    """``java $RMQ_JDK_OPTS $RMQ_CLIENT_OPTS -cp ... RetryDlq ARGS`` as ``bin/_env.sh`` sets them."""
    env = subprocess.run(
        ["bash", "-c", f'. "{rmq}/bin/_env.sh"; echo "$RMQ_JDK_OPTS $RMQ_CLIENT_OPTS"'],
        check=True,
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout.split()
    return ["java", *env, "-cp", f"{rmq}/lib/*:{classes}", "RetryDlq", *args]


async def test_reconsume_later_retries_once_then_dead_letters(
    retry_program: tuple[Path, Path], tmp_path: Path
) -> None:
    rmq, classes = retry_program
    store = tmp_path / "store"
    store.mkdir()
    (store / "broker.conf").write_text(f"messageDelayLevel={DELAY_LEVELS}\n")
    server, port = await start_writable(store, log=tmp_path / "serve.log")
    try:
        java = await asyncio.create_subprocess_exec(
            *_java_command(rmq, classes, f"127.0.0.1:{port}", "sb"),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "ROCKETMQ_HOME": str(rmq / "home")},
        )
        try:
            out, _ = await asyncio.wait_for(java.communicate(), JAVA_TIMEOUT)
        finally:
            await kill_if_running(java)
        lines = [line for line in out.decode().splitlines() if line.startswith("{")]
        assert lines, f"RetryDlq printed no result: {out.decode()[-2000:]}"
        result = json.loads(lines[-1])
    finally:
        if server.returncode is None:
            server.send_signal(signal.SIGTERM)
            await asyncio.wait_for(server.wait(), 20)
    # First delivery, then the retry (the client shows it under the topic it was sent to).
    assert result["reconsumeTimes"] == [0, 1], result
    assert result["topics"] == ["sb_retry", "sb_retry"], result
    # Past maxReconsumeTimes=1: the dead letter, counted once more, with what the producer sent.
    assert result["dlq"] == {
        "topic": "%DLQ%sb_cg",
        "reconsumeTimes": 2,
        "keys": "rk-sb",
        "uniqKey": result["retryMsgId"],
        "retryTopic": "sb_retry",
        "body": "fails",
    }, result
    # Delay level 2 (5 s) delivered and consumed by a push consumer.
    assert result["delayArrived"] is True, result
    assert 4_500 <= result["delayMs"] <= 9_000, result
    assert server.returncode == 0
