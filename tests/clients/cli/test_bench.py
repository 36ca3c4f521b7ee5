"""``rmq-query bench``: real traffic against the real server, bounded, reported; samples and errors."""

from __future__ import annotations

import json
import random
import socket
import time
from collections import Counter
from pathlib import Path

import pytest

from clients.cli import main
from clients.load import LoadReport, key_factory, mixed_factory, run_load, view_factory
from clients.samples import SampleError, read_id_list, read_key_list, sample_store
from protocol.message_id import create_offset_msg_id


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_sample_store_walks_every_record(java_store_copy: Path, java_expected: dict) -> None:
    samples = sample_store(java_store_copy)
    messages = java_expected["messages"]
    assert samples.offsets == [m["commitLogOffset"] for m in messages]
    assert ("TopicA", "k-3") in samples.keys
    assert ("TopicA", "Aa") in samples.keys
    indexed = [m for m in messages if m["sysFlag"] & 0xC != 0xC]  # rolled-back ones are never indexed
    assert len(samples.unique_keys) == sum(1 for m in indexed if m["uniqKey"])
    assert len(samples.keys) == sum(len([k for k in (m["keys"] or "").split(" ") if k]) for m in indexed)
    assert len(sample_store(java_store_copy, limit=10).offsets) == 10


def test_sample_store_with_its_broker_conf(java_store_copy: Path) -> None:
    conf = java_store_copy.parent / "java-4.9.7-a.broker.conf"
    assert len(sample_store(java_store_copy, config_path=conf).offsets) == 5000


def test_sample_store_from_its_broker_conf_alone(java_store_copy: Path) -> None:
    conf = java_store_copy.parent / "java-4.9.7-a.broker.conf"
    assert len(sample_store(None, config_path=conf).offsets) == 5000


def test_the_store_root_wins_over_the_broker_confs(java_store_copy: Path, tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("storePathRootDir=/nowhere\nmappedFileSizeCommitLog=262144\n", encoding="utf-8")
    assert len(sample_store(java_store_copy, config_path=conf).offsets) == 5000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "cannot read"),
        ("mappedFileSizeCommitLog=abc\n", "is not an integer"),
        ("mappedFileSizeCommitLog=0\n", "must be positive"),
    ],
)
def test_an_unusable_broker_conf_is_a_sample_error(
    java_store_copy: Path, tmp_path: Path, text: str | None, message: str
) -> None:
    conf = tmp_path / "broker.conf"
    if text is not None:
        conf.write_text(text, encoding="utf-8")
    with pytest.raises(SampleError, match=f"cannot use {conf}: .*{message}"):
        sample_store(java_store_copy, config_path=conf)
    with pytest.raises(SampleError, match="no store to sample"):
        sample_store(None)


def test_sample_store_without_a_store(tmp_path: Path) -> None:
    with pytest.raises(SampleError, match="no CommitLog directory"):
        sample_store(tmp_path)
    (tmp_path / "commitlog").mkdir()
    with pytest.raises(SampleError, match="no CommitLog files"):
        sample_store(tmp_path)


