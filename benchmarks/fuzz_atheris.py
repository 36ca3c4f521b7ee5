"""Coverage-guided fuzzing of the protocol decoders with atheris (libFuzzer), bounded in time.

Hypothesis (``tests/protocol/test_decoder_fuzz.py``) mutates the golden inputs at random; atheris
instruments the decoders and keeps the inputs that reach new branches, so it finds the deep paths
random mutation misses. Each target runs in its own process (libFuzzer owns the process), seeded
with the golden Java inputs copied to a temporary corpus directory; any exception other than a
``ProtocolError`` (``HeaderFieldError`` for custom headers) is a finding and fails the run.

    python -m benchmarks.fuzz_atheris --seconds 60            # every target, 60 s each
    python -m benchmarks.fuzz_atheris --target frame --runs 100000

Needs ``pip install atheris`` (not a dependency of the package: only this script uses it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TARGETS = ("frame", "json_header", "rocketmq_header", "custom_headers", "message", "ids")
GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"


def _seeds(target: str) -> list[bytes]:
    """Golden Java inputs for ``target`` (the fuzzer mutates from these)."""
    vectors = GOLDEN / "vectors"
    frames = [p.read_bytes() for p in sorted(vectors.glob("*.encode.bin"))]
    if target == "frame":
        return frames
    if target in ("json_header", "rocketmq_header"):
        want = 0 if target == "json_header" else 1
        out = []
        for f in frames:
            word = int.from_bytes(f[4:8], "big")
            if word >> 24 == want:
                out.append(f[8 : 8 + (word & 0xFFFFFF)])
        return out
    if target == "custom_headers":
        return [b"topic\x00TopicA\x00key\x00k-1\x00maxNum\x0032\x00beginTimestamp\x000\x00endTimestamp\x001"]
    if target == "message":
        # Not at the top: the fuzzed modules are imported under instrumentation (``_one_input``);
        # this one has no branch the decoders take, so loading it plain here changes nothing.
        from protocol.record_layout import TOTAL_SIZE_WIDTH

        records = [p.read_bytes() for p in sorted(vectors.glob("message_encode_*.bin"))]
        log = (GOLDEN / "stores" / "java-4.9.7-a" / "commitlog" / f"{0:020d}").read_bytes()
        pos = 0
        for _ in range(30):
            size = int.from_bytes(log[pos : pos + TOTAL_SIZE_WIDTH], "big")  # TOTALSIZE, the first field
            records.append(log[pos : pos + size])
            pos += size
        return records
    return [b"0AAF0895000078BF000000000009BB4A", b"7F0000010B6A18B4AAC2187DB8A70000"]


def _one_input(target: str) -> Callable[[bytes], None]:
    """The callback for ``target``; imports the decoders under atheris instrumentation."""
    import atheris

    with atheris.instrument_imports():
        from protocol.custom_headers import (
            GetRouteInfoRequestHeader,
            QueryMessageRequestHeader,
            QueryMessageResponseHeader,
            ViewMessageRequestHeader,
        )
        from protocol.errors import HeaderFieldError, ProtocolError
        from protocol.frame import FrameDecoder
        from protocol.header_json import decode_json_header
        from protocol.header_rocketmq import decode_rocketmq_header
        from protocol.message import decode_message, decode_messages, read_index_fields
        from protocol.message_id import decode_offset_msg_id, parse_unique_id

    headers = (QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader)
    headers += (GetRouteInfoRequestHeader,)

    def custom(ext: dict[str, str] | None) -> None:
        for header in headers:
            try:
                header.from_ext_fields(ext)
            except HeaderFieldError:
                pass

    def frame(data: bytes) -> None:
        decoder = FrameDecoder(max_frame_length=1 << 20)
        try:
            for cmd in decoder.feed(data[: len(data) // 2]) + decoder.feed(data[len(data) // 2 :]):
                custom(cmd.ext_fields)
        except ProtocolError:
            pass

    def json_header(data: bytes) -> None:
        try:
            custom(decode_json_header(data).ext_fields)
        except ProtocolError:
            pass

    def rocketmq_header(data: bytes) -> None:
        try:
            custom(decode_rocketmq_header(memoryview(data), 0, len(data)).ext_fields)
        except ProtocolError:
            pass

    def custom_headers(data: bytes) -> None:
        parts = data.decode("utf-8", "replace").split("\0")
        custom(dict(zip(parts[::2], parts[1::2], strict=False)))

    def message(data: bytes) -> None:
        for decode in (
            lambda: decode_message(data, 0, check_crc=True),
            lambda: decode_message(data, 0, read_body=False, decompress=False),
            lambda: read_index_fields(data, 0),
        ):
            try:
                decode()
            except ProtocolError:
                pass
        decode_messages(data)

    def ids(data: bytes) -> None:
        text = data.decode("utf-8", "replace")
        for parse in (decode_offset_msg_id, parse_unique_id):
            try:
                parse(text)
            except ProtocolError:
                pass

    return {
        "frame": frame,
        "json_header": json_header,
        "rocketmq_header": rocketmq_header,
        "custom_headers": custom_headers,
        "message": message,
        "ids": ids,
    }[target]


def _fuzz(target: str, seconds: int, runs: int | None) -> None:
    """Run one target in this process (libFuzzer exits the process when done)."""
    import atheris

    corpus = Path(tempfile.mkdtemp(prefix=f"fuzz-{target}-"))
    for i, seed in enumerate(_seeds(target)):
        (corpus / f"seed{i}").write_bytes(seed)
    args = [sys.argv[0], f"-max_total_time={seconds}", "-max_len=4096", "-print_final_stats=1"]
    if runs is not None:
        args.append(f"-runs={runs}")
    atheris.Setup([*args, str(corpus)], _one_input(target))
    atheris.Fuzz()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=TARGETS, help="one target in this process (default: all)")
    parser.add_argument("--seconds", type=int, default=30, help="time per target (default 30)")
    parser.add_argument("--runs", type=int, help="stop each target after this many inputs")
    args = parser.parse_args(argv)
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("atheris is not installed: pip install atheris", file=sys.stderr)
        return 2
    if args.target:
        _fuzz(args.target, args.seconds, args.runs)
        return 0
    failed = []
    for target in TARGETS:
        cmd = [sys.executable, "-m", "benchmarks.fuzz_atheris", "--target", target]
        cmd += ["--seconds", str(args.seconds)] + (["--runs", str(args.runs)] if args.runs else [])
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines = done.stderr.splitlines()
        last = next((ln for ln in reversed(lines) if "cov: " in ln), "")
        execs = next((ln.split()[-1] for ln in lines if ln.startswith("stat::number_of_executed")), "?")
        cov = last.split("cov: ")[1].split()[0] if last else "?"
        verdict = "held" if done.returncode == 0 else f"FAILED (exit {done.returncode})"
        print(f"{target:16} {execs:>9} inputs  cov {cov:>5}  {time.monotonic() - started:5.1f} s  {verdict}")
        if done.returncode != 0:
            failed.append(target)
            print(done.stderr[-3000:], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
