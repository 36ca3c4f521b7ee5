"""``serve`` under a low open-file limit: refusals instead of accept() failures, and the store followed.

A real ``rmq-query serve`` process is started with ``RLIMIT_NOFILE`` lowered to 512 (soft and hard,
so it cannot raise it) over a small store whose files roll often. Far more connections are opened
than the limit allows: the connections it serves keep answering, every one over its limit is answered
SYSTEM_BUSY (the connection-limit answer) instead of being reset or left hanging in the accept queue,
and the store keeps being followed: records appended meanwhile, in new CommitLog and index files
(which need descriptors of their own), are found. Before the limit was derived from
``RLIMIT_NOFILE``, the default 10000 let connections take every descriptor: accept() failed, the
extra clients hung, and opening the store's new files failed on every refresh.
"""

from __future__ import annotations

import asyncio
import logging
import re
import resource
import signal
from pathlib import Path

import pytest

from clients.cli.serve import follow_file_limit
from protocol.codes import RequestCode, ResponseCode
from server.file_budget import ACCEPT_BURST, FileBudget, FileWatch, connections_allowed, plan_connections
from store.config.store_config import StoreConfig
from store.write.writer import StoreWriter
from tests.support.harness import RawClient, StartServer, key_query_fields
from tests.support.pulls import heartbeat
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_serve

FD_LIMIT = 512

#: Connections opened beyond the ones served: more than the whole descriptor limit.
EXTRA_CONNECTIONS = 600

#: Refused connections opened at once, each sending its request at once (within the waiting cap).
WAVE = 10

LIMIT_LINE = re.compile(
    r"serving at most (\d+) connections at once \(open-file limit (\d+), (\d+) descriptors"
)


def _low_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=64 * 1024,
        max_hash_slot_num=64,
        max_index_num=128,
        broker_ip1="127.0.0.1",
    )


def _view(offset: int = 0) -> object:
    return RawClient.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})


async def _refused(port: int) -> bool:
    """Open a connection past the limit and ask something: True if answered SYSTEM_BUSY."""
    client = await RawClient.connect("127.0.0.1", port)
    try:
        answer = await client.call(_view())  # type: ignore[arg-type]
        return answer.code == ResponseCode.SYSTEM_BUSY
    finally:
        await client.close()


