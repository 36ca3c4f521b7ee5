"""``rmq-query ... | head``: a reader that goes away ends the command quietly, exit 141, no traceback.

Each command runs as a process (the way a shell runs it) against the real server over the Java
store, with its standard output a pipe whose read end is already closed, so its first write fails
with EPIPE whatever the timing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT


def _run_into_closed_pipe(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "clients.cli", *argv],
            cwd=REPO_ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "argv",
    [
        ["query-key", "-t", "TopicB", "-k", "common", "--json", "--body"],  # 64 messages found
        ["query-key", "-t", "TopicA", "-k", "no-such-key", "--json"],  # the JSON error line
        ["bench", "--store", "STORE", "--requests", "20"],  # the report
    ],
)
def test_a_closed_standard_output_is_exit_141_without_a_traceback(
    served_java_store: str, java_store_copy: Path, argv: list[str]
) -> None:
    argv = [
        argv[0],
        "-n",
        served_java_store,
        *(str(java_store_copy) if a == "STORE" else a for a in argv[1:]),
    ]
    result = _run_into_closed_pipe(argv)
    stderr = result.stderr.decode()
    assert result.returncode == 141, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
