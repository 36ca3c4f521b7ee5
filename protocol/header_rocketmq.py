"""The ROCKETMQ binary header serialization (``SerializeType.ROCKETMQ``), as 4.9.7's
``RocketMQSerializable`` reads and writes it.

Layout, big-endian: code i16, language u8, version i16, opaque i32, flag i32, remark (i32 length +
UTF-8), extFields (i32 length, then key i16 length + UTF-8, value i32 length + UTF-8, repeated).
Java writes a null or empty remark, and a null or empty extFields map, as length 0; it reads any
zero-length string back as null (``readStr``, 4.9.7 and later), so an empty remark decodes as ``None``
and an extField with an empty key or value disappears (Java puts it as null, which every lookup sees
as missing). How a processor answers such a null field is ``protocol.custom_headers``' business: for
a string field, as the 4.9.7 broker does (it carries on with null). ``extFields`` are written
in the dict's order, which for anything Java sent is its ``HashMap`` order.
"""

from __future__ import annotations

import struct

from protocol.codes import LanguageCode, SerializeType
from protocol.command import RemotingCommand
from protocol.errors import CommandEncodeError, HeaderDecodeError

#: code, language, version, opaque, flag: the fixed 13 bytes before the remark.
_FIXED = struct.Struct(">hBhii")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_FIXED_AND_REMARK_LEN = struct.Struct(">hBhiii")
#: The smallest header: fixed part, remark length, extFields length.
MIN_HEADER_LENGTH = _FIXED.size + 4 + 4
_LANGUAGE_BY_CODE: dict[int, LanguageCode] = {member.value: member for member in LanguageCode}
_ROCKETMQ = SerializeType.ROCKETMQ


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    """The ROCKETMQ header bytes of ``cmd`` (without the frame's length words)."""
    try:
        fixed = _FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag)
    except struct.error as exc:
        raise CommandEncodeError(
            f"code/version must fit a Java short, opaque/flag an int, language a byte: {exc}"
        ) from exc
    try:
        remark = cmd.remark.encode("utf-8") if cmd.remark else b""
        parts = [fixed, _I32.pack(len(remark)), remark, b""]
        ext_len = 0
        if cmd.ext_fields:
            for key, value in cmd.ext_fields.items():
                key_bytes = key.encode("utf-8")
                value_bytes = value.encode("utf-8")
                if len(key_bytes) > 0x7FFF:
                    raise CommandEncodeError(f"extFields key of {len(key_bytes)} bytes exceeds a Java short")
                parts.append(_I16.pack(len(key_bytes)))
                parts.append(key_bytes)
                parts.append(_I32.pack(len(value_bytes)))
                parts.append(value_bytes)
                ext_len += 6 + len(key_bytes) + len(value_bytes)
    except (UnicodeEncodeError, AttributeError) as exc:
        raise CommandEncodeError(f"remark and extFields must be valid Unicode strings: {exc}") from exc
    parts[3] = _I32.pack(ext_len)
    return b"".join(parts)


def decode_rocketmq_header(buf: bytes | bytearray | memoryview, start: int, end: int) -> RemotingCommand:
    """A command (without body) from the ROCKETMQ header at ``buf[start:end]``.

    Raises ``HeaderDecodeError`` for a truncated header, a length pointing outside it, or trailing
    bytes. Text that is not UTF-8 is read as Java's ``new String(bytes, UTF_8)`` reads it (each
    malformed sequence a U+FFFD), so the request is answered as the broker answers it rather than the
    connection closed without an answer (issue 31 item 8).
    """
    if end - start < MIN_HEADER_LENGTH:
        raise HeaderDecodeError(f"ROCKETMQ header of {end - start} bytes is shorter than {MIN_HEADER_LENGTH}")
    # One copy of the (small) header, decoded once as Latin-1 so that character offsets equal byte
    # offsets: an ASCII string (the usual case) is then a plain slice of that text, and only a
    # slice holding non-ASCII characters is decoded again, as UTF-8, from the bytes.
    header = bytes(buf[start:end])
    text = header.decode("latin-1")
    end = len(header)
    code, language, version, opaque, flag, remark_len = _FIXED_AND_REMARK_LEN.unpack_from(header, 0)
    pos = _FIXED_AND_REMARK_LEN.size
    if remark_len < 0 or remark_len > end - pos - 4:
        raise HeaderDecodeError(f"ROCKETMQ header remark length {remark_len} exceeds the header")
    try:
        remark = None
        if remark_len:
            stop = pos + remark_len
            remark = text[pos:stop]
            if not remark.isascii():
                remark = header[pos:stop].decode("utf-8", "replace")
            pos = stop
        (ext_len,) = _I32.unpack_from(header, pos)
        pos += 4
        ext_fields = None
        if ext_len != 0:
            if ext_len < 0 or ext_len != end - pos:
                raise HeaderDecodeError(
                    f"ROCKETMQ header extFields length {ext_len} does not match the {end - pos} bytes left"
                )
            ext_fields = _decode_ext_fields(header, text, pos, end)
        elif pos != end:
            raise HeaderDecodeError(f"ROCKETMQ header has {end - pos} trailing bytes")
    except UnicodeDecodeError as exc:
        raise HeaderDecodeError(f"ROCKETMQ header text is not UTF-8: {exc}") from exc
    # Positional arguments: this runs once per request, and keywords cost measurably here.
    return RemotingCommand(
        code,
        _LANGUAGE_BY_CODE.get(language, language),
        version,
        opaque,
        flag,
        remark,
        ext_fields,
        None,
        _ROCKETMQ,
    )


def _decode_ext_fields(header: bytes, text: str, pos: int, end: int) -> dict[str, str] | None:
    """The key/value pairs filling ``header[pos:end]`` (``text`` is the header as Latin-1);
    empty keys or values are Java nulls and dropped."""
    fields: dict[str, str] = {}
    i16 = _I16.unpack_from
    i32 = _I32.unpack_from
    while pos < end:
        if end - pos < 2:
            raise HeaderDecodeError("ROCKETMQ header extFields entry is truncated")
        (key_len,) = i16(header, pos)
        pos += 2
        if key_len < 0 or key_len > end - pos - 4:
            raise HeaderDecodeError(f"ROCKETMQ header extFields key length {key_len} exceeds the header")
        stop = pos + key_len
        key = text[pos:stop]
        if not key.isascii():
            key = header[pos:stop].decode("utf-8", "replace")
        (value_len,) = i32(header, stop)
        pos = stop + 4
        if value_len < 0 or value_len > end - pos:
            raise HeaderDecodeError(f"ROCKETMQ header extFields value length {value_len} exceeds the header")
        stop = pos + value_len
        value = text[pos:stop]
        if not value.isascii():
            value = header[pos:stop].decode("utf-8", "replace")
        pos = stop
        if key and value:
            fields[key] = value
        elif key:
            fields.pop(key, None)
    return fields or None
