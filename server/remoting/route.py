"""The name-server answers: topic route and cluster table JSON, compact and acceptable to every client.

The Java client (fastjson) reads quoted or unquoted map keys, the Go client breaks on whitespace, and
the Rust client insists on ``filterServerTable`` and ``enableActingMaster``; so the JSON is compact,
keys are quoted, the master's ``brokerAddrs`` key is ``"0"`` and every list is present (never null).
Field order follows fastjson's sorted output, so the bytes match what the real name server sends
apart from the extra ``enableActingMaster`` flag.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from server.identity import BrokerIdentity

_encode = msgspec.json.Encoder().encode

#: ``MixAll.MASTER_ID``: the key of the master's address in ``BrokerData.brokerAddrs``.
MASTER_ID = "0"


def _broker_data(identity: BrokerIdentity) -> dict[str, object]:
    return {
        "brokerAddrs": {MASTER_ID: identity.address},
        "brokerName": identity.broker_name,
        "cluster": identity.cluster,
        "enableActingMaster": False,
    }


def topic_route_json(
    identity: BrokerIdentity, read_queue_nums: int | None = None, write_queue_nums: int | None = None
) -> bytes:
    """``TopicRouteData`` for a topic served by this one broker with the topic's read and write
    queue counts (the identity's default when None; the write count follows the read count unless
    given, as for a topic the store holds; the write path passes the topic's own counts)."""
    read_nums = identity.queue_nums if read_queue_nums is None else read_queue_nums
    write_nums = read_nums if write_queue_nums is None else write_queue_nums
    return _encode(
        {
            "brokerDatas": [_broker_data(identity)],
            "filterServerTable": {},
            "queueDatas": [
                {
                    "brokerName": identity.broker_name,
                    "perm": identity.perm,
                    "readQueueNums": read_nums,
                    "topicSysFlag": 0,
                    "writeQueueNums": write_nums,
                }
            ],
        }
    )


def cluster_info_json(identity: BrokerIdentity) -> bytes:
    """``ClusterInfo``: the broker table and the cluster → broker names table (dashboard by-id path)."""
    return _encode(
        {
            "brokerAddrTable": {identity.broker_name: _broker_data(identity)},
            "clusterAddrTable": {identity.cluster: [identity.broker_name]},
        }
    )


@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker's ``QueueData`` for a topic: its queue counts, perm and sys flag."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


def merged_route_json(held: Sequence[tuple[BrokerIdentity, QueueData]]) -> bytes:
    """``TopicRouteData`` of a topic several brokers hold (in the name server's order): a
    ``QueueData`` and a ``BrokerData`` per broker, as the name server merges its registrations."""
    return _encode(
        {
            "brokerDatas": [_broker_data(identity) for identity, _ in held],
            "filterServerTable": {},
            "queueDatas": [
                {
                    "brokerName": identity.broker_name,
                    "perm": data.perm,
                    "readQueueNums": data.read_queue_nums,
                    "topicSysFlag": data.topic_sys_flag,
                    "writeQueueNums": data.write_queue_nums,
                }
                for identity, data in held
            ],
        }
    )


def cluster_table_json(identities: Sequence[BrokerIdentity]) -> bytes:
    """``ClusterInfo`` of several brokers (in the name server's order), each under its cluster."""
    clusters: dict[str, list[str]] = {}
    for identity in identities:
        clusters.setdefault(identity.cluster, []).append(identity.broker_name)
    return _encode(
        {
            "brokerAddrTable": {identity.broker_name: _broker_data(identity) for identity in identities},
            "clusterAddrTable": clusters,
        }
    )


def topic_list_json(topics: list[str]) -> bytes:
    """``TopicList`` as the name server writes it (``brokerAddr`` null, so absent)."""
    return _encode({"topicList": topics})
