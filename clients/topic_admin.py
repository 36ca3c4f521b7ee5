"""The topic side of ``DefaultMQAdminExt`` (4.9.7): create, delete, list topics, cluster info.

What ``mqadmin updateTopic``, ``deleteTopic``, ``topicList`` and ``clusterList`` ask, request by
request as ``MQClientAPIImpl`` sends them: UPDATE_AND_CREATE_TOPIC and DELETE_TOPIC_IN_BROKER to a
broker, DELETE_TOPIC_IN_NAMESRV, GET_ALL_TOPIC_LIST_FROM_NAMESERVER and GET_BROKER_CLUSTER_INFO to
the name servers (the first that answers), GET_BROKER_RUNTIME_INFO to a broker. A refusal raises the
class of its response code (``clients.response_errors``). Bodies are fastjson's (bare numeric map
keys), normalised before decoding (``clients.route.quote_bare_keys``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from clients.errors import TransportError, UsageError
from clients.namesrv import NamesrvClient
from clients.response_errors import expect_success
from clients.route import MASTER_ID, quote_bare_keys
from protocol.codes import RequestCode

#: ``PermName``: 2 = write, 4 = read, 6 = both (and 1 = inherit).
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
DEFAULT_TOPIC = "TBW102"
#: ``CommandUtil.ERROR_MESSAGE``: a cluster the name server does not know.
NO_CLUSTER_MESSAGE = "Make sure the specified clusterName exists or the name server connected to is correct."


@dataclass
class TopicSpec:
    """``TopicConfig`` as ``updateTopic`` builds it: 8 and 8 queues, RW, unless told otherwise."""

    name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def ext_fields(self) -> dict[str, str]:
        """``MQClientAPIImpl.createTopic``'s request header."""
        return {
            "topic": self.name,
            "defaultTopic": DEFAULT_TOPIC,
            "readQueueNums": str(self.read_queue_nums),
            "writeQueueNums": str(self.write_queue_nums),
            "perm": str(self.perm),
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": str(self.topic_sys_flag),
            "order": "true" if self.order else "false",
        }

    def java_string(self) -> str:
        """``TopicConfig.toString()``, as ``updateTopic`` prints it."""
        return (
            f"TopicConfig [topicName={self.name}, readQueueNums={self.read_queue_nums}, "
            f"writeQueueNums={self.write_queue_nums}, perm={perm_to_string(self.perm)}, "
            f"topicFilterType={self.topic_filter_type}, topicSysFlag={self.topic_sys_flag}, "
            f"order={'true' if self.order else 'false'}]"
        )


def perm_to_string(perm: int) -> str:
    """``PermName.perm2String``: R, W, X (inherit) or '-' each."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


def topic_sys_flag(unit: bool, unit_sub: bool) -> int:
    """``TopicSysFlag.buildSysFlag``: bit 0 unit, bit 1 unit sub."""
    return (1 if unit else 0) | (2 if unit_sub else 0)


def decode_fastjson(body: bytes | None) -> Any:
    """A fastjson body (bare numeric keys allowed) as Python values; {} for none."""
    if not body:
        return {}
    return json.loads(quote_bare_keys(bytes(body).decode("utf-8")))


@dataclass
class ClusterInfo:
    """``ClusterInfo``: broker name -> (cluster, {broker id: address}); cluster -> broker names,
    each table in the order of the name server's JSON."""

    brokers: dict[str, tuple[str, dict[int, str]]] = field(default_factory=dict)
    clusters: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def decode(cls, body: bytes | None) -> ClusterInfo:
        data = decode_fastjson(body)
        brokers = {
            name: (
                str(b.get("cluster") or ""),
                {int(k): str(v) for k, v in (b.get("brokerAddrs") or {}).items()},
            )
            for name, b in (data.get("brokerAddrTable") or {}).items()
        }
        clusters = {name: list(names or []) for name, names in (data.get("clusterAddrTable") or {}).items()}
        return cls(brokers, clusters)

    def master_addrs(self, cluster: str) -> list[str] | None:
        """``CommandUtil.fetchMasterAddrByClusterName``: the masters of ``cluster``; None when the
        name server does not know the cluster."""
        names = self.clusters.get(cluster)
        if names is None:
            return None
        out: list[str] = []
        for name in names:
            broker = self.brokers.get(name)
            if broker is not None and broker[1].get(MASTER_ID) and broker[1][MASTER_ID] not in out:
                out.append(broker[1][MASTER_ID])
        return out

    def cluster_of_broker(self, broker_name: str) -> str | None:
        for cluster, names in self.clusters.items():
            if broker_name in names:
                return cluster
        return None


class TopicAdmin(NamesrvClient):
    """The topic admin requests of ``DefaultMQAdminExt`` over a name server list."""

    async def _namesrv_invoke(self, code: int, ext_fields: dict[str, str] | None = None) -> bytes | None:
        """Ask the first name server that can be reached; its SUCCESS answer's body."""
        if not self.namesrv_addrs:
            raise UsageError("no name server address given (use -n host:port or NAMESRV_ADDR)")
        last_error: TransportError | None = None
        for addr in self.namesrv_addrs:
            try:
                response = await self.client.invoke(addr, code, ext_fields, timeout=self.timeout)
            except TransportError as exc:
                last_error = exc
                continue
            return expect_success(response, addr).body
        assert last_error is not None
        raise last_error

    async def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (``examineBrokerClusterInfo``)."""
        return ClusterInfo.decode(await self._namesrv_invoke(RequestCode.GET_BROKER_CLUSTER_INFO))

    async def topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (``fetchAllTopicList``), in the answer's order."""
        data = decode_fastjson(await self._namesrv_invoke(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        return [str(t) for t in data.get("topicList") or []]

    async def create_topic(self, broker_addr: str, spec: TopicSpec) -> None:
        """UPDATE_AND_CREATE_TOPIC (``createAndUpdateTopicConfig``)."""
        response = await self.client.invoke(
            broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, spec.ext_fields(), timeout=self.timeout
        )
        expect_success(response, broker_addr)

    async def delete_topic_in_broker(self, broker_addr: str, topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER."""
        response = await self.client.invoke(
            broker_addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}, timeout=self.timeout
        )
        expect_success(response, broker_addr)

    async def delete_topic_in_namesrv(self, topic: str) -> None:
        """DELETE_TOPIC_IN_NAMESRV to every name server (``deleteTopicInNameServer``)."""
        for addr in self.namesrv_addrs:
            response = await self.client.invoke(
                addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic}, timeout=self.timeout
            )
            expect_success(response, addr)

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO (``fetchBrokerRuntimeStats``): the KVTable's table."""
        response = await self.client.invoke(
            broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO, timeout=self.timeout
        )
        data = decode_fastjson(expect_success(response, broker_addr).body)
        return {str(k): str(v) for k, v in (data.get("table") or {}).items()}