def test_key_and_id_lists(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("# topic key\nTopicA k-3\n\n topic_c-1  订单-2 \n", encoding="utf-8")
    assert read_key_list(keys) == [("TopicA", "k-3"), ("topic_c-1", "订单-2")]
    ids = tmp_path / "ids.txt"
    ids.write_text("7F00000100002A9F0000000000004431\n", encoding="utf-8")
    assert read_id_list(ids) == [17457]
    keys.write_text("TopicA\n", encoding="utf-8")
    with pytest.raises(SampleError, match=r"keys\.txt:1: expected 'TOPIC KEY'"):
        read_key_list(keys)
    ids.write_text("nothex\n", encoding="utf-8")
    with pytest.raises(SampleError, match=r"ids\.txt:1:"):
        read_id_list(ids)
    with pytest.raises(SampleError, match="cannot read"):
        read_id_list(tmp_path / "missing.txt")


def test_report_percentiles_and_text() -> None:
    report = LoadReport(kind="view", connections=2, depth=3, elapsed=2.0, ok=99, not_found=1)
    report.errors = Counter({"RequestTimeoutError": 2})
    report.latencies_ns = [i * 1_000_000 for i in range(1, 101)]
    assert report.requests == 102
    assert report.rate == 51.0
    assert (report.percentile_ms(50), report.percentile_ms(99), report.percentile_ms(100)) == (50, 99, 100)
    data = report.to_dict()
    assert data["latencyMs"] == {"p50": 50.0, "p90": 90.0, "p99": 99.0, "max": 100.0}
    assert data["errorsByKind"] == {"RequestTimeoutError": 2}
    text = report.format_text().splitlines()
    assert text[0] == "kind view, 2 connection(s) x 3 in flight"
    assert text[1] == "requests     102 in 2.000 s (51.0 req/s)"
    assert text[4] == "errors       2 (RequestTimeoutError: 2)"
    assert text[5] == "latency ms   p50 50.000  p90 90.000  p99 99.000  max 100.000"
    assert LoadReport(kind="key", connections=1, depth=1).percentile_ms(99) == 0.0


async def test_run_load_counts_every_answer(java_server, java_store_copy: Path) -> None:
    samples = sample_store(java_store_copy)
    rng = random.Random(7)
    factory = mixed_factory(view_factory(samples.offsets, rng), key_factory(samples.keys, rng))
    report = await run_load(
        f"127.0.0.1:{java_server.port}", factory, kind="mixed", connections=3, depth=4, requests=120
    )
    assert report.requests == 120 and report.ok == 120 and not report.errors
    assert len(report.latencies_ns) == 120


async def test_run_load_stops_at_the_deadline(java_server, java_store_copy: Path) -> None:
    factory = view_factory(sample_store(java_store_copy).offsets, random.Random(1))
    started = time.monotonic()
    report = await run_load(
        f"127.0.0.1:{java_server.port}", factory, kind="view", connections=2, depth=2, seconds=0.3
    )
    assert 0.25 <= time.monotonic() - started < 3
    assert report.requests > 0 and report.ok == report.requests


async def test_run_load_counts_not_found_and_errors(java_server) -> None:
    def factory(ticket: int) -> tuple[int, dict[str, str]]:
        if ticket % 3 == 0:
            return 33, {"offset": "16777215"}  # nothing there: the broker's "can not find message"
        if ticket % 3 == 1:
            return 12, {"topic": "TopicA"}  # key missing: SYSTEM_ERROR naming the field
        return 999, {}  # REQUEST_CODE_NOT_SUPPORTED

    report = await run_load(
        f"127.0.0.1:{java_server.port}", factory, kind="view", connections=1, depth=3, requests=30
    )
    assert report.not_found == 10
    assert report.errors == Counter({"code 1": 10, "code 3": 10})


async def test_run_load_counts_timeouts(fake_peer) -> None:
    peer = await fake_peer(lambda request: None)
    report = await run_load(
        peer.addr,
        lambda t: (33, {"offset": "0"}),
        kind="view",
        connections=1,
        depth=2,
        requests=4,
        timeout=0.1,
    )
    assert report.errors == Counter({"RequestTimeoutError": 4})
    assert report.latencies_ns == []


def test_bench_command_view(served_java_store: str, java_store_copy: Path, capsys) -> None:
    argv = ["bench", "-n", served_java_store, "--store", str(java_store_copy)]
    assert main([*argv, "--kind", "view", "--connections", "2", "--depth", "4", "--requests", "200"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "kind view, 2 connection(s) x 4 in flight"
    assert lines[1].startswith("requests     200 in ") and lines[1].endswith(" req/s)")
    assert lines[2:5] == ["ok           200", "not found    0", "errors       0"]
    assert lines[5].startswith("latency ms   p50 ")


@pytest.mark.parametrize("kind", ["key", "mixed"])
def test_bench_command_json(served_java_store: str, java_store_copy: Path, capsys, kind: str) -> None:
    argv = ["bench", "-n", served_java_store, "--store", str(java_store_copy), "--kind", kind]
    assert main([*argv, "--requests", "50", "--json", "--serialize", "rocketmq", "--seed", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["type"], report["kind"], report["requests"], report["ok"]) == ("bench", kind, 50, 50)
    assert set(report["latencyMs"]) == {"p50", "p90", "p99", "max"}


def test_bench_command_with_only_the_broker_conf(
    served_java_store: str, java_store_copy: Path, capsys
) -> None:
    conf = java_store_copy.parent / "java-4.9.7-a.broker.conf"
    argv = ["bench", "-n", served_java_store, "--config", str(conf), "--kind", "mixed", "--requests", "20"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] == 20


def test_bench_command_takes_the_name_server_from_the_environment(
    served_java_store: str, java_store_copy: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", f"{served_java_store};127.0.0.1:1")  # a list: the first is used
    assert main(["bench", "--store", str(java_store_copy), "--requests", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] == 10
    monkeypatch.delenv("NAMESRV_ADDR")
    with pytest.raises(SystemExit) as info:
        main(["bench", "--store", str(java_store_copy), "--requests", "10"])
    assert info.value.code == 2


def test_bench_command_with_lists(served_java_store: str, tmp_path: Path, capsys) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("TopicA k-3\nTopicA does-not-exist\n", encoding="utf-8")
    ids = tmp_path / "ids.txt"
    ids.write_text(create_offset_msg_id("10.9.9.9", 1, 17457) + "\n", encoding="utf-8")  # host ignored
    argv = ["bench", "-n", served_java_store, "--keys", str(keys), "--ids", str(ids), "--kind", "mixed"]
    assert main([*argv, "--requests", "40", "--json", "--seed", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["requests"] == 40 and report["errors"] == 0
    assert report["ok"] + report["notFound"] == 40 and report["notFound"] > 0


def test_bench_command_stops_after_seconds(served_java_store: str, java_store_copy: Path, capsys) -> None:
    started = time.monotonic()
    argv = ["bench", "-n", served_java_store, "--store", str(java_store_copy), "--seconds", "0.3"]
    assert main(argv) == 0
    assert time.monotonic() - started < 5
    assert "errors       0" in capsys.readouterr().out


def test_bench_command_errors_exit_4(threaded_peer, tmp_path: Path, capsys) -> None:
    addr = threaded_peer(lambda ref: lambda request: request.make_response(2, remark="busy")).peer.addr
    ids = tmp_path / "ids.txt"
    ids.write_text("7F00000100002A9F0000000000004431\n", encoding="utf-8")
    assert main(["bench", "-n", addr, "--ids", str(ids), "--requests", "5"]) == 4
    assert "errors       5 (code 2: 5)" in capsys.readouterr().out


def test_bench_command_unreachable_exits_3(tmp_path: Path, capsys) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("7F00000100002A9F0000000000004431\n", encoding="utf-8")
    assert main(["bench", "-n", f"127.0.0.1:{_free_port()}", "--ids", str(ids), "--requests", "5"]) == 3
    assert capsys.readouterr().err.startswith("rmq-query bench: connect failed")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--kind", "view"], "--kind view/mixed needs offsets"),
        (["--kind", "key", "--ids", "IDS"], "--kind key/mixed needs keys"),
        (["--store", "NOWHERE"], "no CommitLog directory"),
        (["--store", "NOWHERE", "--config", "NOWHERE"], "cannot use"),
        (["--config", "NOWHERE"], "cannot use"),
    ],
)
def test_bench_command_without_samples_exits_2(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("7F00000100002A9F0000000000004431\n", encoding="utf-8")
    argv = [a.replace("IDS", str(ids)).replace("NOWHERE", str(tmp_path / "none")) for a in argv]
    assert main(["bench", "-n", "127.0.0.1:1", "--requests", "1", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--requests", "0"],
        ["--seconds", "0"],
        ["--seconds", "7200"],
        ["--requests", "5", "--seconds", "1"],
        [],
        ["--requests", "5", "--kind", "uniq"],
    ],
)
def test_bench_command_bounds_are_enforced(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["bench", "-n", "127.0.0.1:1", *argv])
    assert info.value.code == 2


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_bench_command_on_either_event_loop(
    served_java_store: str, java_store_copy: Path, capsys, loop
) -> None:
    argv = ["bench", "-n", served_java_store, "--store", str(java_store_copy), "--requests", "30"]
    assert main([*argv, "--connections", "2", "--depth", "2", "--loop", loop, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] == 30


@pytest.mark.parametrize(("connections", "depth"), [("1025", "1"), ("1", "1025"), ("512", "512")])
def test_bench_command_caps_what_is_in_flight(capsys, connections: str, depth: str) -> None:
    argv = ["bench", "-n", "127.0.0.1:1", "--requests", "1", "--connections", connections, "--depth", depth]
    assert main(argv) == 2
    assert "65536 in flight in all" in capsys.readouterr().err


async def test_run_load_refuses_more_than_the_caps() -> None:
    with pytest.raises(ValueError):
        await run_load("127.0.0.1:1", lambda t: (33, {}), kind="v", connections=300, depth=300, requests=1)
    with pytest.raises(ValueError):
        await run_load("127.0.0.1:1", lambda t: (33, {}), kind="v", connections=0, depth=1, requests=1)
