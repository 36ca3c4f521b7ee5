"""The requests the client builds are byte-identical to the Java client's (given its language)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clients.admin import query_ext_fields
from clients.client import RemotingClient
from protocol.codes import LanguageCode, RequestCode, SerializeType
from protocol.custom_headers import ViewMessageRequestHeader
from protocol.frame import encode_frame


def _java_client(serialize: SerializeType) -> RemotingClient:
    return RemotingClient(serialize_type=serialize, language=LanguageCode.JAVA, version=407)


@pytest.mark.parametrize("serialize", [SerializeType.JSON, SerializeType.ROCKETMQ])
@pytest.mark.parametrize(
    "name", ["query_message_uniq_false", "query_message_uniq_true", "query_message_unicode"]
)
def test_query_message_request_is_javas(vectors_by_name, vectors_dir: Path, name: str, serialize) -> None:
    vector = vectors_by_name[f"{name}.{serialize.name.lower()}"]
    inputs = vector["inputs"]
    fields = query_ext_fields(
        inputs["topic"],
        inputs["key"],
        inputs["maxNum"],
        inputs["beginTimestamp"],
        inputs["endTimestamp"],
        unique_key=inputs["extra_UNIQUE_KEY_QUERY"] == "true",
    )
    assert list(fields) == vector["extFieldsOrderAsHashMap"]
    request = _java_client(serialize).make_request(RequestCode.QUERY_MESSAGE, fields)
    request.opaque = vector["opaque"]
    assert encode_frame(request) == (vectors_dir / vector["wireFile"]).read_bytes()


@pytest.mark.parametrize("serialize", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_view_message_request_is_javas(vectors_by_name, vectors_dir: Path, serialize) -> None:
    vector = vectors_by_name[f"view_message_by_id.{serialize.name.lower()}"]
    fields = ViewMessageRequestHeader(vector["inputs"]["offset"]).to_ext_fields()
    request = _java_client(serialize).make_request(RequestCode.VIEW_MESSAGE_BY_ID, fields)
    request.opaque = vector["opaque"]
    assert encode_frame(request) == (vectors_dir / vector["wireFile"]).read_bytes()
