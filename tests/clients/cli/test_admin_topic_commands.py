"""``rmq-query update-topic / delete-topic / topic-route / topic-list / cluster-list`` against the real
4.9.7 ``mqadmin`` on the same ``serve --writable`` state (issue 32).

One in-process writable server on 127.0.0.1 port 0 for the module. Our commands run first on a state
they set up, then the real mqadmin runs the same commands in one JVM (``tests.support.mqadmin_batch``)
on that state (``updateTopic`` of the same config and ``deleteTopic`` again change nothing), and what
each printed must be the same bytes; ``clusterList``'s figures of the moment (hours since the earliest
message, disk ratio) are compared without their last two columns. Then bad input: usage errors and an
unknown cluster are refused with a message and a non-zero exit code.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.cli import main
from clients.testkit import RmqClient, RmqServer, kit_store_config
from tests.support import mqadmin_batch
from tests.support.paths import ROCKETMQ_SKIP_REASON

TOPIC = "AdminTopic"


def ours(*words: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(words))
        except SystemExit as exc:  # argparse's usage error
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqServer]:
    kit = RmqServer(kit_store_config(tmp_path_factory.mktemp("admin") / "store"))
    try:
        RmqClient(kit).send("Sent", "one")  # a topic made by a SEND, listed beside the built-in ones
        yield kit
    finally:
        kit.close()


@pytest.mark.skipif(not mqadmin_batch.available(), reason=ROCKETMQ_SKIP_REASON)
def test_our_output_is_mqadmins_on_the_same_state(server: RmqServer, tmp_path: Path) -> None:
    n = ("-n", server.address)
    update = ("-c", "DefaultCluster", "-t", TOPIC, "-r", "6", "-w", "4", "-p", "6")
    commands = [
        (("update-topic", *update), ("updateTopic", *update)),
        (("topic-route", "-t", TOPIC), ("topicRoute", "-t", TOPIC)),
        (("topic-route", "-t", TOPIC, "-l"), ("topicRoute", "-t", TOPIC, "-l")),
        (("topic-list",), ("topicList",)),
        (("topic-list", "-c"), ("topicList", "-c")),
        (("cluster-list",), ("clusterList",)),
        (
            ("update-topic", "-c", "NoSuchCluster", "-t", "X"),
            ("updateTopic", "-c", "NoSuchCluster", "-t", "X"),
        ),
        (
            ("delete-topic", "-c", "DefaultCluster", "-t", TOPIC),
            ("deleteTopic", "-c", "DefaultCluster", "-t", TOPIC),
        ),
        (("topic-list",), ("topicList",)),
    ]
    mine = []
    for our_words, _ in commands:
        code, out, err = ours(*our_words, *n)
        mine.append(out)
        if "NoSuchCluster" not in our_words:
            assert code == 0, (our_words, err)
    # Our delete ran first; mqadmin's own run starts from the state before it: make the topic again.
    assert ours("update-topic", *update, *n)[0] == 0
    theirs = mqadmin_batch.run_batch(tmp_path, [[*java, *n] for _, java in commands])
    assert len(theirs) == len(mine)
    for (our_words, _), got, want in zip(commands, mine, theirs, strict=True):
        if our_words[0] == "cluster-list":
            got = "\n".join(line.rsplit(None, 2)[0] for line in got.splitlines())
            want = "\n".join(line.rsplit(None, 2)[0] for line in want.splitlines())
        assert got == want, our_words
    assert TOPIC in mine[3] and TOPIC not in mine[-1] and "Sent\n" in mine[-1]


def test_a_topic_without_route_is_reported_with_mqadmins_words(server: RmqServer) -> None:
    code, out, err = ours("topic-route", "-t", "NoSuchTopic", "-n", server.address)
    assert code == 1 and out == ""
    assert "No topic route info in name server for the topic: NoSuchTopic" in err


def test_an_unknown_cluster_prints_mqadmins_error_and_fails(server: RmqServer) -> None:
    code, out, _ = ours("delete-topic", "-c", "NoSuchCluster", "-t", "Sent", "-n", server.address)
    assert code == 1
    assert out.startswith("[error] Make sure the specified clusterName exists")
    assert "Sent" in ours("topic-list", "-n", server.address)[1]  # nothing was deleted


@pytest.mark.parametrize(
    "words",
    [
        ("update-topic", "-t", "X"),  # neither -b nor -c
        ("update-topic", "-b", "h:1", "-c", "C", "-t", "X"),  # both
        ("update-topic", "-c", "C"),  # no topic
        ("update-topic", "-c", "C", "-t", "X", "-r", "many"),
        ("delete-topic", "-t", "X"),  # no cluster
        ("topic-route",),
    ],
)
def test_usage_errors_exit_2_with_a_message(words: tuple[str, ...]) -> None:
    code, _, err = ours(*words, "-n", "127.0.0.1:1")
    assert code == 2 and "error:" in err


def test_a_refused_topic_name_is_a_server_error(server: RmqServer) -> None:
    code, _, err = ours("update-topic", "-b", server.address, "-t", "TBW102", "-n", server.address)
    assert code == 4 and "conflict with system topic" in err


def test_an_unreachable_name_server_exits_3() -> None:
    code, _, err = ours("topic-list", "-n", "127.0.0.1:1", "--timeout", "2")
    assert code == 3 and "rmq-query topic-list" in err