async def test_connections_past_the_file_limit_are_refused_and_the_store_still_followed(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    config = _config(root)
    writer = StoreWriter(config)
    for i in range(20):
        writer.append("Fd", f"early {i}".encode(), keys=f"fd-{i}")
    writer.index()
    proc, lines, port, fast_port = await start_serve(
        "--store",
        str(root),
        "--mapped-file-size",
        str(64 * 1024),
        "--max-hash-slot-num",
        "64",
        "--max-index-num",
        "128",
        "--refresh-interval",
        "0.1",
        "--port",
        "0",
        preexec_fn=_low_file_limit,
    )
    assert proc.stderr is not None
    log_lines = list(lines)

    async def drain() -> None:  # keep reading the log so the server never blocks on a full pipe
        assert proc.stderr is not None
        while raw := await proc.stderr.readline():
            log_lines.append(raw.decode())

    drainer = asyncio.get_running_loop().create_task(drain())
    served: list[RawClient] = []
    idle: list[RawClient] = []
    try:
        match = next(m for line in log_lines if (m := LIMIT_LINE.search(line)))
        limit, soft, kept = (int(g) for g in match.groups())
        assert soft == FD_LIMIT
        assert limit + kept <= FD_LIMIT and kept >= ACCEPT_BURST
        assert limit >= 50, "the budget left almost nothing for connections"

        for i in range(limit):
            client = await RawClient.connect("127.0.0.1", port)
            served.append(client)
            assert (await client.call(_view())).code == ResponseCode.SUCCESS  # type: ignore[arg-type]
            # a live client (it heart-beats): never evicted to make room (issue 31, item 4), so the
            # connections past the limit are refused
            beat = RawClient.request(RequestCode.HEART_BEAT, None, heartbeat(f"fd{i}", "G", {"Fd": "*"}))
            assert (await client.call(beat)).code == ResponseCode.SUCCESS  # type: ignore[arg-type]

        # Waves of connections past the limit that ask at once: each is answered SYSTEM_BUSY. Then
        # a burst of idle ones (a refused connection that never asks is closed, at once past the
        # waiting cap), then waves again: the server got through the burst.
        async def wave_after_wave(count: int) -> int:
            refused = 0
            for _ in range(count // WAVE):
                refused += sum(await asyncio.gather(*(_refused(port) for _ in range(WAVE))))
            return refused

        assert await wave_after_wave(EXTRA_CONNECTIONS // 3) == EXTRA_CONNECTIONS // 3
        for i in range(EXTRA_CONNECTIONS // 3):
            idle.append(await RawClient.connect("127.0.0.1", fast_port if i % 2 else port))
        for client in idle:
            assert await client.closed_by_server(timeout=10)
        assert await wave_after_wave(EXTRA_CONNECTIONS // 3) == EXTRA_CONNECTIONS // 3

        # The store grows by several CommitLog and index files: the server must open them.
        for i in range(400):
            writer.append("Fd", b"late" * 64, keys=f"fd-late-{i}")
        writer.index()
        probe = served[0]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while True:
            answer = await probe.call(
                RawClient.request(RequestCode.QUERY_MESSAGE, key_query_fields("Fd", "fd-late-399"))
            )
            if answer.code == ResponseCode.SUCCESS:
                break
            assert loop.time() < deadline, "the server stopped following the store"
            await asyncio.sleep(0.1)
        for client in served[::10]:
            assert (await client.call(_view())).code == ResponseCode.SUCCESS  # type: ignore[arg-type]
    finally:
        for client in served + idle:
            await client.close()
        writer.close()
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT)
        finally:
            await kill_if_running(proc)
            await asyncio.wait_for(drainer, PROCESS_TIMEOUT)
    text = "".join(log_lines)
    assert proc.returncode == 0, text[-3000:]
    for sign in ("Too many open files", "out of system resource", "Traceback", "refreshing the store failed"):
        assert sign not in text, text[-3000:]


def test_the_budget_never_promises_more_descriptors_than_the_limit() -> None:
    for soft in (300, 512, 1024, 4096, 65536):
        for reserve in (0, 100, 290):
            connections, waiting = connections_allowed(soft, reserve)
            assert connections >= 1 and waiting >= 16
            if soft - reserve >= 17:
                assert connections + waiting + reserve <= soft


def test_an_explicit_max_connections_above_the_limit_is_lowered_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard open-file limit to exceed")
    with caplog.at_level(logging.INFO, logger="server.file_budget"):
        budget = plan_connections(hard * 2, 10_000, store_files=5)
    assert budget.soft_limit is not None and budget.soft_limit <= hard
    assert budget.max_connections + budget.max_waiting + budget.reserve <= budget.soft_limit
    lines = [r for r in caplog.records if r.name == "server.file_budget"]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert f"--max-connections {hard * 2} lowered to {budget.max_connections}" in lines[0].getMessage()
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))  # plan_connections may have raised it


def test_the_limit_gives_way_to_store_files_beyond_half_the_growth_room() -> None:
    budget = FileBudget(max_connections=600, max_waiting=60, soft_limit=1024, reserve=364, store_files=10)
    watch = FileWatch(budget, lambda: 10)
    assert watch.limit() == 600
    assert watch.limit(10 + 32) == 600  # half the 64-file growth room: still fine
    assert watch.limit(10 + 33) == 599  # one file past it: one connection fewer
    assert watch.limit(10 + 32 + 250) == 350
    assert watch.limit(100_000) == 1
    assert watch.limit(3) == 600  # files deleted: never above the start value
    roomy = FileBudget(max_connections=600, max_waiting=60, soft_limit=5000, reserve=364, store_files=10)
    assert FileWatch(roomy, lambda: 0).limit(10 + 32 + 3976) == 600  # unpromised descriptors first
    assert FileWatch(roomy, lambda: 0).limit(10 + 32 + 3977) == 599
    unlimited = FileBudget(max_connections=600, max_waiting=60, soft_limit=None, reserve=0, store_files=10)
    assert FileWatch(unlimited, lambda: 0).limit(1_000_000) == 600


async def test_a_growing_store_lowers_the_served_connection_limit(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(max_connections=3)
    budget = FileBudget(max_connections=3, max_waiting=16, soft_limit=100, reserve=81, store_files=0)
    files = [0]
    follower = asyncio.get_running_loop().create_task(
        follow_file_limit(server, FileWatch(budget, lambda: files[0]), lambda: files[0], interval=0.01)
    )
    clients: list[RawClient] = []
    try:
        with caplog.at_level(logging.INFO, logger="server"):
            files[0] = 32 + 2  # two files past half the growth room: two connections fewer
            while server.max_connections != 1:
                await asyncio.sleep(0.01)
            first = await RawClient.connect("127.0.0.1", server.port)
            second = await RawClient.connect("127.0.0.1", server.port)
            clients += [first, second]
            assert (await first.call(_view())).code == ResponseCode.SUCCESS  # type: ignore[arg-type]
            assert (await second.call(_view())).code == ResponseCode.SYSTEM_BUSY  # type: ignore[arg-type]
            files[0] = 0  # the broker's retention deleted them
            while server.max_connections != 3:
                await asyncio.sleep(0.01)
        lines = [r.getMessage() for r in caplog.records if "connection limit now" in r.getMessage()]
        assert lines[0].startswith("connection limit now 1 (was 3): the store has 34 files")
        assert lines[-1].startswith("connection limit now 3 (was 1)")
    finally:
        follower.cancel()
        for client in clients:
            await client.close()
