"""The JSON header: Java's exact output, and the tolerance a broker needs for non-Java peers."""

from __future__ import annotations

import pytest

from protocol.codes import LanguageCode, SerializeType
from protocol.command import RemotingCommand
from protocol.errors import HeaderDecodeError
from protocol.header_json import decode_json_header, encode_json_header


def test_field_order_and_omissions_match_fastjson() -> None:
    cmd = RemotingCommand(code=0, version=407, opaque=7, flag=1)
    assert encode_json_header(cmd) == (
        b'{"code":0,"flag":1,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":407}'
    )
    cmd = RemotingCommand(code=22, version=407, opaque=7, flag=1, remark="r", ext_fields={"b": "1", "a": "2"})
    assert encode_json_header(cmd) == (
        b'{"code":22,"extFields":{"b":"1","a":"2"},"flag":1,"language":"JAVA","opaque":7,'
        b'"remark":"r","serializeTypeCurrentRPC":"JSON","version":407}'
    )


def test_empty_remark_and_empty_ext_fields_are_written() -> None:
    """Only null is omitted: Java writes "" and {} (seen in the captured HEART_BEAT answers)."""
    header = encode_json_header(RemotingCommand(code=0, remark="", ext_fields={}))
    assert b'"remark":""' in header and b'"extFields":{}' in header
    decoded = decode_json_header(header)
    assert decoded.remark == "" and decoded.ext_fields == {}


def test_non_ascii_is_raw_utf8_and_slashes_are_not_escaped() -> None:
    header = encode_json_header(RemotingCommand(code=1, remark="订单 🔑 a/b\n"))
    assert '"remark":"订单 🔑 a/b\\n"'.encode() in header


def test_unknown_fields_are_ignored() -> None:
    cmd = decode_json_header(
        b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"GO","opaque":3,'
        b'"serializeTypeCurrentRPC":"JSON","version":317,"future":{"x":[1,2]},"customHeader":null}'
    )
    assert cmd.code == 105 and cmd.language is LanguageCode.GO and cmd.version == 317
    assert cmd.ext_fields == {"topic": "T"} and cmd.serialize_type is SerializeType.JSON


def test_unknown_language_name_becomes_other() -> None:
    assert decode_json_header(b'{"code":1,"language":"COBOL"}').language is LanguageCode.OTHER


def test_language_by_ordinal_is_accepted() -> None:
    assert decode_json_header(b'{"code":1,"language":12}').language is LanguageCode.RUST
    assert decode_json_header(b'{"code":1,"language":99}').language is LanguageCode.OTHER


def test_missing_numbers_default_to_zero() -> None:
    cmd = decode_json_header(b"{}")
    assert (cmd.code, cmd.version, cmd.opaque, cmd.flag) == (0, 0, 0, 0)
    assert cmd.language is LanguageCode.JAVA and cmd.remark is None and cmd.ext_fields is None


def test_non_string_ext_values_become_java_strings() -> None:
    cmd = decode_json_header(
        b'{"code":12,"extFields":{"topic":"T","maxNum":64,"beginTimestamp":0,'
        b'"endTimestamp":9223372036854775807,"_UNIQUE_KEY_QUERY":false,"ratio":1.5,'
        b'"nothing":null,"list":[1,"a"]}}'
    )
    assert cmd.ext_fields == {
        "topic": "T",
        "maxNum": "64",
        "beginTimestamp": "0",
        "endTimestamp": "9223372036854775807",
        "_UNIQUE_KEY_QUERY": "false",
        "ratio": "1.5",
        "list": '[1,"a"]',
    }
    assert list(cmd.ext_fields) == [
        "topic",
        "maxNum",
        "beginTimestamp",
        "endTimestamp",
        "_UNIQUE_KEY_QUERY",
        "ratio",
        "list",
    ]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{",
        b"null",
        b"[]",
        b'{"code":"12"}',
        b'{"code":2147483648}',
        b'{"opaque":-2147483649}',
        b'{"remark":5}',
        b'{"extFields":[]}',
    ],
)
def test_undecodable_headers_raise_header_decode_error(data: bytes) -> None:
    with pytest.raises(HeaderDecodeError):
        decode_json_header(data)


