"""The ROCKETMQ binary header: layout, Java's null conventions, and every malformed-length path."""

from __future__ import annotations

import struct

import pytest

from protocol.codes import LanguageCode, SerializeType
from protocol.command import RemotingCommand
from protocol.errors import HeaderDecodeError
from protocol.header_rocketmq import MIN_HEADER_LENGTH, decode_rocketmq_header, encode_rocketmq_header


def _decode(data: bytes) -> RemotingCommand:
    return decode_rocketmq_header(data, 0, len(data))


def _fixed(remark: bytes = b"") -> bytes:
    return struct.pack(">hBhiii", 12, 0, 407, 9, 0, len(remark)) + remark


def _ext(*pairs: tuple[bytes, bytes]) -> bytes:
    body = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in pairs)
    return struct.pack(">i", len(body)) + body


def test_layout() -> None:
    cmd = RemotingCommand(
        code=12,
        language=LanguageCode.GO,
        version=407,
        opaque=-2,
        flag=2,
        remark="é",
        ext_fields={"k": "v"},
        serialize_type=SerializeType.ROCKETMQ,
    )
    assert encode_rocketmq_header(cmd) == (
        struct.pack(">hBhii", 12, 9, 407, -2, 2)
        + struct.pack(">i", 2)
        + "é".encode()
        + struct.pack(">i", 2 + 1 + 4 + 1)
        + b"\x00\x01k\x00\x00\x00\x01v"
    )


def test_null_and_empty_are_both_length_zero() -> None:
    for remark, ext in ((None, None), ("", {})):
        header = encode_rocketmq_header(RemotingCommand(code=0, remark=remark, ext_fields=ext))
        assert len(header) == MIN_HEADER_LENGTH
        decoded = _decode(header)
        assert decoded.remark is None and decoded.ext_fields is None


def test_empty_key_or_value_reads_as_java_null_and_is_dropped() -> None:
    data = _fixed() + _ext((b"a", b"1"), (b"", b"x"), (b"b", b""), (b"c", b"3"), (b"a", b""))
    assert _decode(data).ext_fields == {"c": "3"}
    assert _decode(_fixed() + _ext((b"b", b""))).ext_fields is None


def test_duplicate_keys_keep_the_last_value() -> None:
    assert _decode(_fixed() + _ext((b"a", b"1"), (b"a", b"2"))).ext_fields == {"a": "2"}


def test_unknown_language_byte_is_kept_as_int() -> None:
    data = struct.pack(">hBhiii", 12, 200, 407, 9, 0, 0) + struct.pack(">i", 0)
    cmd = _decode(data)
    assert cmd.language == 200 and not isinstance(cmd.language, LanguageCode)
    assert encode_rocketmq_header(cmd) == data


def test_decodes_inside_a_larger_buffer() -> None:
    header = encode_rocketmq_header(RemotingCommand(code=33, ext_fields={"offset": "1"}))
    buf = memoryview(b"xx" + header + b"yy")
    assert decode_rocketmq_header(buf, 2, 2 + len(header)).ext_fields == {"offset": "1"}


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"\x00" * (MIN_HEADER_LENGTH - 1), "shorter"),
        (_fixed()[:-4] + struct.pack(">i", -1) + struct.pack(">i", 0), "remark length"),
        (_fixed()[:-4] + struct.pack(">i", 100) + struct.pack(">i", 0), "remark length"),
        (_fixed() + struct.pack(">i", -3), "extFields length"),
        (_fixed() + struct.pack(">i", 50) + b"\x00\x01", "extFields length"),
        (_fixed() + struct.pack(">i", 0) + b"junk", "trailing"),
        (_fixed() + struct.pack(">i", 1) + b"\x00", "truncated"),
        (_fixed() + struct.pack(">i", 6) + struct.pack(">h", -1) + b"\0\0\0\0", "key length"),
        (_fixed() + struct.pack(">i", 7) + struct.pack(">h", 9) + b"k\0\0\0\0", "key length"),
        (_fixed() + struct.pack(">i", 7) + b"\x00\x01k" + struct.pack(">i", 5), "value length"),
        (_fixed() + struct.pack(">i", 7) + b"\x00\x01k" + struct.pack(">i", -1), "value length"),
    ],
)
def test_malformed_headers_raise_header_decode_error(data: bytes, text: str) -> None:
    with pytest.raises(HeaderDecodeError, match=text):
        _decode(data)


def test_text_that_is_not_utf8_is_read_as_java_reads_it() -> None:
    """``new String(bytes, UTF_8)``: each malformed sequence a U+FFFD, never an undecodable header
    (which would close the connection without an answer; issue 31 item 8)."""
    assert _decode(_fixed(b"\xff\xfe") + struct.pack(">i", 0)).remark == "\ufffd\ufffd"
    assert _decode(_fixed() + _ext((b"\xc3", b"v"))).ext_fields == {"\ufffd": "v"}
    value = _decode(_fixed() + _ext((b"k", b"a\xed\xa0\x80"))).ext_fields["k"]
    assert value.startswith("a\ufffd") and set(value[1:]) == {"\ufffd"}
