"""The Go gRPC load generator's driver (``benchmarks/grpc_load.py``): its rows, its request file,
and a clear skip when there is no Go toolchain."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import grpc_load
from server.grpc.v2 import service

REPO = Path(__file__).resolve().parents[2]


def test_rows_are_kind_and_calls_in_flight_and_anything_else_is_refused() -> None:
    rows = grpc_load.parse_rows("send:1,receive-each:32,receive-batch:128")
    assert [(r.kind, r.inflight, r.main_call) for r in rows] == [
        ("send", 1, "send"),
        ("receive-each", 32, "receive"),
        ("receive-batch", 128, "receive"),
    ]
    for bad in ("send", "send:0", "send:x", "pull:4", "send:-1"):
        with pytest.raises(SystemExit, match="KIND:IN_FLIGHT"):
            grpc_load.parse_rows(bad)


def test_the_request_file_is_length_prefixed_serialized_requests() -> None:
    requests = grpc_load.send_requests(100, count=3)
    data = grpc_load.frames(requests)
    at, parsed = 0, []
    while at < len(data):
        (n,) = struct.unpack_from(">I", data, at)
        parsed.append(service.SendMessageRequest.FromString(data[at + 4 : at + 4 + n]))
        at += 4 + n
    assert [len(p.messages) for p in parsed] == [1, 1, 1]
    assert {p.messages[0].body for p in parsed} == {b"x" * 100}
    assert len({p.messages[0].system_properties.message_id for p in parsed}) == 3


def test_the_ack_prefix_names_group_and_topic_and_takes_entries_appended() -> None:
    prefix = grpc_load.ack_prefix("T1")
    entry = service.AckMessageRequest(entries=[service.AckMessageEntry(message_id="m", receipt_handle="h")])
    request = service.AckMessageRequest.FromString(prefix + entry.SerializeToString())
    assert (request.group.name, request.topic.name) == (grpc_load.GROUP, "T1")
    assert [(e.message_id, e.receipt_handle) for e in request.entries] == [("m", "h")]


def test_calls_are_spread_so_no_connection_carries_more_than_the_server_allows() -> None:
    assert [grpc_load.connections(n) for n in (1, 64, 65, 128, 129)] == [1, 1, 2, 2, 3]


def test_without_go_the_go_generator_is_skipped_with_a_clear_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(grpc_load.shutil, "which", lambda name: None)
    assert grpc_load.build_go(tmp_path) is None
    assert "no `go` on PATH: the Go generator is skipped" in capsys.readouterr().err


def test_the_driver_with_only_go_and_no_go_exits_cleanly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.grpc_load", "--generators", "go", "--rounds", "1"],
        cwd=REPO,
        env={"PATH": str(tmp_path), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "nothing to run without Go" in done.stderr
