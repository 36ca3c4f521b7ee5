"""``rmq-query query-*`` end to end against a peer replaying real broker frames: output and exit codes."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from clients.cli import main
from protocol.message_id import create_offset_msg_id


def _stdout(vectors_dir: Path, scenario: str) -> str:
    return (vectors_dir / "wire" / scenario / "client-stdout.jsonl").read_text(encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_query_key_prints_mqadmins_table(replay, vectors_dir: Path, capsys) -> None:
    addr = replay("mqadmin_queryMsgByKey")
    assert main(["query-key", "-n", addr, "-t", "TopicA", "-k", "k-3"]) == 0
    captured = capsys.readouterr()
    assert captured.out == _stdout(vectors_dir, "mqadmin_queryMsgByKey")
    assert captured.err == ""


def test_query_key_json_matches_the_java_client_dump(replay, vectors_dir: Path, capsys) -> None:
    addr = replay("v4_queryMsgByKey")
    assert main(["query-key", "-n", addr, "-t", "TopicA", "-k", "k-3", "--json", "--body"]) == 0
    assert capsys.readouterr().out == _stdout(vectors_dir, "v4_queryMsgByKey")


def test_query_key_body_lines(replay, capsys) -> None:
    addr = replay("v4_queryMsgByUniqKey")
    assert main(["query-key", "-n", addr, "-t", "topic_c-1", "-k", "ключ-2", "--body"]) == 0
    out = capsys.readouterr().out
    assert "Message ID:          0A0100091F906D06D69C0000001A0002\n" in out
    assert "Message Body:        body-2 héllo wörld 你好 lorem ipsum" in out


@pytest.mark.parametrize(
    ("scenario", "argv", "code", "stderr"),
    [
        (
            "v4_queryMsgByKey_notfound",
            ["-t", "TopicA", "-k", "does-not-exist"],
            1,
            "rmq-query query-key: CODE: 208  DESC: query message by key finished, but no message.\n",
        ),
        (
            "v4_unknownTopic",
            ["-t", "NoSuchTopic", "-k", "k-1"],
            1,
            "rmq-query query-key: CODE: 17  DESC: The topic[NoSuchTopic] not matched route info\n",
        ),
    ],
)
def test_query_key_no_result(replay, capsys, scenario: str, argv: list[str], code: int, stderr: str) -> None:
    addr = replay(scenario)
    assert main(["query-key", "-n", addr, *argv]) == code
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", stderr)


def test_query_key_no_result_json(replay, capsys) -> None:
    addr = replay("v4_queryMsgByKey_notfound")
    assert main(["query-key", "-n", addr, "-t", "TopicA", "-k", "nope", "--json"]) == 1
    out = capsys.readouterr().out
    assert out.startswith('{"type":"error","error":"MQClientError",')
    assert '"responseCode":208,' in out and out.endswith('"exitCode":1}\n')


def test_unreachable_name_server_exits_3(capsys) -> None:
    addr = f"127.0.0.1:{_free_port()}"
    assert main(["query-key", "-n", addr, "-t", "TopicA", "-k", "k-3"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("rmq-query query-key: connect failed") and addr in err


def test_silent_server_exits_3_after_the_timeout(threaded_peer, capsys) -> None:
    addr = threaded_peer(lambda ref: lambda request: None).peer.addr
    assert main(["query-key", "-n", addr, "-t", "T", "-k", "k", "--timeout", "0.2"]) == 3
    assert "no response within 0.2s" in capsys.readouterr().err


def test_other_server_error_exits_4(threaded_peer, capsys) -> None:
    def refuse(ref):
        return lambda request: request.make_response(16, remark="no permission")

    addr = threaded_peer(refuse).peer.addr
    assert main(["query-key", "-n", addr, "-t", "T", "-k", "k"]) == 4
    assert "CODE: 16  DESC: no permission" in capsys.readouterr().err


def test_query_id_prints_mqadmins_block(replay, vectors_dir: Path, tmp_path: Path, capsys, utc) -> None:
    addr = replay("mqadmin_queryMsgById")
    host, port = addr.split(":")
    msg_id = create_offset_msg_id(host, int(port), 17457)
    argv = ["query-id", "-n", addr, "-i", msg_id, "--body-dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    expected = _stdout(vectors_dir, "mqadmin_queryMsgById").replace("<harness>/run/msgbodys", str(tmp_path))
    assert out == expected + "\n"
    body = (tmp_path / "0A0100091F906D06D69C000000270003").read_bytes()
    assert len(body) == 315


def test_query_id_bad_id_exits_2(capsys) -> None:
    assert main(["query-id", "-i", "not-a-message-id"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rmq-query query-id: invalid message id 'not-a-message-id'")


def test_query_id_empty_offset_exits_1(replay, capsys) -> None:
    host, port = replay("v4_viewMessage_badoffset").split(":")
    assert main(["query-id", "-i", create_offset_msg_id(host, int(port), 16777215)]) == 1
    err = capsys.readouterr().err
    assert "CODE: 1  DESC: can not find message by the offset, 16777215" in err


def test_query_id_unreachable_broker_exits_3(capsys) -> None:
    msg_id = create_offset_msg_id("127.0.0.1", _free_port(), 0)
    assert main(["query-id", "-i", msg_id]) == 3


def test_query_uniq_prints_mqadmins_block(replay, vectors_dir: Path, tmp_path: Path, capsys, utc) -> None:
    addr = replay("mqadmin_queryMsgByUniqueKey")
    uniq = "0A0100091F906D06D69C0000001A0002"
    argv = ["query-uniq", "-n", addr, "-t", "topic_c-1", "-i", uniq, "--body-dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    expected = _stdout(vectors_dir, "mqadmin_queryMsgByUniqueKey")
    assert out == expected.replace("<harness>/run/msgbodys", str(tmp_path)) + "\n"
    assert (tmp_path / uniq).read_bytes().startswith(b"body-2 ")


def test_query_uniq_json(replay, capsys) -> None:
    addr = replay("mqadmin_queryMsgByUniqueKey")
    uniq = "0A0100091F906D06D69C0000001A0002"
    assert main(["query-uniq", "-n", addr, "-t", "topic_c-1", "-i", uniq, "--json", "-a"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('{"type":"message","msgId":"0A0100091F906D06D69C0000001A0002",')
    assert lines[-1] == '{"type":"result","count":1,"matched":1}'


def test_query_uniq_no_match_exits_1(replay, capsys) -> None:
    addr = replay("mqadmin_queryMsgByUniqueKey")
    argv = ["query-uniq", "-n", addr, "-t", "topic_c-1", "-i", "0A0100091F906D06D69C0000001A0003"]
    assert main(argv) == 1
    assert "query message by unique key finished, but no message." in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["query-key", "-n", "127.0.0.1:9876", "-k", "k"],
        ["query-key", "-n", "127.0.0.1:9876", "-t", "T", "-k", "k", "-m", "0"],
        ["query-key", "-n", "127.0.0.1:9876", "-t", "T", "-k", "k", "-b", "yesterday"],
        ["query-uniq", "-n", "127.0.0.1:9876", "-t", "T"],
        ["query-id"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys, monkeypatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: rmq-query" in capsys.readouterr().err


def test_name_server_defaults_to_the_environment(replay, capsys, monkeypatch) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", replay("mqadmin_queryMsgByKey"))
    assert main(["query-key", "-t", "TopicA", "-k", "k-3"]) == 0
    assert capsys.readouterr().out.count("\n") == 19


@pytest.mark.parametrize("command", ["query-key", "query-id", "query-uniq"])
def test_help_documents_the_exit_codes(command: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert "exit codes:\n  0  found\n  1  no result" in out
    assert "3  server unreachable" in out


def test_undecodable_route_is_a_server_error(threaded_peer, capsys) -> None:
    def bad_route(ref):
        return lambda request: request.make_response(0, body=b"{not json")

    addr = threaded_peer(bad_route).peer.addr
    assert main(["query-key", "-n", addr, "-t", "T", "-k", "k"]) == 4
    assert "undecodable topic route body" in capsys.readouterr().err


def test_undecodable_view_answer_is_a_server_error(threaded_peer, capsys) -> None:
    def garbage(ref):
        return lambda request: request.make_response(0, body=b"\x00\x00\x00\x10garbage-garbage-")

    peer = threaded_peer(garbage).peer
    host, port = peer.addr.split(":")
    assert main(["query-id", "-i", create_offset_msg_id(host, int(port), 0)]) == 4
    assert capsys.readouterr().err.startswith("rmq-query query-id: ")


def test_query_key_json_names_the_brokers_that_failed(replay, capsys) -> None:
    dead = f"127.0.0.1:{_free_port()}"

    def two_brokers(real, ref):
        def handler(request):
            answer = real(request)
            if request.code == 105:
                brokers = [
                    {"brokerAddrs": {"0": ref[0]}, "brokerName": "a", "cluster": "c"},
                    {"brokerAddrs": {"0": dead}, "brokerName": "b", "cluster": "c"},
                ]
                answer.body = json.dumps({"brokerDatas": brokers, "queueDatas": []}).encode()
            return answer

        return handler

    addr = replay("mqadmin_queryMsgByKey", two_brokers)
    assert main(["query-key", "-n", addr, "-t", "TopicA", "-k", "k-3", "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out.splitlines()[-1])
    assert summary["count"] == 18
    assert [e["brokerAddr"] for e in summary["brokerErrors"]] == [dead]
    assert captured.err.startswith(f"WARN: query of broker {dead} failed: connect failed")
