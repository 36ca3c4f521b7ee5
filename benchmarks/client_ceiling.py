"""How fast can ``rmq-query bench`` itself go? The load generator against a do-nothing server.

A load generator must be faster than what it measures, or the figures describe the generator. This
script starts, in a child process, the cheapest possible remoting server (asyncio, no decoding: it
reads each request's length and opaque and answers with a pre-encoded VIEW_MESSAGE_BY_ID response of
a realistic size, opaque patched in), then drives it with ``clients.load.run_load`` at several
connection x depth settings and reports the generator's throughput and its CPU time per request.

Run: ``python -m benchmarks.client_ceiling [--seconds S] [--body BYTES]``
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import struct
import time

from clients.cli.bench import loop_factory_for
from clients.load import run_load, view_factory
from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from protocol.frame import encode_frame

_INT = struct.Struct(">i")
#: In a ROCKETMQ header the opaque sits after code (2), language (1) and version (2).
_OPAQUE_AT = 8 + 5


class _Ceiling(asyncio.Protocol):
    def __init__(self, response: bytes) -> None:
        self.response = response
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        out = []
        pos = 0
        while len(buf) - pos >= 4:
            length = _INT.unpack_from(buf, pos)[0]
            if len(buf) - pos < 4 + length:
                break
            opaque = buf[pos + _OPAQUE_AT : pos + _OPAQUE_AT + 4]
            answer = bytearray(self.response)
            answer[_OPAQUE_AT : _OPAQUE_AT + 4] = opaque
            out.append(answer)
            pos += 4 + length
        del buf[:pos]
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


def _serve(port_queue: multiprocessing.Queue, body_size: int, seconds: float) -> None:
    response = encode_frame(
        RemotingCommand(
            code=0, flag=1, version=407, body=bytes(body_size), serialize_type=SerializeType.ROCKETMQ
        )
    )

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Ceiling(response), "127.0.0.1", 0)
        port_queue.put(server.sockets[0].getsockname()[1])
        await asyncio.sleep(seconds)
        server.close()

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per setting (default 3)")
    parser.add_argument("--body", type=int, default=500, help="response body bytes (default 500)")
    parser.add_argument(
        "--loop", choices=("auto", "asyncio", "uvloop"), default="auto",
        help="the generator's event loop, as rmq-query bench --loop (default auto)",
    )  # fmt: skip
    args = parser.parse_args()
    settings = [(1, 1), (1, 8), (16, 8), (64, 4)]
    queue: multiprocessing.Queue = multiprocessing.Queue()
    budget = args.seconds * len(settings) + 30
    child = multiprocessing.Process(target=_serve, args=(queue, args.body, budget), daemon=True)
    child.start()
    try:
        port = queue.get(timeout=10)
        addr = f"127.0.0.1:{port}"
        factory = view_factory(list(range(0, 1 << 20, 512)), random.Random(1))
        loop_factory = loop_factory_for(args.loop)
        loop_name = "asyncio" if loop_factory is None else "uvloop"
        print(f"ceiling server: pre-encoded {args.body}-byte answers, {args.seconds:g} s per setting")
        print(f"generator loop: {loop_name}")
        print(f"{'conns x depth':<14} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'client CPU us/req':>18}")
        for connections, depth in settings:
            cpu = time.process_time()
            with asyncio.Runner(loop_factory=loop_factory) as runner:
                report = runner.run(
                    run_load(
                        addr,
                        factory,
                        kind="view",
                        connections=connections,
                        depth=depth,
                        seconds=args.seconds,
                        serialize_type=SerializeType.ROCKETMQ,
                    )
                )
            used = time.process_time() - cpu
            per_request = used / report.requests * 1e6 if report.requests else 0.0
            print(
                f"{f'{connections} x {depth}':<14} {report.rate:>10.0f} {report.percentile_ms(50):>8.3f}"
                f" {report.percentile_ms(99):>8.3f} {per_request:>18.1f}"
            )
    finally:
        child.terminate()
        child.join(5)


if __name__ == "__main__":
    main()
