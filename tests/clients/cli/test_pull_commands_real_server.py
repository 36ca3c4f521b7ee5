"""``rmq-query print-msg``, ``print-msg-by-queue``, ``query-offset`` and ``topic-status`` against the
real server over the Java store: byte for byte what mqadmin 4.9.7 printed against the real broker
(``client-stdout.jsonl`` of each capture, all run with TZ=UTC)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from clients.cli import main

#: The -b/-e of the range captures (TZ=UTC).
BEGIN, END = "2026-11-20#23:20:39:851", "2026-11-20#23:20:39:858"
HEAD_END, TAIL_BEGIN = "2026-11-20#23:20:34:320", "2026-11-20#23:20:43:058"


def _stdout(vectors_dir: Path, scenario: str) -> bytes:
    directory = vectors_dir / "wire" / scenario
    plain = directory / "client-stdout.jsonl"
    if plain.exists():
        return plain.read_bytes()
    return gzip.decompress((directory / "client-stdout.jsonl.gz").read_bytes())


@pytest.mark.parametrize(
    ("scenario", "argv"),
    [
        ("mqadmin_printMsg_range", ["print-msg", "-t", "TopicA", "-b", BEGIN, "-e", END]),
        ("mqadmin_printMsg_head", ["print-msg", "-t", "TopicA", "-d", "false", "-e", HEAD_END]),
        ("mqadmin_printMsg_tail", ["print-msg", "-t", "TopicA", "-d", "false", "-b", TAIL_BEGIN]),
        ("mqadmin_printMsgByQueue", ["print-msg-by-queue", "-t", "TopicA", "-a", "broker-a", "-i", "1"]),
        (
            "mqadmin_printMsgByQueue_range",
            ["print-msg-by-queue", "-t", "TopicA", "-a", "broker-a", "-i", "1", "-p", "true", "-d", "false",
             "-f", "true", "-b", BEGIN, "-e", END],
        ),
        ("mqadmin_topicStatus", ["topic-status", "-t", "TopicA"]),
    ],
)  # fmt: skip
@pytest.mark.parametrize("serialize", ["json", "rocketmq"])
def test_output_is_mqadmins(
    scenario: str,
    argv: list[str],
    serialize: str,
    served_java_store: str,
    vectors_dir: Path,
    capfdbinary: pytest.CaptureFixture[bytes],
    utc: None,
) -> None:
    code = main([*argv, "-n", served_java_store, "--serialize", serialize])
    captured = capfdbinary.readouterr()
    assert code == 0, captured.err
    assert captured.out == _stdout(vectors_dir, scenario)
    assert captured.err == b""


def test_query_offset_is_mqadmins_output(
    served_java_store: str,
    vectors_dir: Path,
    tmp_path: Path,
    capfdbinary: pytest.CaptureFixture[bytes],
    utc: None,
) -> None:
    argv = ["query-offset", "-n", served_java_store, "-t", "TopicA", "-b", "broker-a", "-i", "1", "-o", "3"]
    assert main([*argv, "--body-dir", str(tmp_path)]) == 0
    expected = _stdout(vectors_dir, "mqadmin_queryMsgByOffset").replace(
        b"/tmp/rocketmq/msgbodys", str(tmp_path).encode()
    )
    assert capfdbinary.readouterr().out == expected + b"\n"  # rmq-query ends its last line
    assert (tmp_path / "0A0100091F906D06D69C0000015F001B").stat().st_size > 0


@pytest.mark.parametrize(
    ("argv", "code", "stderr"),
    [
        (["query-offset", "-t", "TopicA", "-b", "broker-a", "-i", "1", "-o", "498"], 1, "status NO_NEW_MSG"),
        (
            ["query-offset", "-t", "TopicA", "-b", "broker-a", "-i", "1", "-o", "600"],
            1,
            "status OFFSET_ILLEGAL",
        ),
        (
            ["query-offset", "-t", "TopicA", "-b", "broker-a", "-i", "9", "-o", "0"],
            4,
            "queueId[9] is illegal",
        ),
        (["query-offset", "-t", "TopicA", "-b", "broker-a", "-i", "1", "-o", "-1"], 2, "offset < 0"),
        (["topic-status", "-t", "NoSuchTopic"], 1, "NoSuchTopic"),
        (["print-msg", "-t", "TopicA", "-b", "yesterday"], 2, "not a timestamp"),
    ],
)
def test_errors_are_reported_with_an_exit_code(
    argv: list[str],
    code: int,
    stderr: str,
    served_java_store: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*argv, "-n", served_java_store]) == code
    captured = capsys.readouterr()
    assert stderr in captured.err
    assert "Traceback" not in captured.err


def test_print_msg_sub_expression_filters_by_tag(
    served_java_store: str, capsys: pytest.CaptureFixture[str], java_expected: dict
) -> None:
    """Only tag3 messages are printed, every one of queue 1 (``expected.json`` says which)."""
    argv = ["print-msg-by-queue", "-n", served_java_store, "-t", "TopicA", "-a", "broker-a", "-i", "1"]
    assert main([*argv, "-s", "tag3", "-p", "true", "-d", "false", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    printed = [json.loads(line) for line in lines if '"type":"message"' in line]
    wanted = sorted(
        m["queueOffset"]
        for m in java_expected["messages"]
        if m["topic"] == "TopicA"
        and m["queueId"] == 1
        and m["tags"] == "tag3"
        and m["sysFlag"] & 0xC in (0, 0x8)  # consume-queue entries: not prepared, not rolled back
    )
    assert [m["queueOffset"] for m in printed] == wanted
    assert {m["tags"] for m in printed} == {"tag3"}
