"""The query flags reach the wire and shape the output: ``-b -e -m -c`` of query-key, ``-a`` of query-uniq.

A peer replays the real broker's answers; the key query's request is captured to check what was
asked, and the unique-key answer is replaced by two stored copies of one message (a producer retry),
newest first, to check that ``-a`` prints both oldest first and that without it only the oldest is.
"""

from __future__ import annotations

from pathlib import Path

from clients.cli import main
from protocol.command import RemotingCommand
from protocol.frame import decode_frame
from protocol.message import decode_messages, encode_message

UNIQ = "0A0100091F906D06D69C0000001A0002"


def test_query_key_sends_the_time_range_max_num_and_asks_only_the_cluster(replay, capsys) -> None:
    asked: list[RemotingCommand] = []

    def capture(real, ref):
        def handler(request: RemotingCommand):
            if request.code == 12:
                asked.append(request)
            return real(request)

        return handler

    addr = replay("mqadmin_queryMsgByKey", capture)
    argv = [
        "query-key",
        "-n",
        addr,
        "-t",
        "TopicA",
        "-k",
        "k-3",
        "-b",
        "5",
        "-e",
        " 1795216843064",
        "-m",
        "7",
    ]
    assert main(argv) == 0
    assert main([*argv, "-c", "NoSuchCluster"]) == 1  # no broker of that cluster: no route, nothing asked
    assert len(asked) == 1
    fields = asked[0].ext_fields or {}
    assert (fields["beginTimestamp"], fields["endTimestamp"], fields["maxNum"]) == ("5", "1795216843064", "7")
    assert "CODE: 17  DESC: The topic[TopicA] not matched route info" in capsys.readouterr().err


def _two_copies(vectors_dir: Path) -> bytes:
    body = decode_frame(
        (vectors_dir / "wire/mqadmin_queryMsgByUniqueKey/005_resp_code0.bin").read_bytes()
    ).body
    first = decode_messages(bytes(body or b""))[0]
    older, newer = first, decode_messages(bytes(body or b""))[0]
    newer.store_timestamp = older.store_timestamp + 1000
    newer.queue_offset = older.queue_offset + 1
    newer.body = b"the retry"
    newer.stored_body = None
    return encode_message(newer) + encode_message(older)  # newest first, as an index chain returns them


def test_query_uniq_all_prints_every_copy_oldest_first(
    replay, vectors_dir: Path, tmp_path: Path, capsys
) -> None:
    answer = _two_copies(vectors_dir)

    def duplicate(real, ref):
        def handler(request: RemotingCommand):
            response = real(request)
            if request.code == 12 and isinstance(response, RemotingCommand):
                response.body = answer
            return response

        return handler

    addr = replay("mqadmin_queryMsgByUniqueKey", duplicate)
    argv = ["query-uniq", "-n", addr, "-t", "topic_c-1", "-i", UNIQ, "--body-dir", str(tmp_path)]
    assert main([*argv, "-a"]) == 0
    out = capsys.readouterr().out
    assert out.count("Topic:               topic_c-1\n") == 2
    offsets = [line.split()[-1] for line in out.splitlines() if line.startswith("Queue Offset:")]
    assert int(offsets[1]) == int(offsets[0]) + 1  # oldest (lower queue offset here) first
    assert f"Message Body Path:   {tmp_path}/{UNIQ}\n" in out
    assert f"Message Body Path:   {tmp_path}/{UNIQ}_1\n" in out
    assert (tmp_path / f"{UNIQ}_1").read_bytes() == b"the retry"
    assert not (tmp_path / UNIQ).read_bytes().startswith(b"the retry")

    assert main([*argv, "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == '{"type":"result","count":1,"matched":2}'
    assert main(argv) == 0
    assert capsys.readouterr().out.count("Topic:") == 1
