"""Topic routes as a name server answers GET_ROUTEINFO_BY_TOPIC, and the broker choice made from them.

A Java name server (fastjson) writes the ``brokerAddrs`` map with bare numeric keys
(``{0:"h:p"}``) unless the request asked for standard JSON, so the body is normalised (bare keys
quoted, strings untouched) before strict decoding. ``BrokerData.select_broker_addr`` follows the Java
client: the master (id 0) if present, otherwise any replica.
"""

from __future__ import annotations

import random

import msgspec

from clients.errors import RouteDecodeError

MASTER_ID = 0


class BrokerData(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    """One broker group: its cluster, its name and its addresses by broker id (0 = master)."""

    broker_name: str = ""
    cluster: str | None = None
    broker_addrs: dict[int, str] = msgspec.field(default_factory=dict)

    def select_broker_addr(self, rng: random.Random | None = None) -> str | None:
        """The master's address, else a random replica's, else ``None`` (Java's ``selectBrokerAddr``)."""
        addr = self.broker_addrs.get(MASTER_ID)
        if addr:
            return addr
        addrs = [a for a in self.broker_addrs.values() if a]
        if not addrs:
            return None
        return (rng or random).choice(addrs)


class QueueData(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    """Queue counts and permissions of one broker for the topic (kept for display only)."""

    broker_name: str = ""
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 0
    topic_sys_flag: int = 0


class TopicRouteData(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    """The name server's answer for one topic."""

    broker_datas: list[BrokerData] = msgspec.field(default_factory=list)
    queue_datas: list[QueueData] | None = None

    def broker_addrs(self, cluster: str | None = None) -> list[str]:
        """One address per broker group (master first), optionally only those of ``cluster``."""
        addrs: list[str] = []
        for broker in self.broker_datas:
            if cluster and broker.cluster != cluster:
                continue
            addr = broker.select_broker_addr()
            if addr:
                addrs.append(addr)
        return addrs


_DECODER = msgspec.json.Decoder(TopicRouteData)


def quote_bare_keys(text: str) -> str:
    """Quote object keys written as bare numbers (fastjson's ``{0:"a"}``), leaving strings alone."""
    out: list[str] = []
    i = 0
    n = len(text)
    in_string = False
    expect_key = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
            expect_key = False
        elif ch in "{,":
            expect_key = True
        elif expect_key and (ch == "-" or ch.isdigit()):
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            out.append(f'"{text[i:j]}"')
            i = j
            expect_key = False
            continue
        elif not ch.isspace():
            expect_key = False
        out.append(ch)
        i += 1
    return "".join(out)


def decode_route(body: bytes | None) -> TopicRouteData:
    """Decode a GET_ROUTEINFO_BY_TOPIC body in either the legacy or the standard JSON form."""
    if not body:
        raise RouteDecodeError("empty topic route body")
    try:
        text = bytes(body).decode("utf-8")
        return _DECODER.decode(quote_bare_keys(text))
    except (UnicodeDecodeError, msgspec.DecodeError) as exc:
        raise RouteDecodeError(f"undecodable topic route body: {exc}") from exc
