"""Random commands survive encode → decode in both serializations, normalised the way Java reads
them back (ROCKETMQ: zero-length strings are null)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codes import LanguageCode, SerializeType
from protocol.command import RemotingCommand
from protocol.frame import FrameDecoder, decode_frame, encode_frame, encode_frame_parts

# Valid Unicode only: a lone surrogate cannot be written as UTF-8 (see test_encode_errors).
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
int16 = st.integers(-(1 << 15), (1 << 15) - 1)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)

commands = st.builds(
    RemotingCommand,
    code=int16,
    language=st.sampled_from(list(LanguageCode)),
    version=int16,
    opaque=int32,
    flag=int32,
    remark=st.none() | text,
    ext_fields=st.none() | st.dictionaries(text, text, max_size=8),
    body=st.none() | st.binary(min_size=1, max_size=2048),
    serialize_type=st.sampled_from(list(SerializeType)),
)


def _as_java_reads_it(cmd: RemotingCommand) -> RemotingCommand:
    if cmd.serialize_type is SerializeType.JSON:
        return cmd
    ext = {k: v for k, v in (cmd.ext_fields or {}).items() if k and v}
    return RemotingCommand(
        code=cmd.code,
        language=cmd.language,
        version=cmd.version,
        opaque=cmd.opaque,
        flag=cmd.flag,
        remark=cmd.remark or None,
        ext_fields=ext or None,
        body=cmd.body,
        serialize_type=cmd.serialize_type,
    )


@settings(max_examples=300, deadline=None)
@given(cmd=commands)
def test_roundtrip(cmd: RemotingCommand) -> None:
    frame = encode_frame(cmd)
    decoded = decode_frame(frame)
    expected = _as_java_reads_it(cmd)
    assert decoded == expected
    # Same key order too: the order is what makes re-encoding byte-exact.
    assert list(decoded.ext_fields or ()) == list(expected.ext_fields or ())
    assert encode_frame(decoded) == encode_frame(expected)
    head, body = encode_frame_parts(cmd)
    assert head + (body or b"") == frame


@settings(max_examples=50, deadline=None)
@given(cmds=st.lists(commands, min_size=1, max_size=5), chunk=st.integers(1, 97))
def test_roundtrip_through_a_chunked_stream(cmds: list[RemotingCommand], chunk: int) -> None:
    stream = b"".join(encode_frame(cmd) for cmd in cmds)
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    for pos in range(0, len(stream), chunk):
        got.extend(decoder.feed(stream[pos : pos + chunk]))
    assert got == [_as_java_reads_it(cmd) for cmd in cmds]
