"""Every remoting vector written by the real Java 4.9.7 ``RemotingCommand`` decodes to the manifest's
values and encodes back to the same bytes, from the decoded command and from the manifest inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.codes import LanguageCode, SerializeType
from protocol.command import RemotingCommand
from protocol.frame import decode_frame, encode_frame, encode_frame_parts
from protocol.header_json import encode_json_header


def _remoting_vectors(manifest: dict) -> list[dict]:
    vectors = [v for v in manifest["vectors"] if "wireFile" in v]
    assert len(vectors) >= 26, "the manifest lost its remoting vectors"
    return vectors


def _command_from_manifest(vector: dict) -> RemotingCommand:
    """The command Java encoded, rebuilt from the manifest's inputs (extFields in HashMap order)."""
    ext = vector["extFields"]
    order = vector["extFieldsOrderAsHashMap"]
    body = bytes.fromhex(vector["bodyHex"]) if vector["bodyHex"] else None
    return RemotingCommand(
        code=vector["code"],
        language=LanguageCode[vector["language"]],
        version=vector["version"],
        opaque=vector["opaque"],
        flag=vector["flag"],
        remark=vector["remark"],
        ext_fields=None if ext is None else {key: ext[key] for key in order},
        body=body,
        serialize_type=SerializeType[vector["serializeType"]],
    )


def test_every_vector_decodes_to_the_manifest_values(manifest: dict, vectors_dir: Path) -> None:
    for vector in _remoting_vectors(manifest):
        decoded = vector["decoded"]
        for name in (vector["file"], vector["wireFile"]):
            data = (vectors_dir / name).read_bytes()
            cmd = decode_frame(data)
            where = f"{vector['name']} ({name})"
            assert cmd.code == decoded["code"], where
            assert cmd.flag == decoded["flag"], where
            assert cmd.opaque == decoded["opaque"], where
            assert cmd.version == decoded["version"], where
            assert cmd.language is LanguageCode[decoded["language"]], where
            assert cmd.remark == decoded["remark"], where
            assert cmd.ext_fields == decoded["extFields"], where
            if decoded["extFields"] is not None:
                assert list(cmd.ext_fields or ()) == vector["extFieldsOrderAsHashMap"], where
            assert cmd.serialize_type is SerializeType[decoded["serializeType"]], where
            expected_body = bytes.fromhex(vector["bodyHex"]) if vector["bodyHex"] else None
            assert cmd.body == expected_body, where
            assert len(cmd.body or b"") == vector["bodyLen"], where
            assert int.from_bytes(data[0:4], "big") == vector["totalLengthField"], where
            assert int.from_bytes(data[4:8], "big") == vector["headerLengthField"], where


def test_every_vector_reencodes_byte_exact(manifest: dict, vectors_dir: Path) -> None:
    for vector in _remoting_vectors(manifest):
        for name in (vector["file"], vector["wireFile"]):
            data = (vectors_dir / name).read_bytes()
            assert encode_frame(decode_frame(data)) == data, f"{vector['name']} ({name})"


def test_every_vector_encodes_from_its_inputs(manifest: dict, vectors_dir: Path) -> None:
    for vector in _remoting_vectors(manifest):
        expected = (vectors_dir / vector["file"]).read_bytes()
        assert encode_frame(_command_from_manifest(vector)) == expected, vector["name"]


def test_json_headers_match_the_java_header_text(manifest: dict) -> None:
    json_vectors = [v for v in _remoting_vectors(manifest) if v["serializeType"] == "JSON"]
    assert json_vectors
    for vector in json_vectors:
        header = encode_json_header(_command_from_manifest(vector))
        assert header == vector["headerJson"].encode("utf-8"), vector["name"]
        assert len(header) == vector["headerLength"], vector["name"]


def test_parts_join_to_the_frame_and_keep_the_body_uncopied(manifest: dict, vectors_dir: Path) -> None:
    for vector in _remoting_vectors(manifest):
        data = (vectors_dir / vector["file"]).read_bytes()
        cmd = decode_frame(data)
        head, body = encode_frame_parts(cmd)
        assert head + (body or b"") == data, vector["name"]
        if cmd.body is None:
            assert body is None
        else:
            assert body is cmd.body, "encode_frame_parts must hand the body back as-is"


def test_query_transfer_layout_is_one_frame(vectors_by_name: dict, vectors_dir: Path) -> None:
    """The broker writes QUERY_MESSAGE answers as header-then-raw-records; it is still one frame."""
    transfer = vectors_by_name["resp_query_message_success_transfer.json"]
    data = (vectors_dir / transfer["file"]).read_bytes()
    assert len(data) == transfer["length"]
    cmd = decode_frame(data)
    plain = vectors_by_name["resp_query_message_success.json"]
    assert cmd.code == plain["code"] and cmd.opaque == plain["opaque"] and cmd.is_response
    assert cmd.ext_fields == plain["extFields"]
    assert cmd.body == bytes.fromhex(plain["bodyHex"])
    head, body = encode_frame_parts(cmd)
    assert head + body == data


@pytest.mark.parametrize("serialization", ["json", "rocketmq"])
def test_heart_beat_body_is_the_java_json(
    vectors_by_name: dict, vectors_dir: Path, serialization: str
) -> None:
    vector = vectors_by_name[f"heart_beat.{serialization}"]
    cmd = decode_frame((vectors_dir / vector["file"]).read_bytes())
    assert cmd.body is not None
    assert json.loads(cmd.body) == json.loads(vector["inputs"]["bodyJson"])
