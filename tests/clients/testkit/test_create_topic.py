"""``RmqServer.create_topic``: a topic made through the admin request, as ``mqadmin updateTopic``
(issue 32), and the README's example for it, run as written. Each test starts an in-process
writable server on 127.0.0.1 port 0 and stops it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clients.response_errors import MQSystemError
from clients.testkit import RmqClient, RmqServer, kit_store_config
from tests.support.paths import REPO_ROOT
from tests.support.topics_json import durable_topics


@pytest.fixture
def server(tmp_path: Path) -> RmqServer:
    kit = RmqServer(kit_store_config(tmp_path / "store"), auto_create_topics=False)
    yield kit  # type: ignore[misc]
    kit.close()


def _route(server: RmqServer, topic: str) -> tuple[int, int, int]:
    route = server.run(server.admin.get_route(topic))
    (queue,) = route.queue_datas or []
    return queue.read_queue_nums, queue.write_queue_nums, queue.perm


def test_the_topic_is_routed_and_saved_as_asked(server: RmqServer) -> None:
    server.create_topic("Made", 3)
    server.create_topic("Uneven", read_queues=2, write_queues=5, perm=4)
    assert _route(server, "Made") == (3, 3, 6)
    assert _route(server, "Uneven") == (2, 5, 4)
    # durable when create_topic returns (topics.json with its journal: store/config/journal.py)
    assert durable_topics(server.config.store_path_root_dir)["Uneven"]["writeQueueNums"] == 5
    # auto-create is off: the SEND finds the topic only because the admin request made it
    assert RmqClient(server).send("Made", "x", queue_id=2).queue_id == 2  # type: ignore[union-attr]


def test_mqadmins_default_is_8_queues(server: RmqServer) -> None:
    server.create_topic("Default")
    assert _route(server, "Default") == (8, 8, 6)


def test_a_refused_name_raises_the_brokers_error(server: RmqServer) -> None:
    with pytest.raises(MQSystemError, match="conflict with system topic"):
        server.create_topic("TBW102")
    with pytest.raises(MQSystemError):
        server.create_topic("bad name!")


def test_the_readme_example_runs(server: RmqServer) -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("### Topics: create, delete, list (no Java needed)", 1)[1].split("\n### ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test(server, RmqClient(server))  # type: ignore[operator]
