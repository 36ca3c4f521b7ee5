"""The ``apache.rocketmq.v2`` protocol: messages, enums and the service, as generated code.

The official Python client (``rocketmq-python-client``) ships the stubs generated from
apache/rocketmq-apis as ``rocketmq.grpc_protocol``; the server uses those rather than generating its
own, so server and client read the same ``.proto`` and nothing is compiled at install time. This is
the one module that names them: the rest of ``server.grpc`` imports from here.
"""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2 as definition
from rocketmq.grpc_protocol import service_pb2 as service
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc

Code = definition.Code
Permission = definition.Permission
MessageType = definition.MessageType
ClientType = definition.ClientType
AddressScheme = definition.AddressScheme
Encoding = definition.Encoding
DigestType = definition.DigestType

#: The service's full name, as in a call's path (``/apache.rocketmq.v2.MessagingService/QueryRoute``).
SERVICE_NAME = "apache.rocketmq.v2.MessagingService"

__all__ = [
    "SERVICE_NAME",
    "AddressScheme",
    "ClientType",
    "Code",
    "DigestType",
    "Encoding",
    "MessageType",
    "Permission",
    "definition",
    "service",
    "service_grpc",
]
