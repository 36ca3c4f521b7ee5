"""Resuming the consume queue builder reads what the queues hold, not their files' zero tails, and
still clears every non-zero byte past a queue's written end (a torn entry, garbage deep in the tail).

The queues are built from the Java store ``java-4.9.7-a`` with ``mappedFileSizeConsumeQueue`` at the
broker's default (300,000 entries, 6,000,000 bytes), so each of the 12 queues is one large file holding
a few hundred entries. Expected bytes: Java's entries (its 20,000-byte files) zero-padded to the file
size, which is the format's rule (entry N at byte N*20, the rest zeros)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from store.config.store_config import StoreConfig
from store.consumequeue.builder import ConsumeQueueBuilder
from store.consumequeue.consume_queue import ConsumeQueue
from tests.support.store_copy import queues_rebuilt_in_files_of

FILE_SIZE = 300_000 * 20
NAME = "java-4.9.7-a"


def _rchar() -> int:
    """Bytes this process has read with read-like system calls (``/proc/self/io``), mmap excluded."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _holes_supported(directory: Path) -> bool:
    """Whether the file system reports a never-written stretch of a file as a hole (``SEEK_HOLE``)."""
    if not hasattr(os, "SEEK_HOLE"):
        return False
    probe = directory / "sparse-probe"
    fd = os.open(probe, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"x", 0)
        os.ftruncate(fd, 1 << 20)
        return os.lseek(fd, 0, os.SEEK_HOLE) < (1 << 20)
    finally:
        os.close(fd)
        probe.unlink()


@pytest.fixture()
def store(stores_dir: Path, tmp_path: Path) -> tuple[StoreConfig, dict[str, bytes]]:
    """A copy of the Java store whose queues are rebuilt into 6 MB files; and the expected file bytes."""
    dst = tmp_path / NAME
    config, expected = queues_rebuilt_in_files_of(stores_dir, NAME, dst, FILE_SIZE)
    assert _files(config) == expected
    return config, expected


def _files(config: StoreConfig) -> dict[str, bytes]:
    root = config.consume_queue_dir
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_resume_reads_a_bounded_amount_per_queue_not_the_file(
    store: tuple[StoreConfig, dict[str, bytes]],
) -> None:
    """12 queues of 6 MB files holding 500 entries or fewer: the resume reads at most 64 KiB past each
    queue's end (the written entries' last file system block, not the 5.99 MB of hole after it).
    Before, it read each last file to its end: 12 x ~6 MB."""
    config, expected = store
    if not _holes_supported(config.consume_queue_dir):
        pytest.skip("this file system does not report holes: the tail is read in full here")
    queues = len(expected)
    before = _rchar()
    builder = ConsumeQueueBuilder(config)
    read = _rchar() - before
    try:
        assert len(builder.queue_ends()) == queues
        assert read < queues * 64 * 1024, f"{read} bytes read to resume {queues} queues"
        assert builder.resume_bytes_read < queues * 64 * 1024
        builder.run_once()
    finally:
        builder.close()
    assert builder.entries_written == 0
    assert _files(config) == expected


