"""The real 4.9.7 ``mqadmin`` against ``serve --writable`` (issue 19's admin and trace rows).

One ``serve --writable`` child on an empty store for the module; a Java program (``java/Hold.java``,
official 4.9.7 client) sends 20 messages with ``enableMsgTrace``, consumes them with a trace-enabled
push consumer, commits, and stays online while each test runs one mqadmin command and checks what it
prints (expected values from the program's own sends, never from the server). Every process has a
bounded wait; the server and the Java program are stopped by pid at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mqadmin_env import mqadmin_env
from tests.support.paths import HAVE_ROCKETMQ, REPO_ROOT, ROCKETMQ_HOME, ROCKETMQ_SKIP_REASON

BIN = ROCKETMQ_HOME
pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("javac") is None or not HAVE_ROCKETMQ,
    reason=ROCKETMQ_SKIP_REASON,
)

TOPIC = "AdmTopic"
GROUP = f"cg_{TOPIC}"
PRODUCER_GROUP = f"pg_{TOPIC}"
MESSAGES = 20
#: How long the Java program stays online after consuming (s): longer than all tests together.
HOLD_S = 240
MQADMIN_TIMEOUT_S = 60


class Env:
    def __init__(self, rmq: Path, namesrv: str, store: Path, ids: list[str]) -> None:
        self.rmq, self.namesrv, self.store, self.ids = rmq, namesrv, store, ids

    def mqadmin(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.rmq / "bin" / "mqadmin"), *args, "-n", self.namesrv],
            capture_output=True, text=True, timeout=MQADMIN_TIMEOUT_S, check=False, env=mqadmin_env(),
        )  # fmt: skip
        return done.stdout + done.stderr


def _java_env(rmq: Path) -> tuple[list[str], str]:
    """The JVM flags and class path ``bin/_env.sh`` sets."""
    out = subprocess.run(
        ["bash", "-c", f'. "{rmq}/bin/_env.sh"; echo "$RMQ_JDK_OPTS $RMQ_CLIENT_OPTS"'],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    return out.split(), str(rmq / "lib" / "*")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("mqadmin")
    rmq = tmp / "rmq"
    shutil.copytree(BIN, rmq)
    classes = tmp / "classes"
    classes.mkdir()
    subprocess.run(
        ["javac", "-nowarn", "-cp", str(rmq / "lib" / "*"), "-d", str(classes),
         str(Path(__file__).parent / "java" / "Hold.java")],
        check=True, timeout=120, capture_output=True,
    )  # fmt: skip
    store = tmp / "store"
    server = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(store), "--port", "0"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=open(tmp / "serve.log", "wb"), text=True,
    )  # fmt: skip
    hold = None
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("NAMESRV_ADDR="), line
        namesrv = line.strip().split("=", 1)[1]
        flags, cp = _java_env(rmq)
        out = open(tmp / "hold.out", "w+")
        hold = subprocess.Popen(
            ["java", *flags, "-cp", f"{cp}{os.pathsep}{classes}",
             "Hold", namesrv, TOPIC, str(MESSAGES), str(HOLD_S), "true"],
            stdout=out, stderr=open(tmp / "hold.err", "wb"), text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 90
        while "READY" not in (tmp / "hold.out").read_text() and time.monotonic() < deadline:
            assert hold.poll() is None, (tmp / "hold.err").read_text()[-2000:]
            time.sleep(0.5)
        first = (tmp / "hold.out").read_text().splitlines()[0]
        result = json.loads(first)
        assert result["got"] == MESSAGES
        yield Env(rmq, namesrv, store, result["ids"])
    finally:
        for proc in (hold, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


def test_update_topic_then_topic_route_shows_8_queues(env: Env) -> None:
    out = env.mqadmin("updateTopic", "-c", "DefaultCluster", "-t", "Eight", "-r", "8", "-w", "8")
    assert "success" in out, out
    route = env.mqadmin("topicRoute", "-t", "Eight")
    assert '"readQueueNums":8' in route and '"writeQueueNums":8' in route, route


def test_consumer_progress_after_the_consumer_consumed(env: Env) -> None:
    out = env.mqadmin("consumerProgress", "-g", GROUP)
    rows = [line.split() for line in out.splitlines() if line.startswith(TOPIC + " ")]
    assert len(rows) == 4, out  # the topic was created through TBW102 with the client's 4 queues
    # #Topic #Broker #QID #BrokerOffset #ConsumerOffset #Diff #LastTime(2 words)
    assert sum(int(row[3]) for row in rows) == MESSAGES
    assert all(row[3] == row[4] and row[5] == "0" for row in rows), out
    assert "Diff Total: 0" in out


def test_consumer_connection_lists_the_online_consumer(env: Env) -> None:
    out = env.mqadmin("consumerConnection", "-g", GROUP)
    assert "JAVA" in out and "V4_9_7" in out, out
    assert f"{TOPIC} " in out and "CONSUME_PASSIVELY" in out and "CLUSTERING" in out
    assert "CONSUME_FROM_FIRST_OFFSET" in out


def test_producer_connection_lists_the_producer(env: Env) -> None:
    out = env.mqadmin("producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC)
    assert "JAVA" in out and "V4_9_7" in out, out


def test_query_msg_trace_by_id_shows_pub_and_sub(env: Env) -> None:
    deadline = time.monotonic() + 30  # traces are sent in batches, in the background
    while True:
        out = env.mqadmin("queryMsgTraceById", "-i", env.ids[0])
        pub = [line for line in out.splitlines() if line.startswith("Pub ")]
        sub = [line for line in out.splitlines() if line.startswith("Sub ")]
        if (pub and sub) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert pub and PRODUCER_GROUP in pub[0] and "success" in pub[0], out
    assert sub and GROUP in sub[0] and "success" in sub[0], out


def test_update_and_delete_sub_group(env: Env) -> None:
    out = env.mqadmin("updateSubGroup", "-c", "DefaultCluster", "-g", "AdmGroup", "-r", "3")
    assert "success" in out and "retryMaxTimes=3" in out, out
    saved = (env.store / "config" / "subscriptionGroup.json").read_text()
    assert '"AdmGroup"' in saved
    out = env.mqadmin("deleteSubGroup", "-c", "DefaultCluster", "-g", "AdmGroup")
    assert "success" in out, out
    assert '"AdmGroup"' not in (env.store / "config" / "subscriptionGroup.json").read_text()


def test_reset_offset_by_time_with_the_consumer_online(env: Env) -> None:
    # Timestamp "now" (-1): every queue's end, which is where the group stands already.
    out = env.mqadmin("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "now")
    assert "rollback consumer offset" in out, out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("#brokerName"))
    rows = [line.split() for line in lines[header + 1 :] if len(line.split()) == 3]
    offsets = {int(row[1]): int(row[2]) for row in rows}
    assert len(offsets) == 4 and sum(offsets.values()) == MESSAGES, out


def test_delete_topic(env: Env) -> None:
    assert "success" in env.mqadmin(
        "updateTopic", "-c", "DefaultCluster", "-t", "ToDelete", "-r", "2", "-w", "2"
    )
    out = env.mqadmin("deleteTopic", "-c", "DefaultCluster", "-t", "ToDelete")
    assert "delete topic [ToDelete] from cluster [DefaultCluster] success." in out, out
    assert "delete topic [ToDelete] from NameServer success." in out, out
    route = env.mqadmin("topicRoute", "-t", "ToDelete")
    assert "No topic route info" in route or "TOPIC_NOT_EXIST" in route or "17" in route, route
    assert '"ToDelete"' not in (env.store / "config" / "topics.json").read_text()
