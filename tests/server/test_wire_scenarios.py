"""Replaying every frame the real 4.9.7 / 5.3.3 clients and mqadmin sent, against the Java store.

``tests/golden/vectors/wire/<scenario>/`` holds each request the tools sent (to the name server and the
broker) and what the real 4.9.7 name server and broker answered. The server plays both roles, so
every request is sent to it on one connection per client socket, and its answer must equal the real
one: byte for byte for the broker's answers (same store, same opaque), and for the name server's
route the same JSON apart from the ``enableActingMaster`` flag we add for the Rust client. The
planned differences: ``TBW102``, a topic the store does not hold, gets TOPIC_NOT_EXIST (clients log
and ignore it) where the real name server had a route for it; the cluster table is compared as JSON
(the real name server writes the master's key unquoted, ``{0:"..."}``, which Go clients cannot read);
a remark naming the consumer's address names our client's socket instead of the recording proxy's;
and GET_BROKER_RUNTIME_INFO is compared key by key, in order, with equal values for the figures that
do not change from run to run (``RUNTIME_STABLE_KEYS``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.frame import decode_frame, encode_frame
from protocol.opaque_matcher import OpaqueMatcher
from server.remoting.processors.name_server import topic_not_exist_remark
from tests.support.harness import RawClient, StartServer
from tests.support.paths import REPO_ROOT
from tests.support.send_replay import SEND_SCENARIOS

WIRE_SCENARIOS = [
    "dashboard_queryByTopic",
    "mqadmin_brokerStatus",
    "mqadmin_clusterList",
    "mqadmin_printMsgByQueue",
    "mqadmin_printMsgByQueue_range",
    "mqadmin_printMsg_head",
    "mqadmin_printMsg_range",
    "mqadmin_printMsg_tail",
    "mqadmin_queryMsgByOffset",
    "mqadmin_queryMsgTraceById",
    "mqadmin_topicList",
    "mqadmin_topicStatus",
    "pullconsumer_edges",
    "mqadmin_queryMsgById",
    "mqadmin_queryMsgByKey",
    "mqadmin_queryMsgByUniqueKey",
    "v4_queryMsgByKey",
    "v4_queryMsgByKey_notfound",
    "v4_queryMsgByKey_producer",
    "v4_queryMsgByUniqKey",
    "v4_unknownTopic",
    "v4_viewMessage",
    "v4_viewMessageTopic_uniq",
    "v4_viewMessage_badoffset",
    "v5_queryMsgByKey",
    "v5_queryMsgByUniqKey",
    "v5_viewMessageTopic",
]

#: Broker-to-name-server registration captured alongside the clients' traffic: not a client request.
NOT_CLIENT_TRAFFIC = {RequestCode.REGISTER_BROKER}

ROUTE_CODES = {RequestCode.GET_ROUTEINFO_BY_TOPIC}

#: Runtime-info entries that are the same on every run over this store (offsets, versions, settings).
RUNTIME_STABLE_KEYS = {
    "brokerVersion",
    "brokerVersionDesc",
    "commitLogMinOffset",
    "commitLogMaxOffset",
    "earliestMessageTimeStamp",
    "putMessageTimesTotal",
    "putMessageFailedTimes",
    "putMessageSizeTotal",
    "putMessageDistributeTime",
    "putMessageAverageSize",
    "msgPutTotalTodayNow",
    "sendThreadPoolQueueCapacity",
    "pullThreadPoolQueueCapacity",
    "queryThreadPoolQueueCapacity",
    "EndTransactionThreadPoolQueueCapacity",
    "remainTransientStoreBufferNumbs",
    "remainHowManyDataToFlush",
    "startAcceptSendRequestTimeStamp",
    "dispatchBehindBytes",
    "pageCacheLockTimeMills",
}

#: A remark naming the consumer's socket, as the broker prints ``channel.remoteAddress()``.
_CONSUMER_ADDRESS = re.compile(r"consumer:\[/[^\]]*\]")


def _runtime_table(body: bytes, store_path_marker: str) -> list[tuple[str, str]]:
    table = msgspec.json.decode(body)["table"]
    return [(k.replace(store_path_marker, "<commitlog>"), v) for k, v in table.items()]


def _cluster_json(body: bytes) -> Any:
    text = bytes(body).decode().replace('"brokerAddrs":{0:', '"brokerAddrs":{"0":')
    cluster = json.loads(text)
    for broker in cluster["brokerAddrTable"].values():
        broker.pop("enableActingMaster", None)
    return cluster


def _pairs(scenario_dir: Path) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    frames = json.loads((scenario_dir / "frames.json").read_text(encoding="utf-8"))
    pairs: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    waiting: dict[str, OpaqueMatcher[int]] = {}  # per connection (the requester's address)
    for frame in frames:
        if not frame["header"]["flag"] & 1:
            waiting.setdefault(frame["src"], OpaqueMatcher()).expect(frame["header"]["opaque"], len(pairs))
            pairs.append((frame, None))
            continue
        requester = waiting.get(frame["dst"])
        index = requester.match(frame["header"]["opaque"]) if requester is not None else None
        if index is not None:
            pairs[index] = (pairs[index][0], frame)
    return pairs


#: Captured scenarios replayed by another test, because they need another server: the write path's
#: SEND captures need ``serve --writable`` on an empty store with the store clock pinned.
REPLAYED_ELSEWHERE = {
    "v4_send": "tests/server/test_send_replay.py",
    "v4_send_v1header": "tests/server/test_send_replay.py",
}


def test_every_scenario_is_replayed(vectors_dir: Path) -> None:
    """Every capture on disk is replayed below or by the test named in REPLAYED_ELSEWHERE."""
    on_disk = sorted(p.name for p in (vectors_dir / "wire").iterdir() if p.is_dir())
    assert on_disk == sorted(WIRE_SCENARIOS + list(REPLAYED_ELSEWHERE))
    # The replay itself lives in tests/support/send_replay.py; the test named runs it.
    for scenario, test_file in REPLAYED_ELSEWHERE.items():
        assert scenario in SEND_SCENARIOS, scenario
        assert "replay(" in (REPO_ROOT / test_file).read_text(encoding="utf-8"), test_file


@pytest.mark.parametrize("scenario", WIRE_SCENARIOS)
async def test_scenario_answers_match_the_real_broker(
    scenario: str, vectors_dir: Path, start_server: StartServer
) -> None:
    scenario_dir = vectors_dir / "wire" / scenario
    server = await start_server(advertise="127.0.0.1:10911")
    clients: dict[str, RawClient] = {}
    replayed = 0
    try:
        for req, recorded in _pairs(scenario_dir):
            code = req["header"]["code"]
            if code in NOT_CLIENT_TRAFFIC:
                continue
            assert recorded is not None, f"{scenario}: no recorded answer to {req['file']}"
            client = clients.get(req["src"])
            if client is None:
                client = clients[req["src"]] = await RawClient.connect("127.0.0.1", server.port)
            raw_request = (scenario_dir / req["file"]).read_bytes()
            await client.send_bytes(raw_request)
            ours_raw = await client.receive_frame()
            ours = decode_frame(ours_raw)
            theirs_raw = (scenario_dir / recorded["file"]).read_bytes()
            theirs = decode_frame(theirs_raw)
            assert ours.opaque == theirs.opaque
            topic = (req["header"].get("extFields") or {}).get("topic")
            if code in ROUTE_CODES and topic == "TBW102":
                assert ours.code == ResponseCode.TOPIC_NOT_EXIST
                assert ours.remark == topic_not_exist_remark("TBW102")
            elif code == RequestCode.GET_BROKER_CLUSTER_INFO:
                assert (ours.code, ours.remark) == (theirs.code, theirs.remark)
                assert _cluster_json(ours.body or b"") == _cluster_json(theirs.body or b"")
            elif code == RequestCode.GET_BROKER_RUNTIME_INFO:
                assert (ours.code, ours.remark, ours.ext_fields) == (
                    theirs.code,
                    theirs.remark,
                    theirs.ext_fields,
                )
                our_table = _runtime_table(
                    bytes(ours.body or b""), str(server.store.config.store_path_commit_log)
                )
                # The capturing broker's store was /tmp/rmqcap/store (vectors/README.md): recorded data.
                their_table = _runtime_table(bytes(theirs.body or b""), "/tmp/rmqcap/store/commitlog")
                # The key naming the CommitLog path sits where its hash puts it: compare the rest's order.
                assert sorted(k for k, _ in our_table) == sorted(k for k, _ in their_table)
                assert [k for k, _ in our_table if "<" not in k] == [
                    k for k, _ in their_table if "<" not in k
                ]
                assert {k: v for k, v in our_table if k in RUNTIME_STABLE_KEYS} == {
                    k: v for k, v in their_table if k in RUNTIME_STABLE_KEYS
                }
            elif theirs.remark and _CONSUMER_ADDRESS.search(theirs.remark):
                local = client.writer.get_extra_info("sockname")
                theirs.remark = _CONSUMER_ADDRESS.sub(f"consumer:[/{local[0]}:{local[1]}]", theirs.remark)
                assert ours_raw == encode_frame(theirs), f"{scenario}: {req['file']} answered differently"
            elif code in ROUTE_CODES and theirs.code == ResponseCode.SUCCESS:
                assert (ours.code, ours.remark, ours.ext_fields) == (
                    theirs.code,
                    theirs.remark,
                    theirs.ext_fields,
                )
                route = msgspec.json.decode(bytes(ours.body or b""))
                assert all(b.pop("enableActingMaster") is False for b in route["brokerDatas"])
                expected_route = msgspec.json.decode(bytes(theirs.body or b""))
                # The real name server kept the queue numbers of the producer's topic config; ours are
                # the broker's defaults for an auto-created topic (4/4, perm 6) - the same here.
                assert route == expected_route
            else:
                assert ours_raw == theirs_raw, f"{scenario}: {req['file']} answered differently"
            replayed += 1
    finally:
        for client in clients.values():
            await client.close()
    assert replayed > 0
