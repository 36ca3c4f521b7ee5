"""The official Java 4.9.7 push consumer subscribing with ``MessageSelector.bySql`` against
``serve --writable`` (issue 32: SQL92 message filters).

``java/SqlFilter.java`` sends m0..m9 (user properties ``a=i``, ``b`` = ``x`` when i % 3 == 0 else
``y``; tag TagA for even i, TagB for odd) and ``m-none`` (TagA, no property), then starts one push
consumer per expression. The matching sets below were worked out by hand from the table above and
4.9.7's rules (a missing property is unknown, so ``a > 5`` never matches ``m-none``; ``TAGS`` is one
of the stored properties the broker evaluates over). An expression that does not compile makes
``consumer.start()`` fail on CHECK_CLIENT_CONFIG with SUBSCRIPTION_PARSE_FAILED (23); with
``--no-enable-property-filter`` (the real broker's default) it fails as on such a broker, SYSTEM_ERROR
"The broker does not support consumer to filter message by SQL92". Bounded: the program waits at
most 20 s, the JVM gets 60 s, the server is stopped by its pid.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import SHARED_DIR
from tests.support.serve_process import kill_if_running, start_writable

RMQ_BIN = SHARED_DIR / "rocketmq-4.9.7-bin"
JAVA_TIMEOUT = 60

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("javac") is None or not RMQ_BIN.is_dir(),
    reason="needs a JDK and ../shared/rocketmq-4.9.7-bin",
)

#: ``bin/_env.sh``'s JDK 17 options the 4.9.7 client needs.
JDK_OPTS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "-Dfile.encoding=UTF-8",
]

#: expression -> the bodies it must receive (worked out by hand from the message table).
EXPECTED = {
    "a > 5 AND b = 'x'": ["m6", "m9"],
    "TAGS = 'TagB' AND NOT (a BETWEEN 3 AND 7)": ["m1", "m9"],
    "a IS NULL OR b IN ('x')": ["m-none", "m0", "m3", "m6", "m9"],
}


@pytest.fixture(scope="session")
def sql_program(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The compiled program and its class path (the jars copied out of the shared folder)."""
    root = tmp_path_factory.mktemp("java-sql")
    shutil.copytree(RMQ_BIN / "lib", root / "lib")
    classes = root / "classes"
    source = Path(__file__).parent / "java" / "SqlFilter.java"
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", str(root / "lib" / "*"), str(source)],
        check=True,
        timeout=120,
    )
    return f"{root / 'lib' / '*'}:{classes}"


async def _run(class_path: str, tmp_path: Path, serve_args: tuple[str, ...], *expressions: str) -> list[dict]:
    server, port = await start_writable(tmp_path / "store", log=tmp_path / "serve.log", args=serve_args)
    logs = tmp_path / "client-logs"
    try:
        proc = await asyncio.create_subprocess_exec(
            "java",
            *JDK_OPTS,
            f"-Drocketmq.client.logRoot={logs}",
            f"-Drmq.logdir={logs}",
            "-cp",
            class_path,
            "SqlFilter",
            f"127.0.0.1:{port}",
            "SqlJavaTopic",
            "true",
            "20",
            *expressions,
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
    return json.loads(lines[-1])["results"]


async def test_push_consumers_by_sql_receive_exactly_the_matching_messages(
    sql_program: str, tmp_path: Path
) -> None:
    results = await _run(sql_program, tmp_path, (), *EXPECTED, "a >")
    assert {r["expression"]: r["got"] for r in results if r["startError"] is None} == EXPECTED
    (bad,) = [r for r in results if r["expression"] == "a >"]
    assert bad["startError"]["code"] == 23  # SUBSCRIPTION_PARSE_FAILED from CHECK_CLIENT_CONFIG
    assert bad["got"] == []


async def test_property_filter_off_refuses_the_consumer_as_the_broker_does(
    sql_program: str, tmp_path: Path
) -> None:
    (result,) = await _run(sql_program, tmp_path, ("--no-enable-property-filter",), "a > 5")
    assert result["startError"] == {
        "code": 1,
        "message": "The broker does not support consumer to filter message by SQL92",
    }
