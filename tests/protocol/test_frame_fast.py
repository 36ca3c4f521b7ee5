"""The compiled frame-head encoder (``protocol._frame_fast.encode_json_head``) against its reference.

It must write exactly the bytes Java wrote for the golden vectors, and for anything else either the
reference's bytes or None (the caller then takes the reference path): never different bytes.
"""

from __future__ import annotations

import importlib
import random
from pathlib import Path
from types import ModuleType

import pytest

from protocol.codes import LanguageCode, SerializeType
from protocol.command import RemotingCommand
from protocol.frame import _reference_json_head, decode_frame, encode_frame


def _fast() -> ModuleType:
    try:
        return importlib.import_module("protocol._frame_fast")
    except ImportError:
        pytest.skip("the compiled accelerator is not built (python setup.py build_ext --inplace)")


def test_golden_json_frames_are_written_byte_for_byte(manifest: dict, vectors_dir: Path) -> None:
    fast = _fast()
    checked = 0
    for vector in manifest["vectors"]:
        if vector.get("serializeType") != "JSON" or "file" not in vector:
            continue
        wire = (vectors_dir / vector["file"]).read_bytes()
        cmd = decode_frame(wire)
        body_len = len(cmd.body) if cmd.body else 0
        head = fast.encode_json_head(cmd, body_len)
        if head is not None:
            assert head == _reference_json_head(cmd, body_len)
            assert head + (bytes(cmd.body) if cmd.body else b"") == wire, vector["name"]
            checked += 1
    assert checked >= 10


STRINGS = [
    "",
    "k-3",
    "a b",
    'q"uote',
    "back\\slash",
    "tab\t",
    "\x00",
    "\x7f",
    "\u00e9t\u00e9",
    "\u0085",
    "\U0001f600",
]


def test_any_command_gets_the_references_bytes_or_none() -> None:
    fast = _fast()
    rng = random.Random(3)
    taken = 0
    for _ in range(5000):
        ext = None
        if rng.random() < 0.7:
            ext = {rng.choice(STRINGS) + str(i): rng.choice(STRINGS) for i in range(rng.randrange(0, 5))}
        cmd = RemotingCommand(
            code=rng.choice([0, 12, 33, -1, 2**31 - 1, -(2**31)]),
            language=rng.choice([LanguageCode.JAVA, LanguageCode.GO, LanguageCode.NODE_JS, 7, 99]),
            version=rng.choice([0, 407, 2**31 - 1]),
            opaque=rng.choice([0, 1, -7, 2**31 - 1, rng.randrange(2**31)]),
            flag=rng.choice([0, 1, 2, 3]),
            remark=rng.choice([None, *STRINGS]),
            ext_fields=ext,
            serialize_type=SerializeType.JSON,
        )
        body_len = rng.choice([0, 1, 100, 2**24])
        head = fast.encode_json_head(cmd, body_len)
        if head is not None:
            assert head == _reference_json_head(cmd, body_len), cmd
            taken += 1
    assert taken > 300, "the common case is taken by the compiled path"


@pytest.mark.parametrize("field", ["code", "opaque", "flag", "version"])
def test_out_of_range_numbers_are_left_to_the_reference(field: str) -> None:
    cmd = RemotingCommand(code=0, language=LanguageCode.JAVA, serialize_type=SerializeType.JSON)
    setattr(cmd, field, 2**31)
    assert _fast().encode_json_head(cmd, 0) is None
    with pytest.raises(Exception, match="must fit a Java int"):
        encode_frame(cmd)
