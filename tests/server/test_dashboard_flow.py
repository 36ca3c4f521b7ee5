"""The RocketMQ dashboard's message search, step by step, as it reaches the server.

By id: GET_BROKER_CLUSTER_INFO, GET_ROUTEINFO_BY_TOPIC, then a unique-key QUERY_MESSAGE (maxNum 32,
0..MAX) sent to the VIP channel at port - 2 of the routed address. By key: QUERY_MESSAGE with
end = now. Every step must answer as the broker does, on the port the dashboard actually uses.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import msgspec

from protocol.codes import RequestCode, ResponseCode
from protocol.message import decode_messages
from server.app import QueryServer
from tests.support.harness import Connect, RawClient


def _vip(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port) - 2


async def test_dashboard_search_by_id_and_by_key(
    server: QueryServer, connect: Connect, java_expected: dict[str, Any]
) -> None:
    target = next(
        m for m in java_expected["messages"] if m["uniqKey"] and m["keys"] and m["topic"] == "topic_c-1"
    )
    names = await connect()
    cluster = msgspec.json.decode(
        bytes((await names.call(RawClient.request(RequestCode.GET_BROKER_CLUSTER_INFO))).body or b"")
    )
    broker_name = cluster["clusterAddrTable"]["DefaultCluster"][0]
    address = cluster["brokerAddrTable"][broker_name]["brokerAddrs"]["0"]
    route = msgspec.json.decode(
        bytes(
            (
                await names.call(
                    RawClient.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "topic_c-1"})
                )
            ).body
            or b""
        )
    )
    assert route["brokerDatas"][0]["brokerAddrs"]["0"] == address

    host, vip_port = _vip(address)
    assert vip_port == server.fast_port
    vip = await RawClient.connect(host, vip_port)
    try:
        by_id = await vip.call(
            RawClient.request(
                RequestCode.QUERY_MESSAGE,
                {
                    "topic": "topic_c-1",
                    "key": target["uniqKey"],
                    "maxNum": "32",
                    "beginTimestamp": "0",
                    "endTimestamp": str(2**63 - 1),
                    "_UNIQUE_KEY_QUERY": "true",
                },
            )
        )
        assert by_id.code == ResponseCode.SUCCESS
        assert {"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"} <= set(by_id.ext_fields or {})
        found = [
            m
            for m in decode_messages(bytes(by_id.body or b""))
            if m.properties.get("UNIQ_KEY") == target["uniqKey"]
        ]
        assert [m.commit_log_offset for m in found][:1] == [target["commitLogOffset"]]

        key = target["keys"].split(" ")[0]
        by_key = await vip.call(
            RawClient.request(
                RequestCode.QUERY_MESSAGE,
                {
                    "topic": "topic_c-1",
                    "key": key,
                    "maxNum": "64",
                    "beginTimestamp": "0",
                    "endTimestamp": str(int(time.time() * 1000)),
                    "_UNIQUE_KEY_QUERY": "false",
                },
            )
        )
        assert by_key.code == ResponseCode.SUCCESS
        body = bytes(by_key.body or b"")
        offsets = []
        pos = 0
        while pos < len(body):
            offsets.append(struct.unpack_from(">q", body, pos + 28)[0])
            pos += struct.unpack_from(">i", body, pos)[0]
        assert target["commitLogOffset"] in offsets
    finally:
        await vip.close()
