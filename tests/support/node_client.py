"""The official RocketMQ 5 Node.js client (``rocketmq-client-nodejs``, npm) as a child process.

``tests/server/interop5/`` holds the driver (``client.js``: a JSON job on stdin, a JSON report on
stdout) and its own ``package.json`` with the committed lockfile pinning the client and every
dependency; the packages are installed on first use with ``npm ci --prefix`` (the README's test
command then works on a fresh machine). Without node or npm, or when the install fails, the test
fails rather than skips: the 5.x Node client is part of what the suite checks.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from typing import Any

import pytest

from tests.support.paths import REPO_ROOT

INTEROP5_DIR = REPO_ROOT / "tests" / "server" / "interop5"
#: Seconds the one-off ``npm ci`` may take.
INSTALL_TIMEOUT = 600


def ensure_installed() -> None:
    """Install the pinned npm packages once, from the lockfile, when they are not there yet."""
    if (INTEROP5_DIR / "node_modules" / "rocketmq-client-nodejs").is_dir():
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not installed (the 5.x Node.js interop test installs its client with it)")
    result = subprocess.run(
        [npm, "ci", "--prefix", str(INTEROP5_DIR), "--no-audit", "--no-fund"],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"`npm ci --prefix {INTEROP5_DIR}` failed:\n{result.stdout}\n{result.stderr}")


async def run_node_client(
    job: dict[str, Any], timeout: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run ``client.js`` on ``job`` (``env``: more environment variables); its report. Fails the
    test on a non-zero exit or a timeout (the process is killed first)."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (the 5.x Node.js interop test needs Node.js >= 18)")
    ensure_installed()
    proc = await asyncio.create_subprocess_exec(
        node,
        str(INTEROP5_DIR / "client.js"),
        cwd=INTEROP5_DIR,
        env={**os.environ, **env} if env else None,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(json.dumps(job).encode()), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    return json.loads(out)
