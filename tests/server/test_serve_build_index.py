"""``rmq-query serve --build-index`` as a process: it indexes a store whose index is gone, serves
the keys, and leaves IndexFiles byte-identical to the ones the Java broker wrote.

The in-process tests (test_live_store.py) follow a growing CommitLog; this one pins the command's
own wiring of the flag, end to end, over the Java-written store with its ``index/`` removed.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from protocol.codes import RequestCode, ResponseCode
from tests.support.harness import RawClient, key_query_fields
from tests.support.java_store import JAVA_STORE
from tests.support.serve_process import serving


async def test_serve_build_index_rebuilds_the_java_index(stores_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / JAVA_STORE
    shutil.copytree(stores_dir / JAVA_STORE, store)
    for path in [store, *store.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(store / "index")
    conf = tmp_path / f"{JAVA_STORE}.broker.conf"
    shutil.copy(stores_dir / f"{JAVA_STORE}.broker.conf", conf)

    async with serving(
        "--config", str(conf), "--port", "0", "--build-index", "--refresh-interval", "0.05"
    ) as (_, lines, port, _):
        assert any("--build-index" in line for line in lines)
        client = await RawClient.connect("127.0.0.1", port)
        try:
            fields = key_query_fields("TopicA", "k-3")
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while True:
                answer = await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, fields))
                if answer.code == ResponseCode.SUCCESS:
                    break
                assert loop.time() < deadline, "the key was never indexed"
                await asyncio.sleep(0.05)
        finally:
            await client.close()

    ours = sorted((store / "index").iterdir())
    theirs = sorted((stores_dir / JAVA_STORE / "index").iterdir())
    assert len(ours) == len(theirs)
    for built, java in zip(ours, theirs, strict=True):
        assert built.read_bytes() == java.read_bytes(), f"{built.name} differs from {java.name}"
