"""Files damaged under a serving store: said once at refresh, answered from what is intact.

Issue 18, item 11. Under ``serve`` a consume queue file deleted while in use was dropped without a
word (the queue then pulled empty), and an IndexFile replaced by another IndexFile's bytes was
reopened or read as it now was without a warning (most key answers changed). ``refresh`` (the
periodic pass, never a request) now compares each known file with what is on disk: a consume queue
file deleted while its entries still name records of the CommitLog, or replaced by other bytes, and
an IndexFile whose header names another span, are each logged once; the consume queue and a renamed
IndexFile are answered from the file as it was (this process still maps it), an IndexFile
overwritten in place is rebuilt from the CommitLog (issue 31, item 7), and nothing else is left out.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
from pathlib import Path

import pytest

from clients.admin import QueryAdmin
from clients.message_queue import MessageQueue
from protocol.message import decode_message
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from store.write.writer import StoreWriter
from tests.support.serve_process import PROCESS_TIMEOUT, kill_if_running, start_serve

MESSAGES = 120
#: 10 entries per consume queue file, 40 per IndexFile (two keys a message: key and unique key).
CQ_FILE = 200


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=CQ_FILE,
        max_hash_slot_num=16,
        max_index_num=40,
        broker_ip1="127.0.0.1",
    )


def _store(root: Path) -> StoreConfig:
    config = _config(root)
    with StoreWriter(config, clock=iter(range(1_000_000, 2_000_000, 7)).__next__) as writer:
        for i in range(MESSAGES):
            writer.append("T", f"body-{i}".encode(), keys=f"k{i}", queue_id=0)
    return config


def _keys_answered(store: MessageStore) -> dict[str, list[int]]:
    """key -> the CommitLog offsets its query answers (decoded from the records' own fields)."""
    out: dict[str, list[int]] = {}
    for i in range(MESSAGES):
        result = store.query_message("T", f"k{i}", 64, 0, 1 << 62, exact_key=True)
        out[f"k{i}"] = sorted(decode_message(b, read_body=False).commit_log_offset for b in result.buffers)
    return out


def _pulled_bodies(store: MessageStore) -> list[bytes]:
    """Queue T/0 pulled from offset 0 as a consumer pulls it (one consume queue file per answer)."""
    bodies: list[bytes] = []
    offset = 0
    for _ in range(100):
        result = store.get_message("T", 0, offset, 32)
        if not result.buffers:
            break
        bodies += [decode_message(b).body for b in result.buffers]
        offset = result.next_begin_offset
    return bodies


def _warnings(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


@pytest.mark.parametrize("which", ["middle", "last"])
def test_a_consume_queue_file_deleted_under_the_server_is_said_once_and_still_pulled(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, which: str
) -> None:
    config = _store(tmp_path / "s")
    queue_dir = config.consume_queue_dir / "T" / "0"
    files = sorted(queue_dir.iterdir())
    assert len(files) == MESSAGES * 20 // CQ_FILE
    with MessageStore.open(config) as store:
        before = _pulled_bodies(store)
        assert before == [f"body-{i}".encode() for i in range(MESSAGES)]
        victim = files[len(files) // 2] if which == "middle" else files[-1]
        with caplog.at_level(logging.WARNING):
            victim.unlink()
            for _ in range(3):
                store.refresh()
            assert _pulled_bodies(store) == before
            assert store.max_offset("T", 0) == MESSAGES
        assert _warnings(caplog, f"consume queue file {victim} was deleted") == 1


def test_a_consume_queue_file_replaced_by_other_bytes_is_said_once_and_answered_as_it_was(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _store(tmp_path / "s")
    files = sorted((config.consume_queue_dir / "T" / "0").iterdir())
    with MessageStore.open(config) as store:
        before = _pulled_bodies(store)
        with caplog.at_level(logging.WARNING):
            spare = files[3].with_name("spare")
            shutil.copyfile(files[0], spare)
            os.replace(spare, files[3])  # file 3 now holds file 0's entries
            for _ in range(3):
                store.refresh()
            assert _pulled_bodies(store) == before
            assert store.file_checks()["consume_queue"] == (1, 0)  # failed its check, old map kept
        assert _warnings(caplog, f"consume queue file {files[3]} was replaced") == 1


@pytest.mark.parametrize("how", ["renamed-over", "copied-over"])
def test_an_index_file_replaced_by_another_ones_bytes_is_said_once_and_never_answers_for_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    config = _store(tmp_path / "s")
    index_files = sorted(config.index_dir.iterdir())
    assert len(index_files) >= 4
    with MessageStore.open(config) as store:
        before = _keys_answered(store)
        assert all(len(v) == 1 for v in before.values())
        victim, other = index_files[1], index_files[2]
        with caplog.at_level(logging.WARNING):
            if how == "renamed-over":
                spare = victim.with_name("spare")
                shutil.copyfile(other, spare)
                os.replace(spare, victim)
            else:
                shutil.copyfile(other, victim)  # same inode, other bytes
            for _ in range(3):
                store.refresh()
            after = _keys_answered(store)
        assert _warnings(caplog, f"index file {victim} was replaced by another file's bytes") == 1
        # Renamed over: the old map kept; copied over: rebuilt from the CommitLog.
        assert store.file_checks()["index"] == (1, 0 if how == "renamed-over" else 1)
        # Renamed over: answered from the file as it was, still mapped. Overwritten in place:
        # nothing of it is intact; it is rebuilt from the CommitLog (issue 31, item 7), which
        # answers for it (tests/store/test_file_fallback.py has the details).
        assert after == before


async def test_under_serve_each_damage_is_logged_once_and_answers_do_not_change(tmp_path: Path) -> None:
    # The same through ``rmq-query serve`` (its periodic refresh, 0.2 s here): a middle consume
    # queue file deleted and an IndexFile renamed over by another one's bytes. Pulls and key
    # queries over the socket answer as before, and the log names each damage once.
    config = _store(tmp_path / "s")
    queue_files = sorted((config.consume_queue_dir / "T" / "0").iterdir())
    index_files = sorted(config.index_dir.iterdir())
    (config.store_path_root_dir / "broker.conf").write_text(
        f"brokerName={config.broker_name}\nstorePathRootDir=.\nmappedFileSizeCommitLog={1 << 20}\n"
        f"mappedFileSizeConsumeQueue={CQ_FILE}\nmaxHashSlotNum=16\nmaxIndexNum=40\n",
        encoding="utf-8",
    )
    proc, _lines, port, _fast = await start_serve(
        "--store", str(config.store_path_root_dir), "--port", "0", "--refresh-interval", "0.2"
    )
    try:
        async with QueryAdmin(f"127.0.0.1:{port}", timeout=5.0) as admin:
            before = await _over_the_wire(admin, config.broker_name)
            assert len(before[0]) == MESSAGES
            queue_files[5].unlink()
            spare = index_files[1].with_name("spare")
            shutil.copyfile(index_files[2], spare)
            os.replace(spare, index_files[1])
            await asyncio.sleep(1.0)  # five refreshes
            assert await _over_the_wire(admin, config.broker_name) == before
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), PROCESS_TIMEOUT) == 0
        assert proc.stderr is not None
        log = (await proc.stderr.read()).decode()
    finally:
        await kill_if_running(proc)
    assert log.count(f"consume queue file {queue_files[5]} was deleted") == 1
    assert log.count(f"index file {index_files[1]} was replaced by another file's bytes") == 1


async def _over_the_wire(admin: QueryAdmin, broker: str) -> tuple[list[bytes], dict[str, list[str]]]:
    """Queue T/0 pulled from 0, and each key's answer (offset message ids)."""
    bodies: list[bytes] = []
    offset = 0
    mq = MessageQueue("T", broker, 0)
    for _ in range(100):
        got = await admin.pull(mq, None, offset, 32)
        if not got.messages:
            break
        bodies += [m.body for m in got.messages]
        offset = got.next_begin_offset
    answers: dict[str, list[str]] = {}
    for i in range(MESSAGES):
        result = await admin.query_by_key("T", f"k{i}")
        answers[f"k{i}"] = sorted(m.offset_msg_id for m in result.messages)
    return bodies, answers
