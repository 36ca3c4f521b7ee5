"""Body compression as RocketMQ frames it: zlib streams, LZ4 *frames* and zstd frames.

Java's ``ZlibCompressor`` uses ``Deflater`` (a zlib-wrapped deflate stream), ``Lz4Compressor`` the
LZ4 frame format (``LZ4FrameOutputStream``, magic ``04 22 4D 18``), not raw LZ4 blocks, and
``ZstdCompressor`` standard zstd frames. Type 0 is the legacy flag from before compression types
existed and means zlib. lz4 and zstandard are optional: without them a body of that type raises
``CodecUnavailableError`` (a ``CompressionError``) saying which package to install, instead of
failing somewhere deeper.

Decompression is capped (``MAX_DECOMPRESSED_SIZE``) so a hostile body cannot exhaust memory.
"""

from __future__ import annotations

import zlib
from types import ModuleType

from protocol.errors import CodecUnavailableError, CompressionError
from protocol.message_flags import CompressionType

#: Largest body we agree to inflate; RocketMQ caps messages at 4 MiB compressed by default.
MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024
#: The level Java's producer and ``MessageDecoder.encode`` use.
DEFAULT_LEVEL = 5

#: zstd input is fed in slices this small because one zstd byte can stand for ~32 KiB of output
#: (RLE blocks); the cap is then overshot by at most ~32 MiB before it is noticed.
_ZSTD_FEED = 1024


def _optional(name: str) -> ModuleType | None:
    try:
        if name == "lz4":
            import lz4.frame as module
        else:
            import zstandard as module
    except ImportError:
        return None
    return module


_lz4 = _optional("lz4")
_zstd = _optional("zstandard")


def _codec(compression_type: int) -> CompressionType:
    try:
        return CompressionType(compression_type)
    except ValueError:
        raise CompressionError(f"unknown compression type {compression_type}") from None


def _require(module: ModuleType | None, codec: str, package: str) -> ModuleType:
    if module is None:
        raise CodecUnavailableError(f"{codec} body, but the '{package}' package is not installed")
    return module


def decompress(
    data: bytes | memoryview, compression_type: int, max_size: int = MAX_DECOMPRESSED_SIZE
) -> bytes:
    """Inflate a stored body of the given sysFlag compression type; the whole input must be one frame."""
    codec = _codec(compression_type)
    try:
        if codec in (CompressionType.ZLIB, CompressionType.LEGACY_ZLIB):
            return _inflate_zlib(data, max_size)
        if codec is CompressionType.LZ4:
            return _inflate_lz4(data, max_size)
        return _inflate_zstd(data, max_size)
    except CompressionError:
        raise
    except Exception as exc:  # every codec has its own error types; callers need one
        raise CompressionError(f"corrupt {codec.name} body: {exc}") from exc


def _inflate_zlib(data: bytes | memoryview, max_size: int) -> bytes:
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, max_size + 1)
    if len(out) > max_size:
        raise CompressionError(f"zlib body inflates past {max_size} bytes")
    if not inflater.eof:
        raise CompressionError("truncated zlib body")
    # Like Java's InflaterInputStream, bytes after the end of the zlib stream are ignored.
    return out


def _inflate_lz4(data: bytes | memoryview, max_size: int) -> bytes:
    frame = _require(_lz4, "LZ4", "lz4")
    inflater = frame.LZ4FrameDecompressor()
    out = inflater.decompress(bytes(data), max_length=max_size + 1)
    if len(out) > max_size:
        raise CompressionError(f"LZ4 body inflates past {max_size} bytes")
    if not inflater.eof:
        raise CompressionError("truncated LZ4 frame")
    if inflater.unused_data:
        raise CompressionError("trailing bytes after the LZ4 frame")
    return out


def _inflate_zstd(data: bytes | memoryview, max_size: int) -> bytes:
    zstd = _require(_zstd, "ZSTD", "zstandard")
    inflater = zstd.ZstdDecompressor().decompressobj()
    parts: list[bytes] = []
    total = 0
    view = memoryview(data)
    for start in range(0, len(view), _ZSTD_FEED):
        part = inflater.decompress(view[start : start + _ZSTD_FEED])
        total += len(part)
        if total > max_size:
            raise CompressionError(f"ZSTD body inflates past {max_size} bytes")
        parts.append(part)
    if not inflater.eof:
        raise CompressionError("truncated ZSTD frame")
    if inflater.unused_data:
        raise CompressionError("trailing bytes after the ZSTD frame")
    return b"".join(parts)


def compress(data: bytes, compression_type: int, level: int = DEFAULT_LEVEL) -> bytes:
    """Deflate a body the way a Java producer would (same framing; not necessarily the same bytes)."""
    codec = _codec(compression_type)
    if codec in (CompressionType.ZLIB, CompressionType.LEGACY_ZLIB):
        return zlib.compress(data, level)
    if codec is CompressionType.LZ4:
        return _require(_lz4, "LZ4", "lz4").compress(data)
    return _require(_zstd, "ZSTD", "zstandard").ZstdCompressor(level=level).compress(data)
