"""Commands that cannot go on the wire raise ``CommandEncodeError`` instead of writing bad bytes."""

from __future__ import annotations

import pytest

from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from protocol.errors import CommandEncodeError, ProtocolError
from protocol.frame import encode_frame, encode_frame_parts

JSON = SerializeType.JSON
ROCKETMQ = SerializeType.ROCKETMQ


@pytest.mark.parametrize(
    "cmd",
    [
        RemotingCommand(code=1 << 15, serialize_type=ROCKETMQ),
        RemotingCommand(code=1, version=-(1 << 15) - 1, serialize_type=ROCKETMQ),
        RemotingCommand(code=1, opaque=1 << 31, serialize_type=ROCKETMQ),
        RemotingCommand(code=1, language=256, serialize_type=ROCKETMQ),
        RemotingCommand(code=1, remark="\ud800", serialize_type=ROCKETMQ),
        RemotingCommand(code=1, ext_fields={"k": "\udfff"}, serialize_type=ROCKETMQ),
        RemotingCommand(code=1, ext_fields={"k": 5}, serialize_type=ROCKETMQ),  # type: ignore[dict-item]
        RemotingCommand(code=1, ext_fields={"k" * 0x8000: "v"}, serialize_type=ROCKETMQ),
        RemotingCommand(code=1 << 31, serialize_type=JSON),
        RemotingCommand(code=1, flag=-(1 << 31) - 1, serialize_type=JSON),
        RemotingCommand(code=1, remark="\ud800", serialize_type=JSON),
        RemotingCommand(code=1, ext_fields={"k": 5}, serialize_type=JSON),  # type: ignore[dict-item]
        RemotingCommand(code=1, ext_fields={"\udc00": "v"}, serialize_type=JSON),
        RemotingCommand(code=1, remark="x" * (1 << 24), serialize_type=JSON),
        RemotingCommand(code=1, serialize_type=7),  # type: ignore[arg-type]
    ],
    ids=lambda cmd: f"{cmd.serialize_type}",
)
def test_unencodable_commands(cmd: RemotingCommand) -> None:
    with pytest.raises(CommandEncodeError) as info:
        encode_frame(cmd)
    assert isinstance(info.value, ProtocolError)
    with pytest.raises(CommandEncodeError):
        encode_frame_parts(cmd)


def test_java_extremes_still_encode() -> None:
    for serialize_type in SerializeType:
        cmd = RemotingCommand(
            code=-(1 << 15),
            version=(1 << 15) - 1,
            opaque=-(1 << 31),
            flag=(1 << 31) - 1,
            serialize_type=serialize_type,
        )
        assert encode_frame(cmd)
