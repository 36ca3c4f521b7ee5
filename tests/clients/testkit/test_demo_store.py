"""``rmq-query demo-store`` makes a varied store the rest of the project can open by its broker.conf,
and ``rmq-query rebuild-index`` reproduces its index exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from clients.cli import main
from clients.testkit.demo import COLLIDING_KEYS, DEMO_HASH_SLOTS
from protocol.index_key import build_index_key, index_key_hash
from protocol.message import decode_message
from store.config.store_config import StoreConfig
from store.message_store import MessageStore

MAX = 2**63 - 1


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo") / "store"
    assert main(["demo-store", str(root), "--messages", "1200"]) == 0
    return root


def test_demo_store_layout(demo_root: Path) -> None:
    config = StoreConfig.load(demo_root / "broker.conf")
    assert config.store_path_root_dir == demo_root
    assert len(list(config.store_path_commit_log.iterdir())) >= 3
    assert len(list(config.index_dir.iterdir())) >= 2
    assert (demo_root / "checkpoint").stat().st_size == 4096
    assert (demo_root / "config" / "topics.json").exists()
    assert not (demo_root / "abort").exists()


def test_demo_store_answers_varied_queries(demo_root: Path) -> None:
    config = StoreConfig.load(demo_root / "broker.conf")
    with MessageStore.open(config) as store:
        assert store.topics() == {"DemoOrders", "DemoUsers", "demo_events-1"}
        records = [decode_message(buf) for _, buf in store.commitlog.iter_records()]
        assert len(records) == 1200
        by_key: dict[tuple[str, str], list[int]] = {}
        for m in records:
            if m.transaction_type == 0xC:
                continue
            for k in m.keys:
                by_key.setdefault((m.topic, k), []).append(m.commit_log_offset)
        unicode = [tk for tk in by_key if not tk[1].isascii()]
        assert unicode, "the demo must hold unicode keys"
        for topic, key in unicode:
            hits = store.query_message(topic, key, 64, 0, MAX, exact_key=True).buffers
            assert [decode_message(b).commit_log_offset for b in hits] == sorted(by_key[topic, key])[-64:]
        # Colliding keys: the index answers by hash (both), the exact filter keeps the asked one.
        topic = "DemoUsers"
        present = [k for k in COLLIDING_KEYS if (topic, k) in by_key]
        assert len({index_key_hash(build_index_key(topic, k)) for k in present}) < len(present)
        key = present[0]
        raw = store.query_message(topic, key, 64, 0, MAX).buffers
        exact = store.query_message(topic, key, 64, 0, MAX, exact_key=True).buffers
        assert len(raw) > len(exact) == len(by_key[topic, key][-64:])
        # Keys sharing a slot but not a hash are told apart by the index itself.
        slot_keys = [k for (t, k) in by_key if t == topic and k.startswith("slot-")]
        assert len(slot_keys) >= 3
        assert len({index_key_hash(build_index_key(topic, k)) % DEMO_HASH_SLOTS for k in slot_keys}) == 1
        assert len({index_key_hash(build_index_key(topic, k)) for k in slot_keys}) == len(slot_keys)
        for k in slot_keys:
            hits = store.query_message(topic, k, 64, 0, MAX).buffers
            assert [decode_message(b).commit_log_offset for b in hits] == sorted(by_key[topic, k])[-64:]
        rollback = next(m for m in records if m.transaction_type == 0xC and m.keys)
        assert store.view_message(rollback.commit_log_offset) is not None
        assert rollback.keys and not store.query_message(rollback.topic, rollback.keys[0], 64, 0, MAX).buffers


def test_rebuild_index_command_reproduces_the_demo_index(demo_root: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(demo_root, copy)
    before = [p.read_bytes() for p in sorted((copy / "index").iterdir())]
    assert main(["rebuild-index", "--store", str(copy)]) == 0
    assert [p.read_bytes() for p in sorted((copy / "index").iterdir())] == before


def test_commands_report_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rebuild-index", "--store", str(tmp_path / "nothing")]) == 1
    assert "no CommitLog" in capsys.readouterr().err
    assert main(["demo-store", str(tmp_path / "d"), "--messages", "0"]) == 2


def test_rebuild_warns_about_the_abort_marker(
    demo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    copy = tmp_path / "crashed"
    shutil.copytree(demo_root, copy)
    (copy / "abort").touch()
    assert main(["rebuild-index", "--store", str(copy)]) == 0
    assert "abort" in capsys.readouterr().err
