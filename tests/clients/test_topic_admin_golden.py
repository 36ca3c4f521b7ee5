"""Our topic commands' text from the real 4.9.7 name server's and broker's own answers, against what
the real mqadmin printed from them (``tests/server/golden/topic_admin_4.9.7.json``, recorded by
``record_topic_admin.py``; no server here). ``test_admin_topic_commands.py`` compares the two on our
server; this checks the formatters on answers ours did not write (the real name server's topic list
order, its route and cluster bodies, the real broker's runtime figures)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from clients.cli.admin_update_topic import add_arguments, spec_of
from clients.topic_admin import ClusterInfo, decode_fastjson
from clients.topic_admin_text import (
    cluster_list_header,
    cluster_list_row,
    cluster_list_rows,
    route_json_text,
    route_table_text,
    topic_list_text,
)

GOLDEN = Path(__file__).resolve().parents[1] / "server" / "golden" / "topic_admin_4.9.7.json"


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def _printed(golden: dict[str, Any], *command: str, last: bool = False) -> str:
    found = [step["stdout"] for step in golden["steps"] if step["command"] == list(command)]
    assert found, command
    return found[-1] if last else found[0]


def test_topic_route_json_and_table(golden: dict[str, Any]) -> None:
    alpha = decode_fastjson(golden["raw"]["route Alpha"].encode())
    beta = decode_fastjson(golden["raw"]["route Beta"].encode())
    assert route_json_text(alpha) + "\n" == _printed(golden, "topicRoute", "-t", "Alpha")
    assert route_json_text(beta) + "\n" == _printed(golden, "topicRoute", "-t", "Beta")
    assert route_table_text(beta) == _printed(golden, "topicRoute", "-t", "Beta", "-l")


def test_topic_list_in_the_order_mqadmin_prints_it(golden: dict[str, Any]) -> None:
    listed = decode_fastjson(golden["raw"]["topicList"].encode())["topicList"]
    assert topic_list_text(listed) == _printed(golden, "topicList")
    after = decode_fastjson(golden["rawAfterDelete"]["topicList"].encode())["topicList"]
    assert topic_list_text(after) == _printed(golden, "topicList", last=True)
    assert "Gamma" in listed and "Gamma" not in after


def test_cluster_list_but_the_moments_figures(golden: dict[str, Any]) -> None:
    info = ClusterInfo.decode(golden["raw"]["clusterInfo"].encode())
    stats = {
        str(k): str(v) for k, v in decode_fastjson(golden["raw"]["runtimeInfo"].encode())["table"].items()
    }
    ours = cluster_list_header() + "".join(
        cluster_list_row(*row, stats, 0) for row in cluster_list_rows(info)
    )
    theirs = _printed(golden, "clusterList")

    def without_the_moment(text: str) -> list[str]:
        return [line.rsplit(None, 2)[0] for line in text.splitlines()]

    assert without_the_moment(ours) == without_the_moment(theirs)


def test_update_topic_prints_the_config_it_sent(golden: dict[str, Any]) -> None:
    broker = golden["broker"]
    for step in golden["steps"]:
        words = [w.replace("{broker}", broker) for w in step["command"]]
        if words[0] != "updateTopic":
            continue
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        args = parser.parse_args([*words[1:], "-n", "127.0.0.1:9876"])
        assert f"create topic to {broker} success.\n" + spec_of(args).java_string() == step["stdout"], words
