"""The writer appends real records (the protocol decoder accepts them, CRCs included), rolls
CommitLog files with the broker's blank marker, and indexes them exactly as a rebuild would."""

from __future__ import annotations

import shutil
from pathlib import Path

from protocol.message import decode_message
from protocol.message_id import decode_offset_msg_id
from store.config.store_config import StoreConfig
from store.index.builder import rebuild_index
from store.message_store import MessageStore
from store.write.writer import StoreWriter

MAX = 2**63 - 1


def _config(root: Path) -> StoreConfig:
    return StoreConfig.for_store(
        root, mapped_file_size_commit_log=16384, max_hash_slot_num=32, max_index_num=64, broker_ip1="10.0.0.7"
    )


def _fill(config: StoreConfig, n: int = 300) -> list:
    clock = iter(range(1_700_000_000_000, 1_700_000_000_000 + n * 700, 700))
    with StoreWriter(config, clock=lambda: next(clock)) as w:
        return [
            w.append(
                f"T{i % 3}", bytes([i % 256]) * (i % 300), keys=f"k-{i % 7} ключ-{i % 5}", queue_id=i % 2
            )
            for i in range(n)
        ]


def test_written_records_decode_with_valid_crc_and_ids(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    appended = _fill(config)
    with MessageStore.open(config) as store:
        assert store.topics() == {"T0", "T1", "T2"}
        assert len(list(store.commitlog.iter_records())) == len(appended)
        assert len(list(config.store_path_commit_log.iterdir())) > 3, "records must roll over files"
        for i, a in enumerate(appended):
            buf = store.view_message(a.offset)
            assert buf is not None and len(buf) == a.size
            msg = decode_message(buf, check_crc=True)
            assert msg.commit_log_offset == a.offset
            assert msg.topic == f"T{i % 3}"
            assert msg.unique_key == a.unique_key
            if i % 6 == 0:  # topic T0, queue 0: every sixth message
                assert msg.queue_offset == i // 6
            assert decode_offset_msg_id(a.offset_msg_id) == ("10.0.0.7", config.listen_port, a.offset)
    assert not (config.store_path_root_dir / "abort").exists()


def test_queries_find_every_key_and_unique_key(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    appended = _fill(config)
    with MessageStore.open(config) as store:
        for j in range(7):
            result = store.query_message("T1", f"k-{j}", 64, 0, MAX, exact_key=True)
            want = [a.offset for i, a in enumerate(appended) if i % 3 == 1 and i % 7 == j][-64:]
            got = [decode_message(b, read_body=False).commit_log_offset for b in result.buffers]
            assert sorted(got) == got
            assert set(got) <= {a.offset for a in appended}
            assert len(got) == min(64, len(want)) and got == sorted(want)[-len(got) :]
        a = appended[123]
        result = store.query_message("T0", a.unique_key, 32, 0, MAX)
        assert [decode_message(b).commit_log_offset for b in result.buffers] == [a.offset]


def test_writer_index_equals_a_rebuild(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    _fill(config)
    written = [p.read_bytes() for p in sorted(config.index_dir.iterdir())]
    assert len(written) > 3, "the small geometry must roll several index files"
    copy = _config(tmp_path / "copy")
    shutil.copytree(config.store_path_root_dir, copy.store_path_root_dir)
    rebuild_index(copy)
    assert [p.read_bytes() for p in sorted(copy.index_dir.iterdir())] == written


def test_reopened_writer_continues_offsets_and_queues(tmp_path: Path) -> None:
    config = _config(tmp_path / "s")
    first = _fill(config, 50)
    with StoreWriter(config) as w:
        nxt = w.append("T0", b"more", keys="late")
    assert nxt.offset > first[-1].offset
    with MessageStore.open(config) as store:
        buf = store.query_message("T0", "late", 64, 0, MAX).buffers
        assert len(buf) == 1
        msg = decode_message(buf[0])
        assert msg.queue_offset == sum(1 for i in range(50) if i % 3 == 0 and i % 2 == 0)


def test_a_batch_that_does_not_fit_goes_whole_to_the_next_file(tmp_path: Path) -> None:
    """``doAppend`` for a batch: if the whole batch plus the 8-byte blank does not fit what is left,
    the file ends with ``[free][BLANK_MAGIC_CODE]`` and every message goes to the next file."""
    from store.write.writer import StoreRecord

    config = StoreConfig.for_store(tmp_path / "s", mapped_file_size_commit_log=4096)
    with StoreWriter(config, clock=lambda: 5) as w:
        filler = w.append("T", b"f" * 3000, unique_key=False)
        end = filler.offset + filler.size
        batch = [StoreRecord("T", b"m" * 300, "KEYS\x01b") for _ in range(3)]
        assert len(w._encode(batch[0], 5, 0)[0]) + 8 <= 4096 - end, "the first message alone would fit"
        appended = w.put_batch(batch)
    first_file = (config.store_path_commit_log / f"{0:020d}").read_bytes()
    free = 4096 - end
    assert first_file[end : end + 8] == free.to_bytes(4, "big") + (-875286124).to_bytes(4, "big", signed=True)
    assert [a.offset for a in appended] == [4096, 4096 + appended[0].size, 4096 + 2 * appended[0].size]
    assert [a.queue_offset for a in appended] == [1, 2, 3]
    second = (config.store_path_commit_log / f"{4096:020d}").read_bytes()
    assert [decode_message(second, a.offset - 4096).commit_log_offset for a in appended] == [
        a.offset for a in appended
    ]
