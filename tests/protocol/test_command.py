"""``RemotingCommand`` flags and the response a Java broker builds for a request."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE, LanguageCode, ResponseCode, SerializeType
from protocol.command import BROKER_VERSION, RemotingCommand
from protocol.frame import decode_frame, encode_frame


def test_flag_helpers() -> None:
    assert not RemotingCommand(code=12).is_response
    assert not RemotingCommand(code=12).is_oneway
    assert RemotingCommand(code=0, flag=RPC_TYPE_RESPONSE).is_response
    oneway = RemotingCommand(code=35, flag=RPC_ONEWAY)
    assert oneway.is_oneway and not oneway.is_response
    assert RemotingCommand(code=0, flag=RPC_ONEWAY | RPC_TYPE_RESPONSE).is_response


def test_broker_version_is_the_golden_brokers(manifest: dict) -> None:
    assert manifest["mqVersionCurrent"] == BROKER_VERSION


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_make_response_mirrors_the_request(serialize_type: SerializeType) -> None:
    request = RemotingCommand(
        code=12,
        language=LanguageCode.GO,
        version=479,
        opaque=12345,
        flag=0,
        ext_fields={"topic": "T"},
        serialize_type=serialize_type,
    )
    response = request.make_response(ResponseCode.QUERY_NOT_FOUND, "nope", {"a": "1"}, b"body")
    assert response.opaque == 12345
    assert response.flag == RPC_TYPE_RESPONSE and response.is_response and not response.is_oneway
    assert response.code == ResponseCode.QUERY_NOT_FOUND
    assert response.language is LanguageCode.JAVA
    assert response.version == BROKER_VERSION
    assert response.serialize_type is serialize_type
    assert (response.remark, response.ext_fields, response.body) == ("nope", {"a": "1"}, b"body")
    assert request.make_response(0, version=479).version == 479


@pytest.mark.parametrize(
    ("request_file", "response_file"),
    [
        ("query_message.json.encode.bin", "resp_request_code_not_supported.json.encode.bin"),
        ("query_message.rocketmq.encode.bin", "resp_request_code_not_supported.rocketmq.encode.bin"),
        ("view_message_by_id.json.encode.bin", "resp_view_message_not_found.json.encode.bin"),
        ("view_message_by_id.rocketmq.encode.bin", "resp_view_message_not_found.rocketmq.encode.bin"),
    ],
)
def test_make_response_is_byte_exact_with_the_java_broker(
    vectors_dir: Path, request_file: str, response_file: str
) -> None:
    request = decode_frame((vectors_dir / request_file).read_bytes())
    expected = (vectors_dir / response_file).read_bytes()
    java = decode_frame(expected)
    response = request.make_response(java.code, java.remark)
    assert encode_frame(response) == expected


def test_make_response_matches_captured_broker_answers(vectors_dir: Path) -> None:
    """A 4.9.7 broker's answer to a QUERY_MESSAGE from a 4.9.7 client, rebuilt from the request."""
    scenario = vectors_dir / "wire" / "v4_queryMsgByKey_notfound"
    request = decode_frame((scenario / "004_req_code12.bin").read_bytes())
    expected = (scenario / "005_resp_code22.bin").read_bytes()
    java = decode_frame(expected)
    response = request.make_response(java.code, java.remark, java.ext_fields)
    assert encode_frame(response) == expected
