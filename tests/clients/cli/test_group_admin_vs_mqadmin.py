"""The group admin subcommands against the real 4.9.7 ``mqadmin``: same server state, same bytes.

One ``serve --writable`` child on an empty store for the module, and the Java program
``tests/server/java/Hold.java`` (official 4.9.7 client) holding a producer and a push consumer online
after consuming its 20 messages. Each test runs an mqadmin command and the matching ``rmq-query``
subcommand on the same state and compares their standard output byte for byte. Both run with
``TZ=Asia/Shanghai`` so a time printed in UTC, or in the wrong zone, shows.

Nothing is masked: this server reports a consume rate of 0.0 (so ``Consume TPS: 0.00`` is stable),
and the client ids and addresses printed are the Java program's, the same for both tools. Where a
command changes state (the offline reset commits offsets), mqadmin and rmq-query act on two groups
set up identically and only the group name is substituted before comparing.

Every process has a bounded wait; the server and the Java program are stopped by pid at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from clients.client import RemotingClient
from protocol.codes import RequestCode
from protocol.custom_headers import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    read_offset,
)
from tests.support.mqadmin_env import mqadmin_env
from tests.support.paths import HAVE_ROCKETMQ, REPO_ROOT, ROCKETMQ_HOME, ROCKETMQ_SKIP_REASON

BIN = ROCKETMQ_HOME
pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("javac") is None or not HAVE_ROCKETMQ,
    reason=ROCKETMQ_SKIP_REASON,
)

TOPIC = "GrpTopic"
GROUP = f"cg_{TOPIC}"
PRODUCER_GROUP = f"pg_{TOPIC}"
MESSAGES = 20
HOLD_S = 300
TIMEOUT_S = 90
TZ = "Asia/Shanghai"


class Env:
    def __init__(self, rmq: Path, namesrv: str) -> None:
        self.rmq, self.namesrv = rmq, namesrv
        self.run_env = dict(os.environ, TZ=TZ)

    def mqadmin(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.rmq / "bin" / "mqadmin"), *args, "-n", self.namesrv],
            capture_output=True, text=True, timeout=TIMEOUT_S, check=False, env=mqadmin_env(self.run_env),
        )  # fmt: skip

    def ours(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clients.cli", *args, "-n", self.namesrv],
            capture_output=True, text=True, timeout=TIMEOUT_S, check=False, env=self.run_env, cwd=REPO_ROOT,
        )  # fmt: skip


def _java_env(rmq: Path) -> tuple[list[str], str]:
    """The JVM flags and class path ``bin/_env.sh`` sets."""
    out = subprocess.run(
        ["bash", "-c", f'. "{rmq}/bin/_env.sh"; echo "$RMQ_JDK_OPTS $RMQ_CLIENT_OPTS"'],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    return out.split(), str(rmq / "lib" / "*")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("group_admin")
    rmq = tmp / "rmq"
    shutil.copytree(BIN, rmq)
    classes = tmp / "classes"
    classes.mkdir()
    subprocess.run(
        ["javac", "-nowarn", "-cp", str(rmq / "lib" / "*"), "-d", str(classes),
         str(REPO_ROOT / "tests" / "server" / "java" / "Hold.java")],
        check=True, timeout=120, capture_output=True,
    )  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(tmp / "store"),
         "--port", "0"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=open(tmp / "serve.log", "wb"), text=True,
    )  # fmt: skip
    hold = None
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("NAMESRV_ADDR="), line
        namesrv = line.strip().split("=", 1)[1]
        flags, cp = _java_env(rmq)
        hold = subprocess.Popen(
            ["java", *flags, "-cp", f"{cp}{os.pathsep}{classes}",
             "Hold", namesrv, TOPIC, str(MESSAGES), str(HOLD_S), "false"],
            stdout=open(tmp / "hold.out", "w"), stderr=open(tmp / "hold.err", "wb"), text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 90
        while "READY" not in (tmp / "hold.out").read_text() and time.monotonic() < deadline:
            assert hold.poll() is None, (tmp / "hold.err").read_text()[-2000:]
            time.sleep(0.5)
        assert json.loads((tmp / "hold.out").read_text().splitlines()[0])["got"] == MESSAGES
        # The client commits its retry queue's offset (0) only after that queue's first pull is
        # answered (the held pull's 15 s) and its next 5 s persist: until then consumerProgress has
        # no %RETRY% row, so mqadmin and rmq-query, run one after the other, could see two states.
        # Wait for the row, as the real broker's table would settle, before comparing anything.
        deadline = time.monotonic() + 90
        while asyncio.run(_retry_offset(namesrv)) is None:
            assert time.monotonic() < deadline, "the consumer never committed its retry queue's offset"
            assert hold.poll() is None, (tmp / "hold.err").read_text()[-2000:]
            time.sleep(1)
        yield Env(rmq, namesrv)
    finally:
        for proc in (hold, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


async def _retry_offset(addr: str) -> int | None:
    """The group's committed offset of its retry topic's queue 0, or None while it has none."""
    client = RemotingClient()
    try:
        fields = QueryConsumerOffsetRequestHeader(GROUP, f"%RETRY%{GROUP}", 0).to_ext_fields()
        answer = await client.invoke(addr, RequestCode.QUERY_CONSUMER_OFFSET, fields)
        return read_offset(answer.ext_fields) if answer.code == 0 else None
    finally:
        await client.close()


def _same(mq: subprocess.CompletedProcess[str], ours: subprocess.CompletedProcess[str]) -> None:
    assert ours.stdout == mq.stdout, (
        f"mqadmin:\n{mq.stdout}{mq.stderr[-1500:]}\nours:\n{ours.stdout}{ours.stderr}"
    )


READ_COMMANDS = [
    (("consumerProgress", "-g", GROUP), ("consumer-progress", "-g", GROUP)),
    (("consumerProgress", "-g", GROUP, "-s", "true"), ("consumer-progress", "-g", GROUP, "-s", "true")),
    (("consumerProgress",), ("consumer-progress",)),
    (("consumerConnection", "-g", GROUP), ("consumer-connection", "-g", GROUP)),
    (("producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC),
     ("producer-connection", "-g", PRODUCER_GROUP, "-t", TOPIC)),
]  # fmt: skip


def test_read_commands_print_what_mqadmin_prints(env: Env) -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:  # a JVM start each: a few at a time
        mq_runs = list(pool.map(lambda pair: env.mqadmin(*pair[0]), READ_COMMANDS))
    for (_, our_args), mq in zip(READ_COMMANDS, mq_runs, strict=True):
        ours = env.ours(*our_args)
        assert ours.returncode == 0, ours.stderr
        _same(mq, ours)
    progress, with_ip, groups, consumers, producers = (run.stdout for run in mq_runs)
    # Not two empty outputs: what mqadmin printed holds the state the Java program made.
    assert progress.count(f"\n{TOPIC} ") == 4 and "Diff Total: 0\n" in progress
    assert all(row.split()[5] != "N/A" for row in with_ip.splitlines() if row.startswith(TOPIC + " "))
    assert f"\n{GROUP} " in groups and "V4_9_7" in groups and "CLUSTERING" in groups
    assert "CONSUME_FROM_FIRST_OFFSET" in consumers and f"\n{TOPIC} " in consumers
    assert producers.startswith("0001  ") and "V4_9_7" in producers


def test_update_sub_group_prints_what_mqadmin_prints(env: Env) -> None:
    flags = ("-g", "SubG", "-s", "false", "-m", "true", "-d", "true", "-q", "2", "-r", "3", "-i", "1",
             "-w", "0", "-a", "false")  # fmt: skip
    mq = env.mqadmin("updateSubGroup", "-c", "DefaultCluster", *flags)
    assert "retryMaxTimes=3" in mq.stdout, mq.stdout + mq.stderr
    _same(mq, env.ours("update-sub-group", "-c", "DefaultCluster", *flags))
    _same(env.mqadmin("updateSubGroup", "-b", env.namesrv, "-g", "SubB"),
          env.ours("update-sub-group", "-b", env.namesrv, "-g", "SubB"))  # fmt: skip


def test_unknown_cluster_prints_mqadmins_warning_and_exits_1(env: Env) -> None:
    mq = env.mqadmin("updateSubGroup", "-c", "NoSuchCluster", "-g", "SubX")
    ours = env.ours("update-sub-group", "-c", "NoSuchCluster", "-g", "SubX")
    assert mq.stdout.startswith("[error] Make sure the specified clusterName exists")
    _same(mq, ours)
    assert ours.returncode == 1 and "NoSuchCluster" in ours.stderr


def test_delete_sub_group_prints_what_mqadmin_prints(env: Env) -> None:
    env.mqadmin("updateSubGroup", "-c", "DefaultCluster", "-g", "DelA")
    env.ours("update-sub-group", "-c", "DefaultCluster", "-g", "DelB")
    mq = env.mqadmin("deleteSubGroup", "-c", "DefaultCluster", "-g", "DelA")
    assert "delete topic [%DLQ%DelA] from NameServer success." in mq.stdout, mq.stdout + mq.stderr
    ours = env.ours("delete-sub-group", "-c", "DefaultCluster", "-g", "DelB")
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.replace("DelB", "DelA") == mq.stdout
    _same(env.mqadmin("deleteSubGroup", "-b", env.namesrv, "-g", "SubB", "-r", "true"),
          env.ours("delete-sub-group", "-b", env.namesrv, "-g", "SubB", "-r", "true"))  # fmt: skip


def test_group_not_online_exits_1(env: Env) -> None:
    # No retry topic: the name server has no route for it (17); asked of the broker: nobody online (206).
    ours = env.ours("consumer-connection", "-g", "NobodyHome")
    assert (ours.returncode, ours.stdout) == (1, "") and "CODE: 17 " in ours.stderr
    ours = env.ours("consumer-connection", "-g", "NobodyHome", "-b", env.namesrv)
    assert (ours.returncode, ours.stdout) == (1, "") and "CODE: 206 " in ours.stderr
    mq = env.mqadmin("consumerConnection", "-g", "NobodyHome", "-b", env.namesrv)
    assert "CODE: 206" in mq.stdout + mq.stderr


def test_reset_offset_by_time_online_prints_what_mqadmin_prints(env: Env) -> None:
    # "now" and a time after every message: the group stays where it is, so both see the same state.
    # -c: the request goes as a C++ client's (the broker resets without asking the consumers).
    for stamp, more in (
        ("now", ("-f", "true")),
        ("2099-01-01#08:00:00:000", ("-f", "false")),
        ("now", ("-c",)),
    ):
        args = ("-g", GROUP, "-t", TOPIC, "-s", stamp, *more)
        mq = env.mqadmin("resetOffsetByTime", *args)
        assert "#brokerName" in mq.stdout, mq.stdout + mq.stderr
        _same(mq, env.ours("reset-offset-by-time", *args))
        if stamp != "now":  # 2099-01-01 08:00 in Shanghai is 00:00 UTC.
            assert "timestamp(long)[4070908800000]" in mq.stdout


def test_reset_offset_by_time_offline_falls_back_as_mqadmin(env: Env) -> None:
    async def commit(group: str) -> None:  # offsets 0..3 on the four queues, nobody online
        client = RemotingClient()
        try:
            for queue in range(4):
                fields = UpdateConsumerOffsetRequestHeader(group, TOPIC, queue, queue).to_ext_fields()
                answer = await client.invoke(env.namesrv, RequestCode.UPDATE_CONSUMER_OFFSET, fields)
                assert answer.code == 0, answer.remark
        finally:
            await client.close()

    for group in ("OffA", "OffB"):
        asyncio.run(commit(group))
    mq = env.mqadmin("resetOffsetByTime", "-g", "OffA", "-t", TOPIC, "-s", "now")
    assert "#rollbackOffset" in mq.stdout, mq.stdout + mq.stderr
    ours = env.ours("reset-offset-by-time", "-g", "OffB", "-t", TOPIC, "-s", "now")
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.replace("OffB", "OffA") == mq.stdout
    # The fallback commits the offsets itself: both groups now stand where mqadmin's table says.
    rollback = {int(row.split()[1]): int(row.split()[5]) for row in mq.stdout.splitlines()[2:]}
    assert (
        asyncio.run(committed(env.namesrv, "OffA")) == asyncio.run(committed(env.namesrv, "OffB")) == rollback
    )


async def committed(addr: str, group: str) -> dict[int, int]:
    """The group's committed offset of each queue of the topic (QUERY_CONSUMER_OFFSET)."""
    client = RemotingClient()
    try:
        offsets = {}
        for queue in range(4):
            fields = QueryConsumerOffsetRequestHeader(group, TOPIC, queue).to_ext_fields()
            answer = await client.invoke(addr, RequestCode.QUERY_CONSUMER_OFFSET, fields)
            assert answer.code == 0, answer.remark
            offsets[queue] = read_offset(answer.ext_fields)
        return offsets
    finally:
        await client.close()
