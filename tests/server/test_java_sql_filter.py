"""The official Java 4.9.7 push consumer subscribing with ``MessageSelector.bySql`` against
``serve --writable`` (issue 32: SQL92 message filters).

``java/SqlFilter.java`` sends m0..m9 (user properties ``a=i``, ``b`` = ``x`` when i % 3 == 0 else
``y``; tag TagA for even i, TagB for odd) and ``m-none`` (TagA, no property), then starts one push
consumer per expression. The matching sets (``sql_filter_java.EXPECTED``) were worked out by hand
from that table and 4.9.7's rules (a missing property is unknown, so ``a > 5`` never matches
``m-none``; ``TAGS`` is one of the stored properties the broker evaluates over), and the real
broker's consumers, run with the same program (``golden/record_sql_filter.py``), received the same.
An expression that does not compile makes ``consumer.start()`` fail on CHECK_CLIENT_CONFIG with
SUBSCRIPTION_PARSE_FAILED (23); with ``--no-enable-property-filter`` (the real broker's default) it
fails as on such a broker, SYSTEM_ERROR "The broker does not support consumer to filter message by
SQL92". Bounded: the program waits at most 20 s, the JVM gets 60 s, the server is stopped by its pid.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import HAVE_ROCKETMQ, ROCKETMQ_SKIP_REASON
from tests.support.serve_process import kill_if_running, start_writable
from tests.support.sql_filter_java import (
    BAD,
    EXPECTED,
    JAVA_TIMEOUT,
    compile_program,
    java_command,
    results,
)

GOLDEN = Path(__file__).parent / "golden" / "sql_filter_java_4.9.7.json"

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("javac") is None or not HAVE_ROCKETMQ,
    reason=ROCKETMQ_SKIP_REASON,
)


@pytest.fixture(scope="session")
def sql_program(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The compiled program and its class path (the jars copied out of the shared folder)."""
    return compile_program(tmp_path_factory.mktemp("java-sql"))


async def _run(class_path: str, tmp_path: Path, serve_args: tuple[str, ...], *expressions: str) -> list[dict]:
    server, port = await start_writable(tmp_path / "store", log=tmp_path / "serve.log", args=serve_args)
    try:
        proc = await asyncio.create_subprocess_exec(
            *java_command(class_path, f"127.0.0.1:{port}", tmp_path / "client-logs", *expressions),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), JAVA_TIMEOUT)
        finally:
            await kill_if_running(proc)
    finally:
        await kill_if_running(server)
    return results(out)


def test_the_hand_worked_sets_are_what_the_real_broker_delivered() -> None:
    """The same program against the real 4.9.7 broker with enablePropertyFilter=true, recorded."""
    recorded = json.loads(GOLDEN.read_text())
    assert recorded["expressions"] == [*EXPECTED, BAD]
    assert {r["expression"]: r["got"] for r in recorded["results"] if r["startError"] is None} == EXPECTED
    (bad,) = [r for r in recorded["results"] if r["expression"] == BAD]
    assert bad["startError"]["code"] == 23


async def test_push_consumers_by_sql_receive_exactly_the_matching_messages(
    sql_program: str, tmp_path: Path
) -> None:
    got = await _run(sql_program, tmp_path, (), *EXPECTED, BAD)
    assert {r["expression"]: r["got"] for r in got if r["startError"] is None} == EXPECTED
    (bad,) = [r for r in got if r["expression"] == BAD]
    assert bad["startError"]["code"] == 23  # SUBSCRIPTION_PARSE_FAILED from CHECK_CLIENT_CONFIG
    assert bad["got"] == []
    # and exactly what the real broker's consumers got (the message of a bad start is our wording)
    recorded = json.loads(GOLDEN.read_text())["results"]
    assert [(r["expression"], r["got"]) for r in got] == [(r["expression"], r["got"]) for r in recorded]


async def test_property_filter_off_refuses_the_consumer_as_the_broker_does(
    sql_program: str, tmp_path: Path
) -> None:
    (result,) = await _run(sql_program, tmp_path, ("--no-enable-property-filter",), "a > 5")
    assert result["startError"] == {
        "code": 1,
        "message": "The broker does not support consumer to filter message by SQL92",
    }
