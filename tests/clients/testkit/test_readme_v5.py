"""The RocketMQ 5 guide's (docs/clients-5x.md) examples, run as written against ``serve --writable``.

The ``python`` block of the "RocketMQ 5 clients (gRPC)" section runs with the official Python client
(``rocketmq-python-client``, from the test extras), the ``javascript`` block with the official
Node.js client pinned in ``tests/server/interop5/`` (``NODE_PATH`` points at its packages), each as a
separate process with ``GRPC_ENDPOINTS`` set from the server's start-up line, on a store whose
``config/topics.json`` has the topic (5.x clients do not create topics). Each must print its success
line and exit 0; the groups' offsets committed by their acks must then cover the three messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from store.config.consumer_offsets import ConsumerOffsetTable
from tests.support.node_client import INTEROP5_DIR, ensure_installed
from tests.support.paths import REPO_ROOT
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_writable_grpc

#: Seconds an example may take: its own receives are bounded by 6 x 5 s.
RUN_TIMEOUT = 45


def readme_block(language: str) -> str:
    guide = (REPO_ROOT / "docs" / "clients-5x.md").read_text(encoding="utf-8")
    section = guide.split("# RocketMQ 5 clients (gRPC)", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)
    return block


def write_topic(root: Path) -> None:
    entry = {
        "order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG", "topicName": "Orders",
        "topicSysFlag": 0, "writeQueueNums": 4,
    }  # fmt: skip
    (root / "config").mkdir(parents=True)
    body = {"dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": {"Orders": entry}}
    (root / "config" / "topics.json").write_text(json.dumps(body))


async def run_example(store: Path, program: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Serve ``store``, run ``program`` with ``GRPC_ENDPOINTS`` set; (exit status, stdout, stderr)."""
    proc, _, grpc_port = await start_writable_grpc(store)
    try:
        example = await asyncio.create_subprocess_exec(
            *program,
            env={**os.environ, **env, "GRPC_ENDPOINTS": f"127.0.0.1:{grpc_port}"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(example.communicate(), RUN_TIMEOUT)
        finally:
            await kill_if_running(example)
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(proc)
    assert proc.returncode == 0
    assert example.returncode is not None
    return example.returncode, out.decode(), err.decode()


def acked(store: Path, group: str) -> int:
    offsets = ConsumerOffsetTable.load(store / "config" / "consumerOffset.json")
    return sum(offsets.queues(group, "Orders").values())


async def test_the_readme_python_v5_example_passes(tmp_path: Path) -> None:
    pytest.importorskip("rocketmq")
    store = tmp_path / "store"
    write_topic(store)
    script = tmp_path / "example.py"
    script.write_text(readme_block("python"), encoding="utf-8")
    code, out, err = await run_example(store, [sys.executable, str(script)], {})
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "received all 3"
    assert acked(store, "billing") == 3


async def test_the_readme_node_v5_example_passes(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (the 5.x guide's Node.js example needs Node.js >= 18)")
    ensure_installed()
    store = tmp_path / "store"
    write_topic(store)
    script = tmp_path / "example.js"
    script.write_text(readme_block("javascript"), encoding="utf-8")
    code, out, err = await run_example(
        store, [node, str(script)], {"NODE_PATH": str(INTEROP5_DIR / "node_modules")}
    )
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "received all 3"
    assert acked(store, "billing-node") == 3
