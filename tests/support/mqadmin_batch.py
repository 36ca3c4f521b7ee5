"""The real 4.9.7 ``mqadmin`` run for several commands in one JVM (``java/MqadminBatch.java``).

Each mqadmin start is a JVM start (seconds on a shared machine); a test comparing our admin
commands with mqadmin's output runs them all in one: the official ``MQAdminStartup.main0`` per
command, its standard output captured. Commands that end in a usage error exit the JVM
(``ServerUtil.parseCmdLine``), so they do not belong in a batch.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.support.mqadmin_env import KEEP_CHANNEL_ON_TIMEOUT
from tests.support.paths import HAVE_ROCKETMQ, REPO_ROOT, ROCKETMQ_HOME

BIN = ROCKETMQ_HOME
SOURCE = REPO_ROOT / "tests" / "server" / "java" / "MqadminBatch.java"


def available() -> bool:
    return shutil.which("java") is not None and shutil.which("javac") is not None and HAVE_ROCKETMQ


def _java_flags(rmq: Path) -> list[str]:
    """The JVM flags ``bin/_env.sh`` gives the tools (``run_batch`` adds ``KEEP_CHANNEL_ON_TIMEOUT``:
    each command's client refreshes routes in the background, see ``tests/support/mqadmin_env.py``)."""
    out = subprocess.run(
        ["bash", "-c", f'. "{rmq}/bin/_env.sh"; echo "$RMQ_JDK_OPTS $RMQ_CLIENT_OPTS"'],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    return out.split()


def run_batch(work: Path, commands: Sequence[Sequence[str]], *, timeout: float = 120) -> list[str]:
    """What mqadmin prints on standard output for each command (in order), run in one JVM from a
    copy of the 4.9.7 distribution under ``work``."""
    rmq = work / "rmq"
    if not rmq.exists():
        shutil.copytree(BIN, rmq)
    classes = work / "classes"
    if not (classes / "MqadminBatch.class").exists():
        classes.mkdir(exist_ok=True)
        subprocess.run(
            ["javac", "-nowarn", "-cp", str(rmq / "lib" / "*"), "-d", str(classes), str(SOURCE)],
            check=True, timeout=120, capture_output=True,
        )  # fmt: skip
    batch = work / "commands.tsv"
    batch.write_text("".join("\t".join(cmd) + "\n" for cmd in commands), encoding="utf-8")
    done = subprocess.run(
        ["java", *_java_flags(rmq), KEEP_CHANNEL_ON_TIMEOUT, "-cp", f"{rmq / 'lib' / '*'}:{classes}",
         "MqadminBatch", str(batch)],
        capture_output=True, timeout=timeout, check=False,
        env={**os.environ, "ROCKETMQ_HOME": str(rmq / "home")},
    )  # fmt: skip
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    assert lines and lines[-1] == "DONE", done.stderr.decode("utf-8", "replace")[-3000:]
    return [base64.b64decode(line[4:]).decode("utf-8") for line in lines if line.startswith("OUT ")]
