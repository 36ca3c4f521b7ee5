"""What raw gRPC tests send: the metadata of a 5.x client and a minimal SendMessage request."""

from __future__ import annotations

from server.grpc.v2 import definition, service

META = (("x-mq-client-id", "raw-test-client"), ("x-mq-protocol", "GRPC_V2"))


def send_request(topic: str = "Plain", body: bytes = b"hi", **system: object) -> service.SendMessageRequest:
    msg = definition.Message(topic=definition.Resource(name=topic), body=body)
    msg.system_properties.message_id = "01RAWTEST0000000000000000001"
    msg.system_properties.message_type = 1  # NORMAL
    for name, value in system.items():
        setattr(msg.system_properties, name, value)
    return service.SendMessageRequest(messages=[msg])
