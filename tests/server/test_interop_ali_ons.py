"""Interoperability: ``ali-ons``, an independently written RocketMQ client (npm), reads our answers.

The Node.js client resolves routes through our name-server role (its own JSON parsing), sends
QUERY_MESSAGE and VIEW_MESSAGE_BY_ID with its own remoting encoder, and decodes the bodies with its
own CommitLog message decoder; what it decodes must be the messages the Java store returned.
``ali-ons`` only understands JSON headers, IPv4 hosts and zlib bodies, so the queries are those whose
results are all plain IPv4 records. The package is installed on first use from the committed
lockfile (``npm ci --prefix tests/server/interop``), so the README's test command works on a fresh
machine; if node, npm or the package cannot be had this test fails rather than skips.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from server.app import QueryServer

INTEROP_DIR = Path(__file__).resolve().parent / "interop"


def _plain(result: dict[str, Any]) -> bool:
    hosts = (result["bornHost"], result["storeHost"])
    return result["sysFlag"] & 0x1 == 0 and all(h.count(":") == 1 for h in hosts)


def _expected_message(result: dict[str, Any]) -> dict[str, Any]:
    return {
        "msgId": result["offsetMsgId"],
        "topic": result["topic"],
        "commitLogOffset": result["commitLogOffset"],
        "storeSize": result["size"],
        "queueId": result["queueId"],
        "queueOffset": result["queueOffset"],
        "keys": result["keys"],
        "uniqKey": result["uniqKey"],
        "bodySha256": result["bodySha256"],
    }


def _ensure_ali_ons() -> None:
    """Install the pinned npm packages once, from the lockfile, when they are not there yet."""
    if (INTEROP_DIR / "node_modules" / "ali-ons").is_dir():
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not installed (the interop test installs ali-ons with it)")
    result = subprocess.run(
        [npm, "ci", "--prefix", str(INTEROP_DIR), "--no-audit", "--no-fund"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"`npm ci --prefix {INTEROP_DIR}` failed:\n{result.stdout}\n{result.stderr}")


async def _run_node(job: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (the interop test needs Node.js >= 18)")
    _ensure_ali_ons()
    proc = await asyncio.create_subprocess_exec(
        node,
        str(INTEROP_DIR / "query.js"),
        cwd=INTEROP_DIR,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(json.dumps(job).encode()), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


async def test_ali_ons_reads_routes_queries_and_views(
    server: QueryServer, java_expected: dict[str, Any]
) -> None:
    queries = [
        q
        for q in java_expected["queries"]
        if q.get("count", 0) > 0 and q["maxNum"] <= 64 and all(_plain(r) for r in q["results"])
    ][:40]
    missing = next(q for q in java_expected["queries"] if q.get("count") == 0 and q["topic"] == "TopicA")
    # Results carry the hosts, so they tell which viewed offsets hold plain IPv4 records.
    by_offset = {r["commitLogOffset"]: r for q in java_expected["queries"] for r in q.get("results", [])}
    views = [
        v
        for v in java_expected["views"]
        if v["found"] and v["offset"] in by_offset and _plain(by_offset[v["offset"]])
    ][:20]
    job = {
        "nameSrv": f"127.0.0.1:{server.port}",
        "topics": ["TopicA", "TopicB", "topic_c-1", "NoSuchTopic"],
        # Longs travel as strings: JavaScript numbers cannot hold Long.MAX_VALUE.
        "queries": [
            {
                "topic": q["topic"],
                "key": q["key"],
                "maxNum": q["maxNum"],
                "begin": str(q["begin"]),
                "end": str(q["end"]),
            }
            for q in [*queries, missing]
        ],
        "views": [v["offset"] for v in views] + [4330405],
    }
    report = await _run_node(job)

    for topic in ("TopicA", "TopicB", "topic_c-1"):
        route = report["routes"][topic]
        assert route["brokerDatas"][0]["brokerAddrs"]["0"] == f"127.0.0.1:{server.port}"
        assert route["queueDatas"][0]["readQueueNums"] == 4
    assert "error" in report["routes"]["NoSuchTopic"]

    assert len(report["queries"]) == len(queries) + 1
    for query, answer in zip(queries, report["queries"], strict=False):
        assert answer["code"] == 0, (query["label"], answer["remark"])
        assert answer["extFields"]["indexLastUpdatePhyoffset"] == str(query["indexLastUpdatePhyoffset"])
        assert answer["messages"] == [_expected_message(r) for r in query["results"]], query["label"]
    not_found = report["queries"][-1]
    assert (not_found["code"], not_found["remark"]) == (
        22,
        "can not find message, maybe time range not correct",
    )

    for view, answer in zip(views, report["views"], strict=False):
        message = by_offset[view["offset"]]
        assert answer["code"] == 0
        assert [m["msgId"] for m in answer["messages"]] == [message["offsetMsgId"]]
        assert answer["messages"][0]["bodySha256"] == message["bodySha256"]
    assert report["views"][-1] == {
        "code": 1,
        "remark": "can not find message by the offset, 4330405",
        "messages": [],
    }
    assert len(queries) >= 20 and len(views) >= 10
