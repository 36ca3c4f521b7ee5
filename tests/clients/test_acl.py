"""ACL signing byte-exact against what the real mqadmin 4.9.7 signed (secret from its test setup)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clients.acl import AclSigner, signature
from clients.cli import main
from clients.client import RemotingClient
from protocol.codes import LanguageCode
from protocol.command import RemotingCommand
from protocol.frame import decode_frame, encode_frame
from protocol.java_hashmap import as_java_hashmap

#: The key pair the golden mqadmin runs used (RocketMQ's sample plain_acl.yml account).
ACCESS_KEY = "rocketmq2"
SECRET_KEY = "12345678"


def _signed_requests(vectors_dir: Path) -> list[RemotingCommand]:
    requests = []
    for path in sorted((vectors_dir / "wire").glob("mqadmin_*/*_req_*.bin")):
        cmd = decode_frame(path.read_bytes())
        if cmd.ext_fields and "Signature" in cmd.ext_fields:
            requests.append(cmd)
    return requests


def test_go_client_vector() -> None:
    assert (
        signature({}, b"Hello RocketMQ Client ACL Feature", "adiaushdiaushd")
        == "tAb/54Rwwcq+pbH8Loi7FWX4QSQ="
    )


def test_every_signature_mqadmin_sent(vectors_dir: Path) -> None:
    requests = _signed_requests(vectors_dir)
    assert len(requests) >= 10
    assert {r.code for r in requests} >= {12, 33, 105, 300}
    for request in requests:
        assert request.ext_fields is not None
        unsigned = {k: v for k, v in request.ext_fields.items() if k not in ("Signature", "AccessKey")}
        mine = RemotingCommand(code=request.code, ext_fields=unsigned, body=request.body)
        AclSigner(ACCESS_KEY, SECRET_KEY)(mine)
        assert mine.ext_fields is not None
        assert mine.ext_fields["Signature"] == request.ext_fields["Signature"], request.code


def test_security_token_is_signed_too() -> None:
    cmd = RemotingCommand(code=12, ext_fields={"topic": "T"})
    AclSigner("ak", "sk", security_token="tok")(cmd)
    assert cmd.ext_fields is not None
    assert cmd.ext_fields["SecurityToken"] == "tok"
    assert cmd.ext_fields["Signature"] == signature(
        {"topic": "T", "AccessKey": "ak", "SecurityToken": "tok"}, None, "sk"
    )


def test_signer_needs_both_keys() -> None:
    with pytest.raises(ValueError):
        AclSigner("ak", "")


async def test_the_client_signs_every_request(fake_peer) -> None:
    peer = await fake_peer(lambda request: request.make_response(0))
    async with RemotingClient(rpc_hook=AclSigner(ACCESS_KEY, SECRET_KEY)) as client:
        await client.invoke(peer.addr, 105, {"topic": "TopicA"})
    fields = peer.requests[0].ext_fields
    assert fields is not None
    assert fields["AccessKey"] == ACCESS_KEY
    assert fields["Signature"] == signature({"topic": "TopicA", "AccessKey": ACCESS_KEY}, None, SECRET_KEY)


def test_cli_wants_both_keys(capsys) -> None:
    argv = ["query-key", "-n", "127.0.0.1:1", "-t", "T", "-k", "k", "--access-key", "ak"]
    assert main(argv) == 2
    assert "needs both --access-key and --secret-key" in capsys.readouterr().err


def test_cli_signs_with_the_keys(replay, capsys) -> None:
    addr = replay("mqadmin_queryMsgByKey")
    argv = [
        "query-key",
        "-n",
        addr,
        "-t",
        "TopicA",
        "-k",
        "k-3",
        "--access-key",
        ACCESS_KEY,
        "--secret-key",
        SECRET_KEY,
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("#Message ID")


def test_signed_requests_are_byte_identical_to_mqadmins(vectors_dir: Path) -> None:
    client = RemotingClient(
        language=LanguageCode.JAVA, version=407, rpc_hook=AclSigner(ACCESS_KEY, SECRET_KEY)
    )
    checked = 0
    for path in sorted((vectors_dir / "wire").glob("mqadmin_*/*_req_*.bin")):
        original = decode_frame(path.read_bytes())
        if not original.ext_fields or "Signature" not in original.ext_fields:
            continue
        unsigned = {k: v for k, v in original.ext_fields.items() if k not in ("Signature", "AccessKey")}
        request = client.make_request(original.code, as_java_hashmap(unsigned), original.body)
        request.opaque = original.opaque
        assert encode_frame(request) == path.read_bytes(), path.name
        checked += 1
    assert checked >= 10
