"""``make-store``: messages kept as JSON lines become a store; a Java store survives the round trip.

The round trip: every record of the Java-written ``java-4.9.7-a`` is dumped to JSONL
(``record_to_json``) and ``make-store`` writes a new store from it with the same geometry; the new
CommitLog files, ConsumeQueues and IndexFiles must be the Java-written bytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from clients.testkit.jsonl_store import make_store
from clients.testkit.message_jsonl import MessageLineError, record_to_json
from protocol.message import decode_message, raw_properties
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.paths import REPO_ROOT

JAVA_STORE = "java-4.9.7-a"


def _dump(config: StoreConfig, out: Path) -> int:
    log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    n = 0
    with open(out, "wb") as f:
        for _offset, buf in log.iter_records():
            msg = decode_message(buf, decompress=False)
            obj = record_to_json(msg, raw_properties(buf).decode("utf-8"))
            f.write(msgspec.json.encode(obj) + b"\n")
            n += 1
    log.close()
    return n


def _index_bytes(index_dir: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(index_dir.iterdir()) if p.name.isdigit()]


def test_round_trip_of_the_java_store_is_byte_identical(stores_dir: Path, tmp_path: Path) -> None:
    java = StoreConfig.load(stores_dir / f"{JAVA_STORE}.broker.conf")
    jsonl = tmp_path / "messages.jsonl"
    assert _dump(java, jsonl) == 5000
    root = tmp_path / "made"
    config = StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=java.mapped_file_size_commit_log,
        max_hash_slot_num=java.max_hash_slot_num,
        max_index_num=java.max_index_num,
        mapped_file_size_consume_queue=java.mapped_file_size_consume_queue,
    )
    made = make_store(config, jsonl)
    assert made.messages == 5000
    java_files = sorted(java.store_path_commit_log.iterdir())
    made_files = sorted(config.store_path_commit_log.iterdir())
    assert [p.name for p in made_files] == [p.name for p in java_files]
    for ours, theirs in zip(made_files, java_files, strict=True):
        assert ours.read_bytes() == theirs.read_bytes(), ours.name
    assert _index_bytes(config.index_dir) == _index_bytes(java.index_dir)
    java_root, root = java.store_path_root_dir, config.store_path_root_dir
    java_cq = sorted(p.relative_to(java_root) for p in (java_root / "consumequeue").rglob("*") if p.is_file())
    assert sorted(p.relative_to(root) for p in (root / "consumequeue").rglob("*") if p.is_file()) == java_cq
    for rel in java_cq:
        assert (root / rel).read_bytes() == (java_root / rel).read_bytes(), rel


def test_missing_fields_get_the_brokers_defaults(tmp_path: Path) -> None:
    lines = [
        {"topic": "Orders", "body": "first", "keys": ["o-1", "all"], "tags": "new", "store_timestamp": 1000},
        {"topic": "Orders", "body_base64": "AAEC", "keys": "o-2 all", "queue_id": 1, "unique_key": "U-2"},
        {"topic": "Orders", "body": "zz" * 500, "compression": "zlib", "born_host": "10.0.0.9:4000"},
        {"topic": "Orders", "body": "later", "keys": "o-4", "delay_level": 3},
    ]
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    config = StoreConfig.for_store(tmp_path / "s", mapped_file_size_commit_log=1 << 20, broker_ip1="10.1.2.3")
    assert make_store(config, jsonl).messages == 4
    log = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    msgs = [decode_message(buf) for _, buf in log.iter_records()]
    log.close()
    first, second, third, fourth = msgs
    # Broker defaults: CLUSTER added, WAIT dropped, HashMap order, a generated UNIQ_KEY, store host.
    assert list(first.properties) == ["KEYS", "UNIQ_KEY", "CLUSTER", "TAGS"]
    assert first.properties["CLUSTER"] == "DefaultCluster" and "WAIT" not in first.properties
    assert first.store_timestamp == first.born_timestamp == 1000 == second.store_timestamp
    assert (first.store_host, first.store_port) == ("10.1.2.3", 10911)
    assert (first.queue_offset, second.queue_id, second.unique_key, second.body) == (0, 1, "U-2", b"\0\1\2")
    assert (
        third.is_compressed
        and third.body == b"zz" * 500
        and (third.born_host, third.born_port)
        == (
            "10.0.0.9",
            4000,
        )
    )
    assert (third.queue_offset, fourth.topic, fourth.queue_id) == (1, "SCHEDULE_TOPIC_XXXX", 2)
    assert fourth.properties["REAL_TOPIC"] == "Orders" and fourth.properties["WAIT"] == "true"
    with MessageStore.open(StoreConfig.load(config.store_path_root_dir / "broker.conf")) as store:
        assert len(store.query_message("Orders", "all", 10, 0, 2**62).buffers) == 2
        assert "Orders" in store.topics()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 1: not JSON"),
        ('{"body": "x"}', "line 1: topic is required"),
        ('{"topic": "T", "colour": 1}', "unknown field(s) colour"),
        ('{"topic": "T", "queue_id": "1"}', "queue_id must be an integer"),
        ('{"topic": "T", "body_base64": "***"}', "body_base64 is not base64"),
        ('{"topic": "T", "born_host": "nohost"}', "born_host 'nohost' is not 'host:port'"),
        ('{"topic": "T", "compression": "rar"}', "compression must be one of"),
        ('{"topic": "' + "t" * 200 + '"}', "the broker would refuse this message"),
    ],
)
def test_bad_lines_are_named(tmp_path: Path, line: str, message: str) -> None:
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(MessageLineError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_store(StoreConfig.for_store(tmp_path / "s", mapped_file_size_commit_log=65536), jsonl)


def test_command_line(tmp_path: Path) -> None:
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text('{"topic": "T", "body": "x", "keys": "k"}\n', encoding="utf-8")
    cmd = [sys.executable, "-m", "clients.cli", "make-store", str(tmp_path / "s"), "--from", str(jsonl)]
    done = subprocess.run(
        [*cmd, "--mapped-file-size", "65536"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "wrote 1 messages" in done.stdout
    again = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True)
    assert again.returncode == 1 and "already holds a CommitLog" in again.stderr
    jsonl.write_text('{"topic": 5}\n', encoding="utf-8")
    bad = subprocess.run(
        [*cmd[:-3], str(tmp_path / "t"), "--from", str(jsonl)], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "line 1: topic must be a string" in bad.stderr


def test_dump_messages_then_make_store_on_the_command_line(stores_dir: Path, tmp_path: Path) -> None:
    """``dump-messages`` | ``make-store``: the Java store's CommitLog comes back byte for byte."""
    conf = stores_dir / f"{JAVA_STORE}.broker.conf"
    dump = subprocess.run(
        [sys.executable, "-m", "clients.cli", "dump-messages", "--store", str(stores_dir / JAVA_STORE),
         "--config", str(conf)],
        cwd=REPO_ROOT, capture_output=True, check=True,
    )  # fmt: skip
    assert dump.stdout.count(b"\n") == 5000 and b"dump-messages: 5000 message(s)" in dump.stderr
    jsonl = tmp_path / "all.jsonl"
    jsonl.write_bytes(dump.stdout)
    made = subprocess.run(
        [sys.executable, "-m", "clients.cli", "make-store", str(tmp_path / "m"), "--from", str(jsonl),
         "--mapped-file-size", "262144", "--max-hash-slot-num", "512", "--max-index-num", "2048"],
        cwd=REPO_ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    java = sorted((stores_dir / JAVA_STORE / "commitlog").iterdir())
    ours = sorted((tmp_path / "m" / "commitlog").iterdir())
    assert [p.read_bytes() for p in ours] == [p.read_bytes() for p in java]
