"""What decoding a huge request header costs in memory: the reason for the server's header limit.

    python -m benchmarks.header_memory [--fields 1300000]

Builds one frame whose header holds ``--fields`` tiny distinct extFields (just under the 16 MiB frame
limit by default), in JSON and in the ROCKETMQ serialization, and reports the peak memory
(``tracemalloc``) of ``FrameDecoder.feed`` on it without a header limit, next to the frame's size;
then the same frame against the server's ``max_header_length`` (256 KiB), which refuses it from its
first 8 bytes.
"""

from __future__ import annotations

import argparse
import struct
import tracemalloc

from protocol.errors import FrameError
from protocol.frame import FrameDecoder
from server.remoting.connection import DEFAULT_MAX_HEADER_LENGTH


def json_frame(fields: int) -> bytes:
    ext = b",".join(b'"%x":""' % i for i in range(fields))
    header = b'{"code":12,"extFields":{' + ext + b"}}"
    return struct.pack(">ii", 4 + len(header), len(header)) + header


def rocketmq_frame(fields: int) -> bytes:
    parts = []
    for i in range(fields):
        key = b"%x" % i
        parts.append(struct.pack(">h", len(key)) + key + struct.pack(">i", 1) + b"v")
    ext = b"".join(parts)
    header = struct.pack(">hBhiii", 12, 0, 1, 1, 0, 0) + struct.pack(">i", len(ext)) + ext
    return struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header


def peak_of_feed(frame: bytes, max_header_length: int | None) -> tuple[int, str]:
    decoder = FrameDecoder(max_header_length=max_header_length)
    tracemalloc.start()
    try:
        try:
            commands = decoder.feed(frame)
            outcome = f"decoded, {len(commands[0].ext_fields or {})} extFields"
        except FrameError as exc:
            outcome = f"refused: {type(exc).__name__}"
        _, peak = tracemalloc.get_traced_memory()
        del decoder
    finally:
        tracemalloc.stop()
    return peak, outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fields", type=int, default=1_300_000, help="extFields in the header")
    args = parser.parse_args(argv)
    mib = 1024 * 1024
    print("| serialization | frame MiB | header limit | outcome | peak MiB |")
    print("|---|---:|---|---|---:|")
    for name, build in (("JSON", json_frame), ("ROCKETMQ", rocketmq_frame)):
        frame = build(args.fields)
        for limit in (None, DEFAULT_MAX_HEADER_LENGTH):
            peak, outcome = peak_of_feed(frame, limit)
            shown = "none" if limit is None else f"{limit // 1024} KiB"
            print(f"| {name} | {len(frame) / mib:.1f} | {shown} | {outcome} | {peak / mib:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