@pytest.mark.parametrize("seek_data", [True, False], ids=["holes-skipped", "no-seek-data"])
def test_garbage_past_the_end_is_still_cleared(
    store: tuple[StoreConfig, dict[str, bytes]],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    seek_data: bool,
) -> None:
    """Non-zero bytes past the written end, in the hole far past it, in the last byte, a torn entry
    at the end, or in a file with no holes at all (copied by a tool that fills them): zeroed at
    resume, so the queues end where their entries do and the files are the expected bytes. Also
    where the platform has no ``SEEK_DATA``: then every tail is read whole."""
    config, expected = store
    if not seek_data:
        monkeypatch.delattr(os, "SEEK_DATA", raising=False)
    root = config.consume_queue_dir
    paths = sorted(expected)
    # Where each queue's entries end: a size is never 0, so the last non-zero byte is in the last entry.
    ends = {p: -(-len(expected[p].rstrip(b"\0")) // 20) * 20 for p in paths}

    def poke(path: str, at: int, data: bytes) -> None:
        with open(root / path, "r+b") as f:
            f.seek(at)
            f.write(data)

    # A valid-looking entry 4 MB past the end: the readers' binary search would take it as written.
    poke(paths[0], 4_000_000, (123).to_bytes(8, "big") + (77).to_bytes(4, "big") + bytes(8))
    poke(paths[1], FILE_SIZE - 1, b"\x01")
    poke(paths[2], ends[paths[2]], (12345).to_bytes(8, "big"))  # torn: offset written, size not
    # A file with every byte allocated (no holes), with garbage in the middle of its zeros.
    full = root / paths[3]
    data = bytearray(full.read_bytes())
    data[3_000_000:3_000_004] = b"\xff\xfe\xfd\xfc"
    full.unlink()
    full.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, logger="store.consumequeue.consume_queue")
    builder = ConsumeQueueBuilder(config)
    try:
        builder.run_once()
    finally:
        builder.close()
    if not seek_data:
        assert builder.resume_bytes_read == sum(FILE_SIZE - ends[p] for p in paths)
    cleared = [r.getMessage() for r in caplog.records if "clearing" in r.getMessage()]
    assert len(cleared) == 4, cleared
    assert builder.entries_written == 0
    assert _files(config) == expected
    for path in paths[:4]:
        topic, qid, _ = path.split("/")
        queue = ConsumeQueue(root, topic, int(qid), FILE_SIZE)
        try:
            assert queue.max_offset * 20 == ends[path]
        finally:
            queue.close()


def test_the_end_search_probes_no_entry_past_the_first_hole(
    store: tuple[StoreConfig, dict[str, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a queue whose 6 MB file holds a few hundred entries looks only at entries before the
    file's first hole (each probe past it faults in zero pages and their readahead). Before, the
    binary search's first probe was entry 150,000, 3 MB into the hole."""
    config, expected = store
    if not _holes_supported(config.consume_queue_dir):
        pytest.skip("this file system does not report holes")
    import store.consumequeue.consume_queue as cq_module

    probed: list[int] = []
    real_valid = cq_module._valid

    def valid(view: memoryview, pos: int) -> bool:
        probed.append(pos)
        return real_valid(view, pos)

    monkeypatch.setattr(cq_module, "_valid", valid)
    for path, data in expected.items():
        topic, qid, _ = path.split("/")
        probed.clear()
        queue = ConsumeQueue(config.consume_queue_dir, topic, int(qid), FILE_SIZE)
        try:
            assert queue.max_offset * 20 == -(-len(data.rstrip(b"\0")) // 20) * 20
        finally:
            queue.close()
        assert probed and max(probed) < 64 * 1024, (path, max(probed))


def test_a_live_tail_grows_past_the_first_hole(tmp_path: Path) -> None:
    """The hole is only where the search starts: entries written past it later (a live broker's
    tail) are found by the next refresh, up to the first zero entry."""
    directory = tmp_path / "T" / "0"
    directory.mkdir(parents=True)
    path = directory / ("0" * 20)

    def entries(first: int, count: int) -> bytes:
        return b"".join(
            (i * 100).to_bytes(8, "big") + (100).to_bytes(4, "big") + bytes(8)
            for i in range(first, first + count)
        )

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, FILE_SIZE)
        os.pwrite(fd, entries(0, 10), 0)
        queue = ConsumeQueue(tmp_path, "T", 0, FILE_SIZE)
        try:
            assert queue.max_offset == 10
            os.pwrite(fd, entries(10, 99_990), 200)  # to byte 2,000,000, far past the first hole
            queue.refresh()
            assert queue.max_offset == 100_000
            assert queue.entry(99_999).commit_log_offset == 99_999 * 100
        finally:
            queue.close()
        fresh = ConsumeQueue(tmp_path, "T", 0, FILE_SIZE)
        try:
            assert fresh.max_offset == 100_000
        finally:
            fresh.close()
    finally:
        os.close(fd)
