"""The official Java 4.9.7 REQUEST-REPLY against ``serve --writable`` (issue 32).

``java/RequestReply.java`` is compiled once per session against a copy of the shared 4.9.7 jars. A
requester (``DefaultMQProducer.request``, its own client instance and connection) sends three
requests; a push consumer answers each with ``MessageUtil.createReplyMessage``, sent by another
producer as SEND_REPLY_MESSAGE_V2 to ``DefaultCluster_REPLY_TOPIC``; the server pushes each reply to
the requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT). Each request must get its own reply (body
and CORRELATION_ID), and a request nobody consumes must time out on the client (RequestTimeoutException,
10006) after its 1.5 s. Before the reply processor, the reply's SEND was refused "request type 325 not
supported" and every request timed out. Bounded: the process gets 60 s, the server is stopped by its
pid.
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
JAVA_TIMEOUT = 60
#: ``ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION``.
REQUEST_TIMEOUT_EXCEPTION = 10006

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
def request_reply_program(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The compiled program and its class path (the jars copied out of the shared folder)."""
    root = tmp_path_factory.mktemp("java-rr")
    shutil.copytree(RMQ_BIN / "lib", root / "lib")
    classes = root / "classes"
    source = Path(__file__).parent / "java" / "RequestReply.java"
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", str(root / "lib" / "*"), str(source)],
        check=True,
        timeout=120,
    )
    return f"{root / 'lib' / '*'}:{classes}"


async def test_request_gets_its_reply_and_an_unanswered_request_times_out(
    request_reply_program: str, tmp_path: Path
) -> None:
    server, port = await start_writable(tmp_path / "store", log=tmp_path / "serve.log")
    logs = tmp_path / "client-logs"
    try:
        proc = await asyncio.create_subprocess_exec(
            "java",
            *JDK_OPTS,
            f"-Drocketmq.client.logRoot={logs}",
            f"-Drmq.logdir={logs}",
            "-cp",
            request_reply_program,
            "RequestReply",
            f"127.0.0.1:{port}",
            "RrJavaTopic",
            "RrJavaNobody",
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
    assert lines, out.decode(errors="replace")[-3000:]
    result = json.loads(lines[-1])
    replies = result["replies"]
    assert [r.get("body") for r in replies] == [f"reply:request-{i}" for i in range(3)], replies
    assert all(r["correlationMatches"] for r in replies)
    assert {r["topic"] for r in replies} == {"DefaultCluster_REPLY_TOPIC"}
    no_reply = result["noReply"]
    assert no_reply.get("code") == REQUEST_TIMEOUT_EXCEPTION, no_reply
    assert 1500 <= no_reply["ms"] < 10_000
