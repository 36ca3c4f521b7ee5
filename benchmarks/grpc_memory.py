"""A ``serve`` process's memory under concurrent large gRPC SendMessage calls (issue 31, item 1).

Starts ``python -m clients.cli serve --writable --grpc-port 0`` from ``--repo`` (default: this
checkout; give an older one, e.g. ``git archive 423d4d6 | tar -x -C /tmp/old``, to compare) over an
empty store, then sends ``--calls`` SendMessage calls of ``--mib`` MiB each at once, spread over
``--channels`` connections, with the official generated stub, and prints one JSON line: what the
calls got (the response's status code name, or the gRPC status of a failed call), the seconds they
took, and the server's resident memory before, at its peak (``VmHWM``) and after, in MiB.

* ``--acl``: the server checks signatures (a one-account ``plain_acl.yml``) and the calls carry
  none: each is answered UNAUTHORIZED, which must not cost its message.
* ``--holders K``: first K calls on K connections of their own are opened and never send their
  message, taking the room of K messages in the budget; the big calls then find the rest, and what
  the holders got is reported too (RESOURCE_EXHAUSTED once their room was wanted for a second).
* anything after ``--`` goes to ``serve`` (``--grpc-max-request-mib 32``, ...).

    python -m benchmarks.grpc_memory --calls 60 --mib 15
    python -m benchmarks.grpc_memory --calls 60 --mib 15 --acl
    python -m benchmarks.grpc_memory --calls 150 --mib 15 --channels 10
    python -m benchmarks.grpc_memory --calls 12 --mib 15 --holders 2 -- --grpc-max-request-mib 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from server.grpc.v2 import Code, definition, service, service_grpc

REPO = Path(__file__).resolve().parents[1]
META = (("x-mq-client-id", "grpc-memory-bench"), ("x-mq-protocol", "GRPC_V2"))
SEND = "/apache.rocketmq.v2.MessagingService/SendMessage"
#: One account that may do nothing unsigned: every call without a signature is UNAUTHORIZED.
PLAIN_ACL = """\
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
"""
STARTUP_TIMEOUT = 30.0
#: Each channel its own connection (grpc shares one between channels to the same address by default).
CHANNEL_OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.use_local_subchannel_pool", 1)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--mib", type=float, default=15.0)
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--acl", action="store_true")
    parser.add_argument("--holders", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0, help="each call's deadline (s)")
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("serve_args", nargs="*", help="after --: more serve flags")
    return parser.parse_args(argv)


def memory_mib(pid: int) -> dict[str, float]:
    """The process's VmRSS and VmHWM (its peak) in MiB."""
    fields: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = round(int(rest.split()[0]) / 1024, 1)
    return fields


def big_request(mib: float) -> service.SendMessageRequest:
    message = definition.Message(topic=definition.Resource(name="Big"), body=b"x" * int(mib * 1024 * 1024))
    message.system_properties.message_id = "01GRPCMEMORY00000000000001"
    message.system_properties.message_type = 1  # NORMAL
    return service.SendMessageRequest(messages=[message])


async def start_server(
    repo: Path, work: Path, acl: bool, extra: list[str]
) -> tuple[asyncio.subprocess.Process, int]:
    """``serve --writable`` on an empty store; the process and its gRPC port."""
    args = ["--writable", "--store", str(work / "store"), "--port", "0", "--grpc-port", "0"]
    if acl:
        (work / "plain_acl.yml").write_text(PLAIN_ACL, encoding="utf-8")
        args += ["--acl", str(work / "plain_acl.yml")]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clients.cli", "serve", *args, *extra,
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    grpc_port = 0
    while not grpc_port:
        line = (await asyncio.wait_for(proc.stdout.readline(), STARTUP_TIMEOUT)).decode()
        if not line:
            raise RuntimeError("serve exited before announcing its gRPC port")
        if line.startswith("GRPC_ENDPOINTS="):
            grpc_port = int(line.strip().rsplit(":", 1)[1])
    return proc, grpc_port


async def _never_sends() -> AsyncIterator[bytes]:
    await asyncio.Event().wait()
    yield b""  # pragma: no cover - never reached


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario of ``args``; the JSON line's fields."""
    with tempfile.TemporaryDirectory(prefix="grpc-memory-") as tmp:
        proc, port = await start_server(args.repo, Path(tmp), args.acl, list(args.serve_args))
        channels = [
            grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)
            for _ in range(max(1, args.channels) + args.holders)
        ]
        holders: list[Any] = []
        try:
            stubs = [service_grpc.MessagingServiceStub(ch) for ch in channels[: max(1, args.channels)]]
            for channel in channels:  # connected before the calls start: none fails as UNAVAILABLE
                await asyncio.wait_for(channel.channel_ready(), STARTUP_TIMEOUT)
            for channel in channels[max(1, args.channels) :]:
                holders.append(channel.stream_unary(SEND)(_never_sends(), metadata=META))
            await asyncio.sleep(0.5 if holders else 0)  # the holders' calls reach the server first
            before = memory_mib(proc.pid)
            request = big_request(args.mib)

            async def one(i: int) -> str:
                try:
                    answer = await stubs[i % len(stubs)].SendMessage(
                        request, metadata=META, timeout=args.timeout
                    )
                except grpc.aio.AioRpcError as failed:
                    return failed.code().name
                return Code.Name(answer.status.code)

            started = time.monotonic()
            outcomes = Counter(await asyncio.gather(*(one(i) for i in range(args.calls))))
            seconds = round(time.monotonic() - started, 2)
            peak = memory_mib(proc.pid)
            held_outcomes: Counter[str] = Counter()
            for held in holders:
                if held.done():
                    try:
                        await held
                        held_outcomes["OK"] += 1
                    except grpc.aio.AioRpcError as failed:
                        held_outcomes[failed.code().name] += 1
                else:
                    held_outcomes["still open"] += 1
                    held.cancel()
            await asyncio.sleep(1.0)
            after = memory_mib(proc.pid)
        finally:
            for channel in channels:
                await channel.close()
            if proc.returncode is None:
                proc.terminate()
                await asyncio.wait_for(proc.wait(), STARTUP_TIMEOUT)
    return {
        "calls": args.calls,
        "mib": args.mib,
        "channels": args.channels,
        "acl": args.acl,
        "holders": args.holders,
        "serve_args": list(args.serve_args),
        "outcomes": dict(outcomes),
        "holder_outcomes": dict(held_outcomes) if args.holders else {},
        "seconds": seconds,
        "rss_before_mib": before["VmRSS"],
        "rss_peak_mib": peak["VmHWM"],
        "rss_after_mib": after["VmRSS"],
    }


def main(argv: list[str] | None = None) -> None:
    print(json.dumps(asyncio.run(run(parse_args(argv)))))


if __name__ == "__main__":
    main()
