"""What a raw gRPC test sends: the metadata every 5.x client call carries, and a SendMessageRequest."""

from __future__ import annotations

from server.grpc.v2 import definition, service

#: The metadata the Proxy requires of every call (a client id, the protocol).
META = (("x-mq-client-id", "raw-test-client"), ("x-mq-protocol", "GRPC_V2"))


def send_request(topic: str = "Plain", body: bytes = b"hi", **system: object) -> service.SendMessageRequest:
    """A SendMessageRequest of one NORMAL message, system properties overridable by keyword."""
    msg = definition.Message(topic=definition.Resource(name=topic), body=body)
    msg.system_properties.message_id = "01RAWTEST0000000000000000001"
    msg.system_properties.message_type = 1  # NORMAL
    for name, value in system.items():
        setattr(msg.system_properties, name, value)
    return service.SendMessageRequest(messages=[msg])
