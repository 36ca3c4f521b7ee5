"""Without ``--build-index`` the served store is never written: not a byte, not a new file (no
OFFSET_MOVED_EVENT message, no consumer offset, as a broker would write).

The server may run beside a broker that owns the store, so serving (queries, views, routes, the
periodic refresh, a signal-driven stop) must leave every file exactly as it was. The check runs the
real ``serve`` command over a writable copy of the Java-written store (permissions would not stop
a process running as root, so only the snapshot proves nothing was written).
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from pathlib import Path

from protocol.codes import RequestCode, ResponseCode
from tests.support.harness import RawClient, key_query_fields
from tests.support.java_store import JAVA_STORE
from tests.support.pulls import pull_fields
from tests.support.serve_process import serving


def snapshot(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every directory and file under ``root``: kind, mtime and content hash."""
    state: dict[str, tuple[str, int, str]] = {}
    for path in sorted(root.rglob("*")):
        stat = path.stat()
        if path.is_dir():
            state[str(path.relative_to(root))] = ("dir", stat.st_mtime_ns, "")
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            state[str(path.relative_to(root))] = ("file", stat.st_mtime_ns, digest)
    return state


async def test_serving_read_only_writes_nothing(stores_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / JAVA_STORE
    shutil.copytree(stores_dir / JAVA_STORE, store)
    for path in [store, *store.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    conf = tmp_path / f"{JAVA_STORE}.broker.conf"
    shutil.copy(stores_dir / f"{JAVA_STORE}.broker.conf", conf)
    before = snapshot(tmp_path)

    async with serving("--config", str(conf), "--port", "0", "--refresh-interval", "0.05") as (_, _, port, _):
        client = await RawClient.connect("127.0.0.1", port)
        try:
            requests = [
                RawClient.request(RequestCode.QUERY_MESSAGE, key_query_fields("TopicA", "k-3")),
                RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}),
                RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicB"}),
                RawClient.request(RequestCode.HEART_BEAT, body=b'{"clientID":"c"}'),
            ]
            for request in requests:
                assert (await client.call(request)).code == ResponseCode.SUCCESS
            # Where a master broker answers PULL_OFFSET_MOVED it appends an OFFSET_MOVED_EVENT message
            # to its store (and commits offsets for the commit flag): this server writes neither.
            for offset, code in ((600, ResponseCode.PULL_OFFSET_MOVED), (-1, ResponseCode.PULL_OFFSET_MOVED)):
                fields = {**pull_fields("TopicA", 1, offset, 32), "sysFlag": "5", "commitOffset": "3"}
                assert (await client.call(RawClient.request(RequestCode.PULL_MESSAGE, fields))).code == code
            await asyncio.sleep(0.3)  # several refresh passes
        finally:
            await client.close()

    assert snapshot(tmp_path) == before
