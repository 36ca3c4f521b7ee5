"""The ACL signature content: Java's String order for keys, exclusions, the body appended."""

from __future__ import annotations

from protocol.acl_signature import UNIQUE_KEY_QUERY, acl_signature, signed_content


def test_keys_sort_as_java_strings_not_code_points() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16, which sorts before U+FF61 in Java.
    fields = {"\uff61": "b", "\U0001f600": "a", "B": "2", "a": "3", "A": "1"}
    assert signed_content(fields, None) == b"123ab"
    assert signed_content({"b": "2", "a": "1"}, None) == b"12"


def test_signature_and_excluded_fields_are_left_out_and_the_body_appended() -> None:
    fields = {"topic": "T", "Signature": "old", UNIQUE_KEY_QUERY: "true"}
    assert signed_content(fields, b"\x00body") == b"trueT\x00body"  # "_UNIQUE..." sorts before "topic"
    assert signed_content(fields, None, exclude=(UNIQUE_KEY_QUERY,)) == b"T"


def test_the_go_client_vector() -> None:
    assert (
        acl_signature({}, b"Hello RocketMQ Client ACL Feature", "adiaushdiaushd")
        == "tAb/54Rwwcq+pbH8Loi7FWX4QSQ="
    )