@pytest.mark.parametrize(
    ("data", "remark", "fields"),
    [
        (b'{"remark":"\\ud800"}', "?", None),
        # Not UTF-8: read as ``new String(bytes, UTF_8)`` reads it, each malformed sequence a U+FFFD.
        (b'{"code":1,"remark":"\xff"}', "\ufffd", None),
        (
            b'{"extFields":{"topic":"a\xff\xfeb","s":"\xc3\\ud800"}}',
            None,
            {"topic": "a\ufffd\ufffdb", "s": "\ufffd?"},
        ),
        (
            b'{"code":17,"extFields":{"topic":"T\\ud800x","k":"\\udc00\\ud83d"}}',
            None,
            {"topic": "T?x", "k": "??"},
        ),
        (
            b'{"extFields":{"pair":"\\ud83d\\ude00","text":"\\\\ud800"}}',
            None,
            {"pair": "\U0001f600", "text": "\\ud800"},
        ),
        (b'{"extFields":{"n":5,"s":"\\ud800"}}', None, {"n": "5", "s": "?"}),
    ],
)
def test_lone_surrogates_and_invalid_utf8_are_read_as_java_reads_them(
    data: bytes, remark: str | None, fields: dict[str, str] | None
) -> None:
    """fastjson reads ``\\ud800`` into a Java String and the broker answers; what it writes of it as
    UTF-8 is ``?``. msgspec refuses the escape: without the fallback such a header closed the
    connection with no answer (issue 31 item 8: the fuzzed SEND_MESSAGE_V2, UPDATE_AND_CREATE_TOPIC
    and DELETE_TOPIC_IN_BROKER frames). A pair and an escaped backslash stay as they are."""
    command = decode_json_header(data)
    assert (command.remark, command.ext_fields) == (remark, fields)


@pytest.mark.parametrize(
    "data",
    [
        b'{"code":12,"ignored":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"code":12,"extFields":{"k":' + b"[" * 5000 + b"]" * 5000 + b"}}",
        b'{"code":12,"extFields":{"k":' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}}",
        b'{"code":12,"extFields":' + b"[" * 100_000,
    ],
    ids=["unknown-field", "ext-array", "ext-object", "unterminated"],
)
def test_deeply_nested_json_is_a_header_decode_error_not_a_recursion_error(data: bytes) -> None:
    """msgspec decodes recursively and raises RecursionError past ~1000 levels; it must come out typed."""
    with pytest.raises(HeaderDecodeError, match=r"nested too deeply|cannot be decoded"):
        decode_json_header(data)


def test_moderately_nested_ext_values_still_become_java_strings() -> None:
    nested = b"[" * 50 + b"]" * 50
    cmd = decode_json_header(b'{"code":12,"extFields":{"k":' + nested + b"}}")
    assert cmd.ext_fields == {"k": nested.decode()}


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("\x01\x0b\x1f", b"\\u0001\\u000B\\u001F"),
        ("\x7f\x85\x9f", b"\\u007F\\u0085\\u009F"),
        ('\b\t\n\f\r"\\', b'\\b\\t\\n\\f\\r\\"\\\\'),
        ("\xa0\u2028é/", "\xa0\u2028é/".encode()),
        ("\\u001b", b"\\\\u001b"),
        ("\\\x1f", b"\\\\\\u001F"),
    ],
)
def test_control_characters_are_escaped_like_fastjson(text: str, written: bytes) -> None:
    for cmd in (RemotingCommand(code=1, remark=text), RemotingCommand(code=1, ext_fields={text: text})):
        header = encode_json_header(cmd)
        assert b'"' + written + b'"' in header
        decoded = decode_json_header(header)
        assert (decoded.remark, decoded.ext_fields) == (cmd.remark, cmd.ext_fields)
