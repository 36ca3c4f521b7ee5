"""``rmq-query query-*`` against the real server over the Java store: exactly what mqadmin printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from clients.cli import main
from protocol.message_id import create_offset_msg_id


def _stdout(vectors_dir: Path, scenario: str) -> str:
    return (vectors_dir / "wire" / scenario / "client-stdout.jsonl").read_text(encoding="utf-8")


def test_query_key_is_mqadmins_output(served_java_store: str, vectors_dir: Path, capsys) -> None:
    assert main(["query-key", "-n", served_java_store, "-t", "TopicA", "-k", "k-3"]) == 0
    captured = capsys.readouterr()
    assert captured.out == _stdout(vectors_dir, "mqadmin_queryMsgByKey")
    assert captured.err == ""


@pytest.mark.parametrize(
    ("scenario", "argv"),
    [
        ("v4_queryMsgByKey", ["-t", "TopicA", "-k", "k-3"]),
        ("v4_queryMsgByKey_producer", ["-t", "TopicB", "-k", "common", "-m", "5"]),
    ],
)
def test_query_key_json_is_the_java_clients_dump(
    served_java_store: str, vectors_dir: Path, capsys, scenario: str, argv: list[str]
) -> None:
    argv = ["query-key", "-n", served_java_store, *argv, "--json", "--body", "--serialize", "rocketmq"]
    assert main(argv) == 0
    assert capsys.readouterr().out == _stdout(vectors_dir, scenario)


def test_query_uniq_is_mqadmins_output(
    served_java_store: str, vectors_dir: Path, tmp_path: Path, capsys, utc
) -> None:
    uniq = "0A0100091F906D06D69C0000001A0002"
    argv = ["query-uniq", "-n", served_java_store, "-t", "topic_c-1", "-i", uniq, "--body-dir", str(tmp_path)]
    assert main(argv) == 0
    expected = _stdout(vectors_dir, "mqadmin_queryMsgByUniqueKey")
    assert capsys.readouterr().out == expected.replace("<harness>/run/msgbodys", str(tmp_path)) + "\n"


def test_query_id_is_mqadmins_output(
    served_java_store: str, vectors_dir: Path, tmp_path: Path, capsys, utc
) -> None:
    host, port = served_java_store.split(":")
    msg_id = create_offset_msg_id(host, int(port), 17457)  # the record's offset, at this server
    argv = ["query-id", "-n", served_java_store, "-i", msg_id, "--body-dir", str(tmp_path)]
    assert main(argv) == 0
    expected = _stdout(vectors_dir, "mqadmin_queryMsgById")
    assert capsys.readouterr().out == expected.replace("<harness>/run/msgbodys", str(tmp_path)) + "\n"


def test_query_id_body_flag(served_java_store: str, tmp_path: Path, capsys) -> None:
    host, port = served_java_store.split(":")
    msg_id = create_offset_msg_id(host, int(port), 16772)
    argv = ["query-id", "-n", served_java_store, "-i", msg_id, "--body", "--body-dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "\nMessage Body:        body-2 héllo wörld 你好 lorem ipsum" in out


@pytest.mark.parametrize(
    ("argv", "code", "stderr"),
    [
        (
            ["query-key", "-t", "TopicA", "-k", "does-not-exist"],
            1,
            "CODE: 208  DESC: query message by key finished, but no message.",
        ),
        (
            ["query-key", "-t", "NoSuchTopic", "-k", "k-1"],
            1,
            "CODE: 17  DESC: The topic[NoSuchTopic] not matched route info",
        ),
        (
            ["query-uniq", "-t", "TopicA", "-i", "0A0100091F906D06D69C0000001A0002"],
            1,
            "CODE: 208  DESC: query message by unique key finished, but no message.",
        ),
        (
            ["query-key", "-t", "TopicA", "-k", "k-3", "-b", "1795216843064"],
            1,
            "CODE: 208  DESC: query message by key finished, but no message.",
        ),
    ],
)
def test_no_result(served_java_store: str, capsys, argv: list[str], code: int, stderr: str) -> None:
    assert main([argv[0], "-n", served_java_store, *argv[1:]]) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"rmq-query {argv[0]}: {stderr}\n"


def test_query_id_at_an_empty_offset(served_java_store: str, capsys) -> None:
    host, port = served_java_store.split(":")
    msg_id = create_offset_msg_id(host, int(port), 16777215)
    assert main(["query-id", "-i", msg_id]) == 1
    remark = "can not find message by the offset, 16777215"
    assert capsys.readouterr().err == f"rmq-query query-id: CODE: 1  DESC: {remark} BROKER: {host}:{port}\n"


def test_query_id_falls_back_to_the_unique_key_query(served_java_store: str, capsys) -> None:
    host, port = served_java_store.split(":")
    msg_id = create_offset_msg_id(host, int(port), 16777215)  # nothing there, and no such unique key
    argv = ["query-id", "-n", served_java_store, "-i", msg_id, "-t", "TopicA", "-b", "0"]
    assert main(argv) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("WARN: view by offset id failed (CODE: 1  DESC: can not find message")
    assert err[1] == "rmq-query query-id: CODE: 208  DESC: query message by id finished, but no message."


def test_query_id_json_is_the_java_clients_dump(served_java_store: str, vectors_dir: Path, capsys) -> None:
    host, port = served_java_store.split(":")
    msg_id = create_offset_msg_id(host, int(port), 17457)
    assert main(["query-id", "-i", msg_id, "--json", "--body"]) == 0
    assert capsys.readouterr().out == _stdout(vectors_dir, "v4_viewMessage")


def test_query_id_several_ids(served_java_store: str, tmp_path: Path, capsys) -> None:
    host, port = served_java_store.split(":")
    good = create_offset_msg_id(host, int(port), 17457)
    empty = create_offset_msg_id(host, int(port), 16777215)
    argv = ["query-id", "-n", served_java_store, "-i", f"{good}, {empty},", "--body-dir", str(tmp_path)]
    assert main(argv) == 1  # the first failing id sets the exit code
    captured = capsys.readouterr()
    assert captured.out.startswith("OffsetID:            7F00000100002A9F0000000000004431\n")
    assert captured.out.count("OffsetID:") == 1
    assert "can not find message by the offset, 16777215" in captured.err


def test_query_id_without_any_id(capsys) -> None:
    assert main(["query-id", "-i", " , "]) == 2
    assert "no message id given" in capsys.readouterr().err


def test_query_id_without_name_server_asks_the_ids_broker_for_consumers(
    served_java_store: str, vectors_dir: Path, tmp_path: Path, capsys, utc
) -> None:
    host, port = served_java_store.split(":")
    msg_id = create_offset_msg_id(host, int(port), 17457)
    assert main(["query-id", "-i", msg_id, "--body-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    expected = _stdout(vectors_dir, "mqadmin_queryMsgById")
    assert captured.out == expected.replace("<harness>/run/msgbodys", str(tmp_path)) + "\n"
    assert captured.err == ""


def test_unwritable_body_dir_is_a_clear_usage_error(served_java_store: str, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    uniq = "0A0100091F906D06D69C0000001A0002"
    argv = ["query-uniq", "-n", served_java_store, "-t", "topic_c-1", "-i", uniq, "--body-dir", str(blocker)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rmq-query query-uniq: cannot write the message body to {blocker}/{uniq}")
