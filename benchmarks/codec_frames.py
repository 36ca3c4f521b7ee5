"""Frames decoded and encoded per second, JSON and ROCKETMQ headers, small and 64 KiB bodies.

Run: ``python -m benchmarks.codec_frames`` (``--seconds`` and ``--repeats`` bound each
figure: the best of ``repeats`` rounds of ``seconds`` CPU time).

The small frame is a QUERY_MESSAGE request as a Java client sends it (six extFields, no body); the
large one is a QUERY_MESSAGE answer carrying 64 KiB of records. Decoding feeds a stream of such
frames in 64 KiB chunks, the way a socket delivers them, so the figure includes reassembly of
frames split across chunks. Encoding is ``encode_frame`` (one joined buffer) and
``encode_frame_parts`` (header bytes plus the body uncopied).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from protocol.custom_headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    with_unique_key_query,
)
from protocol.frame import FrameDecoder, encode_frame, encode_frame_parts

CHUNK = 64 * 1024
LARGE_BODY = 64 * 1024


def _small(serialize_type: SerializeType) -> RemotingCommand:
    header = QueryMessageRequestHeader("TopicA", "order-12345", 64, 0, (1 << 63) - 1)
    return RemotingCommand(
        code=12,
        version=407,
        opaque=42,
        ext_fields=with_unique_key_query(header.to_ext_fields(), False),
        serialize_type=serialize_type,
    )


def _large(serialize_type: SerializeType) -> RemotingCommand:
    return RemotingCommand(
        code=0,
        version=407,
        opaque=42,
        flag=1,
        ext_fields=QueryMessageResponseHeader(1795216401509, 4330121).to_ext_fields(),
        body=bytes(range(256)) * (LARGE_BODY // 256),
        serialize_type=serialize_type,
    )


def _rate(run: Callable[[], int], seconds: float, repeats: int) -> float:
    """Best frames per CPU-second of ``run`` (which returns how many frames it handled) over
    ``repeats`` rounds of about ``seconds`` each. CPU time and the best round, because the machine
    is shared: wall-clock figures would measure the neighbours."""
    run()  # warm up
    best = 0.0
    for _ in range(repeats):
        frames = 0
        start = time.process_time()
        elapsed = 0.0
        while elapsed < seconds:
            frames += run()
            elapsed = time.process_time() - start
        best = max(best, frames / elapsed)
    return best


def _decode_runner(cmd: RemotingCommand) -> Callable[[], int]:
    frame = encode_frame(cmd)
    per_stream = max(1, (4 * 1024 * 1024) // len(frame))
    stream = frame * per_stream
    chunks = [stream[i : i + CHUNK] for i in range(0, len(stream), CHUNK)]

    def run() -> int:
        decoder = FrameDecoder()
        count = 0
        for chunk in chunks:
            count += len(decoder.feed(chunk))
        assert count == per_stream
        return count

    return run


def _encode_runner(cmd: RemotingCommand, parts: bool) -> Callable[[], int]:
    encode = encode_frame_parts if parts else encode_frame
    batch = 1000 if cmd.body is None else 100

    def run() -> int:
        for _ in range(batch):
            encode(cmd)
        return batch

    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="CPU seconds per round (default 0.5)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per figure, best kept (default 3)")
    args = parser.parse_args(argv)
    print(
        f"python {sys.version.split()[0]}; frames per CPU-second, best of {args.repeats} x {args.seconds:g} s"
    )
    print(f"{'frame':<24}{'bytes':>8}{'decode/s':>12}{'encode/s':>12}{'parts/s':>12}{'decode MB/s':>13}")
    for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ):
        for label, build in (("small request", _small), ("64 KiB response", _large)):
            cmd = build(serialize_type)
            size = len(encode_frame(cmd))
            decode = _rate(_decode_runner(cmd), args.seconds, args.repeats)
            encode = _rate(_encode_runner(cmd, parts=False), args.seconds, args.repeats)
            parts = _rate(_encode_runner(cmd, parts=True), args.seconds, args.repeats)
            name = f"{serialize_type.name} {label}"
            megabytes = decode * size / 1e6
            print(f"{name:<24}{size:>8}{decode:>12,.0f}{encode:>12,.0f}{parts:>12,.0f}{megabytes:>13,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
