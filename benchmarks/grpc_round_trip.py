"""One message at a time through the server and back: gRPC send -> receive -> ack vs remoting send -> pull.

``--mode grpc`` speaks the Proxy's MessagingService with the raw grpcio stubs (the official Python
client adds its own threads and event loop, which would be measured instead of the server):
SendMessage, then a ReceiveMessage stream of batch 1 (the message is visible once the SEND is
answered, so the receive never long-polls), then AckMessage with its receipt handle. ``--mode
remoting`` is our remoting client doing what a 4.x consumer does for the same message:
SEND_MESSAGE_V2, then a PULL_MESSAGE at the offset the SEND answered. Both are sequential on one
connection, so a round trip is the latency of its calls together; the report has the round trips per
second and the p50/p99 of one round trip.

    python -m benchmarks.grpc_round_trip --mode grpc --addr 127.0.0.1:GRPC_PORT --seconds 5
    python -m benchmarks.grpc_round_trip --mode remoting --addr 127.0.0.1:PORT --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import grpc
from google.protobuf.duration_pb2 import Duration

from clients.admin import QueryAdmin
from clients.message_queue import MessageQueue
from clients.producer import Producer
from protocol.message_id import UniqueIdGenerator
from server.grpc.v2 import Code, MessageType, definition, service, service_grpc

META = (("x-mq-client-id", "bench-round-trip"), ("x-mq-protocol", "GRPC_V2"))


def _summary(latencies: list[float], seconds: float, errors: int) -> dict:
    latencies.sort()
    n = len(latencies)
    return {
        "round_trips": n,
        "per_second": round(n / seconds, 1),
        "p50_ms": round(latencies[n // 2] * 1000, 2) if n else None,
        "p99_ms": round(latencies[min(n - 1, n * 99 // 100)] * 1000, 2) if n else None,
        "errors": errors,
    }


async def grpc_round_trips(addr: str, topic: str, group: str, seconds: float, body: bytes) -> dict:
    ids = UniqueIdGenerator()
    resource, consumer_group = definition.Resource(name=topic), definition.Resource(name=group)
    receive = service.ReceiveMessageRequest(
        group=consumer_group,
        message_queue=definition.MessageQueue(topic=resource, id=-1),
        filter_expression=definition.FilterExpression(type=definition.FilterType.TAG, expression="*"),
        batch_size=1,
        invisible_duration=Duration(seconds=30),
        long_polling_timeout=Duration(seconds=5),
    )
    latencies: list[float] = []
    errors = 0
    async with grpc.aio.insecure_channel(addr) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        stop_at = time.monotonic() + seconds
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            message = definition.Message(topic=resource, body=body)
            message.system_properties.message_id = ids.next_id()
            message.system_properties.message_type = MessageType.NORMAL
            sent = await stub.SendMessage(
                service.SendMessageRequest(messages=[message]), metadata=META, timeout=10
            )
            handles = [
                r.message.system_properties.receipt_handle
                async for r in stub.ReceiveMessage(receive, metadata=META, timeout=10)
                if r.WhichOneof("content") == "message"
            ]
            acked = Code.OK
            for handle in handles:
                entry = service.AckMessageEntry(receipt_handle=handle)
                answer = await stub.AckMessage(
                    service.AckMessageRequest(group=consumer_group, topic=resource, entries=[entry]),
                    metadata=META,
                    timeout=10,
                )
                acked = answer.status.code
            if sent.status.code != Code.OK or len(handles) != 1 or acked != Code.OK:
                errors += 1
                continue
            latencies.append(time.perf_counter() - started)
    return _summary(latencies, seconds, errors)


async def remoting_round_trips(addr: str, topic: str, seconds: float, body: bytes) -> dict:
    latencies: list[float] = []
    errors = 0
    async with Producer(addr, timeout=10.0) as producer, QueryAdmin(addr) as admin:
        broker_name = (await admin.get_route(topic)).broker_datas[0].broker_name
        queue = MessageQueue(topic, broker_name, 0)
        stop_at = time.monotonic() + seconds
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            sent = await producer.send(topic, body, queue_id=0)
            assert sent is not None
            pulled = await admin.pull(queue, "*", sent.queue_offset, 1)
            if len(pulled.messages) != 1 or pulled.messages[0].queue_offset != sent.queue_offset:
                errors += 1
                continue
            latencies.append(time.perf_counter() - started)
    return _summary(latencies, seconds, errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("grpc", "remoting"), required=True)
    parser.add_argument("--addr", required=True, help="the gRPC endpoints (grpc) or the remoting port")
    parser.add_argument("--topic", default="RoundTrip")
    parser.add_argument("--group", default="RoundTripGroup")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--body-size", type=int, default=256)
    args = parser.parse_args()
    body = b"x" * args.body_size
    if args.mode == "grpc":
        result = asyncio.run(grpc_round_trips(args.addr, args.topic, args.group, args.seconds, body))
    else:
        result = asyncio.run(remoting_round_trips(args.addr, args.topic, args.seconds, body))
    print(json.dumps({"mode": args.mode, **result}))


if __name__ == "__main__":
    main()
