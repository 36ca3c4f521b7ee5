"""SEND throughput: SEND_MESSAGE_V2 requests from C connections x D in flight for S seconds.

Against ``serve --writable`` or a Java broker (any address that answers SEND). The requests are the
Java producer's (``protocol.send_message``: header V2, HashMap-ordered properties with a fresh
UNIQ_KEY and KEYS per message). The generator is Python (one process, one core), so past a few
thousand SENDs/s it may be the limit, not the server: compare servers with the same generator.

    python -m benchmarks.send_load --addr 127.0.0.1:31711 --topic LoadTopic --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from clients.client import RemotingClient
from protocol.codes import RequestCode, ResponseCode
from protocol.message_id import UniqueIdGenerator
from protocol.send_message import SendMessageRequestHeader, client_properties


async def run(
    addr: str, topic: str, conns: int, depth: int, seconds: float, body_size: int, queues: int
) -> dict:
    ids = UniqueIdGenerator()
    body = b"x" * body_size
    counts = {"ok": 0, "errors": 0}
    codes: dict[int, int] = {}
    latencies: list[float] = []
    stop_at = 0.0

    async def worker(client: RemotingClient, w: int) -> None:
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            key = f"load-{w}-{n}"
            header = SendMessageRequestHeader(
                "load_group", topic, "TBW102", 4, n % queues, 0, int(time.time() * 1000), 0,
                client_properties(key, "TagL", None, ids.next_id()), 0, False, None, False, "broker-a",
            )  # fmt: skip
            t0 = time.perf_counter()
            response = await client.invoke(
                addr, RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(v2=True), body, timeout=10
            )
            latencies.append(time.perf_counter() - t0)
            if response.code == ResponseCode.SUCCESS:
                counts["ok"] += 1
            else:
                counts["errors"] += 1
                codes[response.code] = codes.get(response.code, 0) + 1

    clients = [RemotingClient() for _ in range(conns)]
    for client in clients:
        await client.connection(addr)
    start = time.monotonic()
    stop_at = start + seconds
    await asyncio.gather(*(worker(c, i * depth + d) for i, c in enumerate(clients) for d in range(depth)))
    elapsed = time.monotonic() - start
    for client in clients:
        await client.close()
    latencies.sort()
    return {
        "addr": addr,
        "conns": conns,
        "depth": depth,
        "seconds": round(elapsed, 2),
        "sends": counts["ok"],
        "sends_per_s": round(counts["ok"] / elapsed),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 2) if latencies else None,
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 2) if latencies else None,
        "errors": counts["errors"],
        "codes": codes,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--addr", required=True)
    parser.add_argument("--topic", default="LoadTopic")
    parser.add_argument("--conns", type=int, default=4)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--body-size", type=int, default=256)
    parser.add_argument("--queues", type=int, default=4)
    args = parser.parse_args()
    result = asyncio.run(
        run(args.addr, args.topic, args.conns, args.depth, args.seconds, args.body_size, args.queues)
    )
    print(json.dumps(result))
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
