"""Body codecs: Java's framing (zlib stream, LZ4 frame, zstd frame), bounded output, clear errors."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

import protocol.compression as compression
from protocol.compression import compress, decompress
from protocol.errors import CodecUnavailableError, CompressionError
from protocol.message import MessageExt, decode_message, encode_message
from protocol.message_flags import COMPRESSED_FLAG

DATA = b"compress me 0 " * 300


@pytest.mark.parametrize("ctype", [0, 1, 2, 3])
def test_round_trip(ctype: int) -> None:
    assert decompress(compress(DATA, ctype), ctype) == DATA
    assert decompress(memoryview(compress(b"", ctype)), ctype) == b""


@pytest.mark.parametrize(
    ("name", "magic"),
    [
        ("message_encode_compressed_zlib", b"\x78"),
        ("message_encode_compressed_lz4", bytes.fromhex("04224d18")),
        ("message_encode_compressed_zstd", bytes.fromhex("28b52ffd")),
    ],
)
def test_java_bodies_are_frames(name: str, magic: bytes, vectors_by_name: dict) -> None:
    """Java frames LZ4 with LZ4FrameOutputStream (not raw blocks) and zstd as standard frames."""
    vector = vectors_by_name[name]
    stored = bytes.fromhex(vector["storedBodyHex"])
    assert stored.startswith(magic)
    ctype = vector["decodedSysFlag"] >> 8 & 7
    assert decompress(stored, ctype) == bytes.fromhex(vector["inputs"]["bodyHex"])


@pytest.mark.parametrize("ctype", [0, 1, 2, 3])
def test_output_is_capped(ctype: int) -> None:
    bomb = compress(b"\0" * 200_000, ctype)
    with pytest.raises(CompressionError, match="inflates past"):
        decompress(bomb, ctype, max_size=100_000)
    assert len(decompress(bomb, ctype, max_size=200_000)) == 200_000


@pytest.mark.parametrize("ctype", [0, 1, 2, 3])
def test_truncated_and_garbage(ctype: int) -> None:
    packed = compress(DATA, ctype)
    for cut in (0, 1, len(packed) // 2, len(packed) - 1):
        with pytest.raises(CompressionError) as info:
            decompress(packed[:cut], ctype)
        assert not isinstance(info.value, CodecUnavailableError), "corrupt data is not a missing codec"
    with pytest.raises(CompressionError) as info:
        decompress(b"\xff" * 40, ctype)
    assert not isinstance(info.value, CodecUnavailableError)


@pytest.mark.parametrize("ctype", [1, 2])
def test_trailing_bytes_after_a_frame_are_refused(ctype: int) -> None:
    with pytest.raises(CompressionError, match="trailing"):
        decompress(compress(DATA, ctype) + b"xx", ctype)


def test_zlib_ignores_trailing_bytes_like_javas_inflater_stream() -> None:
    assert decompress(zlib.compress(DATA) + b"xx", 3) == DATA


@pytest.mark.parametrize(("ctype", "attr", "package"), [(1, "_lz4", "lz4"), (2, "_zstd", "zstandard")])
def test_missing_codec_library_is_a_clear_error(
    ctype: int,
    attr: str,
    package: str,
    monkeypatch: pytest.MonkeyPatch,
    vectors_by_name: dict,
    vectors_dir: Path,
) -> None:
    monkeypatch.setattr(compression, attr, None)
    with pytest.raises(CodecUnavailableError, match=f"'{package}' package is not installed"):
        decompress(b"anything", ctype)
    with pytest.raises(CodecUnavailableError, match=package):
        encode_message(MessageExt(topic="T", body=DATA, sys_flag=COMPRESSED_FLAG | ctype << 8))
    name = {1: "message_encode_compressed_lz4", 2: "message_encode_compressed_zstd"}[ctype]
    raw = (vectors_dir / vectors_by_name[name]["file"]).read_bytes()
    with pytest.raises(CodecUnavailableError):
        decode_message(raw)
    # Without inflating, such a record is still readable and re-encodable.
    assert encode_message(decode_message(raw, decompress=False)) == raw


def test_unknown_type() -> None:
    with pytest.raises(CompressionError, match="unknown compression type 5"):
        decompress(b"", 5)
    with pytest.raises(CompressionError, match="unknown compression type 9"):
        compress(b"", 9)
