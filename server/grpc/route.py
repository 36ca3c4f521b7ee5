"""QueryRoute's message queues from a topic's config, as ``RouteActivity`` builds them; sans-IO.

One broker (this server) with one address, the gRPC endpoint the client should dial. A topic's
queues are split by its perm as the Proxy splits a ``QueueData``: when the perm allows both, the
read-only queues first (``read - rw``), then the write-only ones (``write - rw``), then the
read-write ones (``rw = min(read, write)``), numbered in that order; all read or all write queues for
a perm with one of them; as many as the larger count (at least one) with Permission.NONE for a
topic neither readable nor writable. Every queue carries the message types the
topic accepts (its ``message.type`` attribute, ``conversion.TOPIC_MESSAGE_TYPES``).
"""

from __future__ import annotations

from dataclasses import dataclass

from server.grpc.conversion import TOPIC_MESSAGE_TYPES
from server.grpc.v2 import AddressScheme, MessageType, Permission, definition

PERM_WRITE = 2
PERM_READ = 4

#: ``MixAll.MASTER_ID``: the one broker id this server routes to.
MASTER_ID = 0


@dataclass(frozen=True, slots=True)
class TopicRouteConfig:
    """What a route needs of a topic: its queue counts, perm and 5.x message type."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: str = "NORMAL"


def permission_of(perm: int) -> int:
    """``RouteActivity.convertToPermission``."""
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return Permission.READ_WRITE
    if readable:
        return Permission.READ
    if writable:
        return Permission.WRITE
    return Permission.NONE


def accepted_types(message_type: str) -> list[int]:
    """``parseTopicMessageType``: UNSPECIFIED for a type the Proxy does not know."""
    return list(TOPIC_MESSAGE_TYPES.get(message_type, (MessageType.MESSAGE_TYPE_UNSPECIFIED,)))


def address_scheme(host: str) -> int:
    """IPv4, IPv6 or a domain name, as an ``Endpoints`` names its addresses."""
    parts = host.split(".")
    if len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts):
        return AddressScheme.IPv4
    if ":" in host:
        return AddressScheme.IPv6
    return AddressScheme.DOMAIN_NAME


def broker(name: str, host: str, port: int) -> definition.Broker:
    """This server as the route's broker: its name, the master id and the gRPC endpoint."""
    endpoints = definition.Endpoints(
        scheme=address_scheme(host), addresses=[definition.Address(host=host, port=port)]
    )
    return definition.Broker(name=name, id=MASTER_ID, endpoints=endpoints)


def message_queues(
    topic: definition.Resource, config: TopicRouteConfig, to: definition.Broker
) -> list[definition.MessageQueue]:
    """``RouteActivity.genMessageQueueFromQueueData`` for this server's one broker."""
    read, write, perm = config.read_queue_nums, config.write_queue_nums, config.perm
    r = w = rw = n = 0
    if perm & PERM_READ and perm & PERM_WRITE:
        rw = min(read, write)
        r, w = read - rw, write - rw
    elif perm & PERM_WRITE:
        w = write
    elif perm & PERM_READ:
        r = read
    else:
        n = max(1, read, write)
    types = accepted_types(config.message_type)
    queues: list[definition.MessageQueue] = []
    for count, permission in (
        (r, Permission.READ),
        (w, Permission.WRITE),
        (rw, Permission.READ_WRITE),
        (n, Permission.NONE),
    ):
        for _ in range(count):
            queues.append(
                definition.MessageQueue(
                    topic=topic,
                    id=len(queues),
                    permission=permission,
                    broker=to,
                    accept_message_types=types,
                )
            )
    return queues
