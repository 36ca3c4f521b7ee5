"""Shared by the tests that hold the compiled decoders against their references: exact outcomes
(types, extFields order, error type and message, ``FrameError.decoded``) and the golden frames."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from protocol import frame, header_json
from protocol.accel import pure_python
from protocol.command import RemotingCommand
from protocol.errors import FrameError


def compiled_modules() -> tuple[ModuleType, ModuleType]:
    """(protocol._header_json_fast, protocol._frame_fast), bound to the references as the protocol
    modules bind them (under RMQ_PURE_PYTHON=1 they did not load them: the test binds them itself,
    so the comparison runs both ways). Skips when the extensions are not built."""
    try:
        header_fast = importlib.import_module("protocol._header_json_fast")
        frame_fast = importlib.import_module("protocol._frame_fast")
    except ImportError:
        pytest.skip("the compiled accelerators are not built (python setup.py build_ext --inplace)")
    if pure_python():
        header_json._bind_twin(header_fast)
        frame._bind_twin(frame_fast)
    else:
        # Loaded and in use: the decoder the server runs is the compiled one.
        assert header_json.decode_json_header is header_fast.decode_json_header
        assert frame.decode_frames is frame_fast.decode_frames
    return header_fast, frame_fast


def exact(cmd: RemotingCommand) -> tuple:
    """Every field with its type: dataclass equality would not see LanguageCode.JAVA vs 0, an
    extFields order, or bytes vs bytearray."""
    ext = None if cmd.ext_fields is None else [(type(k), k, type(v), v) for k, v in cmd.ext_fields.items()]
    return (
        type(cmd),
        type(cmd.code),
        cmd.code,
        type(cmd.language),
        cmd.language,
        type(cmd.version),
        cmd.version,
        type(cmd.opaque),
        cmd.opaque,
        type(cmd.flag),
        cmd.flag,
        type(cmd.remark),
        cmd.remark,
        type(cmd.ext_fields),
        ext,
        type(cmd.body),
        None if cmd.body is None else bytes(cmd.body),
        type(cmd.serialize_type),
        cmd.serialize_type,
    )


def outcome(call: Callable[[], object]) -> tuple:
    """("ok", exact result) or ("error", type, message, decoded commands) of ``call()``."""
    try:
        result = call()
    except Exception as exc:  # any exception must be the same on both sides
        decoded = tuple(exact(c) for c in exc.decoded) if isinstance(exc, FrameError) else None
        return ("error", type(exc), str(exc), decoded)
    if isinstance(result, RemotingCommand):
        return ("ok", exact(result))
    commands, pos = result  # type: ignore[misc]
    return ("ok", [exact(c) for c in commands], pos)


def golden_frames(vectors_dir: Path) -> list[tuple[str, bytes]]:
    """Every whole frame the real Java code wrote: the vectors' encodings and the captured traffic."""
    frames = []
    for path in sorted(vectors_dir.glob("*.bin")) + sorted(vectors_dir.glob("wire/*/*.bin")):
        data = path.read_bytes()
        if len(data) >= 8 and int.from_bytes(data[:4], "big", signed=True) + 4 == len(data):
            frames.append((str(path.relative_to(vectors_dir)), data))
    return frames
