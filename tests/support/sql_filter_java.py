"""``tests/server/java/SqlFilter.java`` compiled and run: the official 4.9.7 push consumer by SQL92.

Shared by ``tests/server/test_java_sql_filter.py`` (against ``serve --writable``) and the recorder of
the real broker's answers (``tests/server/golden/record_sql_filter.py``), so both run the same
program with the same expressions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.support.paths import REPO_ROOT, ROCKETMQ_HOME

RMQ_BIN = ROCKETMQ_HOME
SOURCE = REPO_ROOT / "tests" / "server" / "java" / "SqlFilter.java"
#: Seconds the program waits at most for deliveries; the JVM gets ``JAVA_TIMEOUT`` in all.
WAIT_SECONDS = 20
JAVA_TIMEOUT = 60

#: ``bin/_env.sh``'s JDK 17 options the 4.9.7 client needs.
JDK_OPTS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "-Dfile.encoding=UTF-8",
]

#: expression -> the bodies it must receive, worked out by hand from the program's messages (m0..m9:
#: a=i, b=x when i % 3 == 0 else y, TagA for even i, TagB for odd; m-none: TagA, no property).
EXPECTED = {
    "a > 5 AND b = 'x'": ["m6", "m9"],
    "TAGS = 'TagB' AND NOT (a BETWEEN 3 AND 7)": ["m1", "m9"],
    "a IS NULL OR b IN ('x')": ["m-none", "m0", "m3", "m6", "m9"],
}
#: An expression that does not compile: the consumer's start fails.
BAD = "a >"


def compile_program(root: Path) -> str:
    """The program compiled under ``root`` against a copy of the 4.9.7 jars; its class path."""
    shutil.copytree(RMQ_BIN / "lib", root / "lib")
    classes = root / "classes"
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", str(root / "lib" / "*"), str(SOURCE)],
        check=True,
        timeout=120,
    )
    return f"{root / 'lib' / '*'}:{classes}"


def java_command(class_path: str, namesrv: str, logs: Path, *expressions: str) -> list[str]:
    """Send the messages to ``SqlJavaTopic``, then one push consumer per expression."""
    return [
        "java",
        *JDK_OPTS,
        f"-Drocketmq.client.logRoot={logs}",
        f"-Drmq.logdir={logs}",
        "-cp",
        class_path,
        "SqlFilter",
        namesrv,
        "SqlJavaTopic",
        "true",
        str(WAIT_SECONDS),
        *expressions,
    ]


def results(output: bytes) -> list[dict]:
    """The program's observations: per expression, the bodies received or the start failure."""
    text = output.decode(errors="replace")
    lines = [line for line in text.splitlines() if line.startswith("{")]
    if not lines:
        raise AssertionError("SqlFilter printed no result:\n" + text[-2000:])
    return json.loads(lines[-1])["results"]
