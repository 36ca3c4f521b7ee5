"""Damaged copies of the Java store: bounded work, one log line per problem, the Java answers from
the intact parts, and ``rmq-query fsck --store DIR`` naming the damage (exit 1; 0 when pristine).

Every case runs all of the Java store's recorded queries against the damaged copy. A query is
"affected" when the real broker's answer includes a record the damage touches (an offset indexed
in the damaged file, or a record the CommitLog lost); every other query must return exactly the
Java records. Affected queries must still return only whole records, quickly.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clients.cli import main
from protocol.index_key import build_index_key, index_key_hash
from store.commitlog import record
from store.commitlog.gaps import CommitLogGapError
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, StoreConfig
from store.index import query_walk
from store.index import service as index_service
from store.index.builder import rebuild_index
from store.index.index_file import ENTRY, HEADER, SLOT, IndexFile
from store.index.service import IndexService
from store.message_store import MessageStore

#: Far above what the 476 queries take on an intact store (~0.1 s); a looping walk never ends.
WALL_CLOCK_GUARD_S = 10.0


@dataclass
class Damaged:
    config: StoreConfig
    expected: dict
    index_files: list[Path]

    @property
    def root(self) -> Path:
        return self.config.store_path_root_dir

    def entries_at(self) -> int:
        return INDEX_HEADER_SIZE + self.config.max_hash_slot_num * 4

    def indexed_offsets(self, path: Path) -> set[int]:
        """CommitLog offsets the (still pristine) file ``path`` indexes."""
        f = IndexFile.open(path, self.config.max_hash_slot_num, self.config.max_index_num)
        try:
            return {f.entry(n)[1] for n in range(1, f.header.index_count)}
        finally:
            f.close()


@pytest.fixture
def damaged(golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path) -> Damaged:
    """A writable copy of the Java store with its broker.conf inside, so ``fsck --store DIR`` works."""
    config, expected = golden_stores[0]
    root = tmp_path / "store"
    shutil.copytree(config.store_path_root_dir, root)
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    conf = config.store_path_root_dir.parent / f"{config.store_path_root_dir.name}.broker.conf"
    text = conf.read_text(encoding="utf-8")
    (root / "broker.conf").write_text(
        "\n".join(ln for ln in text.splitlines() if not ln.startswith("storePath")) + "\n", encoding="utf-8"
    )
    copy = StoreConfig.load(root / "broker.conf", overrides={"store_path_root_dir": root})
    assert copy.max_hash_slot_num == config.max_hash_slot_num
    return Damaged(copy, expected, sorted(copy.index_dir.iterdir()))


def fsck(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["fsck", "--store", str(root)])
    return code, capsys.readouterr().out


def raw_sha(buf: memoryview) -> str:
    return hashlib.sha256(buf).hexdigest()


@pytest.fixture
def visits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int, int]]]:
    """(file name, entries visited, indexCount) of every chain walk: the bound on a query's work.

    Every query runs both ``query_files``: the one in use (compiled when built) answers and must
    agree with the pure-Python reference, whose chain walks go through ``walk_chain`` by name and
    are counted here: every damaged store below is also a twin-against-reference check.
    """
    seen: list[tuple[str, int, int]] = []
    names: dict[int, str] = {}
    inner = query_walk.walk_chain
    reference = query_walk.REFERENCE["query_files"]
    in_use = index_service.query_files

    def counting_walk(buf: Any, length: int, entries_at: int, start: int, key_hash: int, index_count: int,
                      *rest: int) -> Any:  # fmt: skip
        result = inner(buf, length, entries_at, start, key_hash, index_count, *rest)
        seen.append((names.get(id(buf), "?"), result[1], index_count))
        return result

    def both(*args: Any) -> Any:
        answer = in_use(*args)
        assert reference(*args) == answer, "the compiled query_files disagrees with the reference"
        return answer

    real_query = IndexService.query_offsets

    def named_query(self: IndexService, *args: Any, **kw: Any) -> Any:
        names.clear()
        names.update({id(f.buffer): f.name for f in self.files})
        return real_query(self, *args, **kw)

    monkeypatch.setattr(query_walk, "walk_chain", counting_walk)
    monkeypatch.setattr(index_service, "query_files", both)
    monkeypatch.setattr(IndexService, "query_offsets", named_query)
    yield seen


def run_queries(
    d: Damaged, visits: list[tuple[str, int, int]], affected: Callable[[dict], bool]
) -> tuple[int, int]:
    """Every recorded query: unaffected ones equal Java's answer; returns (unaffected, affected)."""
    same = touched = 0
    started = time.monotonic()
    with MessageStore.open(d.config) as store:
        for q in d.expected["queries"]:
            if "exception" in q:
                continue
            got = store.query_message(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
            for buf in got.buffers:
                assert record.check(buf, 0, len(buf)) == len(buf), "only whole records come back"
            if affected(q):
                touched += 1
                continue
            assert [raw_sha(b) for b in got.buffers] == [r["rawSha256"] for r in q["results"]], q["key"]
            same += 1
    assert time.monotonic() - started < WALL_CLOCK_GUARD_S
    for _name, visited, count in visits:
        assert visited <= max(min(count, d.config.max_index_num), 1), "a walk visits each entry at most once"
    assert same > 100, "most queries do not touch the damage"
    return same, touched


def hits_any(offsets: set[int]) -> Callable[[dict], bool]:
    return lambda q: any(r["commitLogOffset"] in offsets for r in q["results"])


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def assert_once_each(messages: list[str]) -> None:
    assert messages, "the damage is logged"
    assert len(messages) == len(set(messages)), f"a problem was logged more than once: {messages}"


# -- pristine --------------------------------------------------------------------------------------


def test_pristine_copy_is_clean_and_quiet(
    damaged: Damaged, visits: list, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.WARNING)
    _same, touched = run_queries(damaged, visits, lambda q: False)
    assert touched == 0 and warnings(caplog) == []
    code, out = fsck(damaged.root, capsys)
    assert code == 0 and out.rstrip().endswith("OK"), out


# -- the CommitLog ---------------------------------------------------------------------------------


def test_truncated_commitlog_tail(
    damaged: Damaged, visits: list, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    size = damaged.config.mapped_file_size_commit_log
    last = sorted(damaged.config.store_path_commit_log.iterdir())[-1]
    messages = damaged.expected["messages"]
    in_last = [m for m in messages if m["commitLogOffset"] >= int(last.name)]
    victim = in_last[len(in_last) // 2]
    cut = victim["commitLogOffset"] + 10  # mid-record: a torn tail
    os.truncate(last, cut - int(last.name))
    lost = {m["commitLogOffset"] for m in messages if m["commitLogOffset"] >= victim["commitLogOffset"]}
    caplog.set_level(logging.WARNING)
    run_queries(damaged, visits, hits_any(lost))
    logged = warnings(caplog)
    assert len(logged) == 1 and f"CommitLog file {last}" in logged[0] and "truncated" in logged[0], logged
    with MessageStore.open(damaged.config) as store:
        assert store.commitlog.max_offset == victim["commitLogOffset"]
        # Affected queries return Java's records minus the lost ones.
        for q in damaged.expected["queries"]:
            if "exception" in q or not hits_any(lost)(q):
                continue
            got = store.query_message(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
            want = [r["rawSha256"] for r in q["results"] if r["commitLogOffset"] not in lost]
            assert [raw_sha(b) for b in got.buffers] == want
    code, out = fsck(damaged.root, capsys)
    assert code == 1
    assert f"CommitLog file {last.name} has {cut - int(last.name)} bytes, expected {size}: truncated" in out
    assert "is at or past the CommitLog's end" in out


@pytest.mark.parametrize("damage", ["body byte", "size and magic zeroed"])
def test_corrupt_record_mid_log(
    damaged: Damaged,
    visits: list,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    damage: str,
) -> None:
    size = damaged.config.mapped_file_size_commit_log
    victim = damaged.expected["messages"][2000]
    offset = victim["commitLogOffset"]
    path = damaged.config.store_path_commit_log / f"{offset // size * size:020d}"
    data = bytearray(path.read_bytes())
    at = offset % size
    if damage == "body byte":
        data[at + victim["size"] - 30] ^= 0xFF  # inside the properties: the lengths still add up
        data[at + 84 + 4] ^= 0xFF if victim["bodyLen"] else 0  # and the body: BODYCRC fails
    else:
        data[at : at + 8] = bytes(8)
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING)
    run_queries(damaged, visits, hits_any({offset}))
    logged = warnings(caplog)
    if damage == "body byte":
        # Served as stored, as the broker does (no CRC per served record); a walk over the
        # CommitLog (the builder's, fsck's) reports it, once.
        assert logged == []
        commitlog = CommitLog(damaged.config.store_path_commit_log, size)
        assert sum(1 for _ in commitlog.iter_records()) == len(damaged.expected["messages"]) - 1
        assert sum(1 for _ in commitlog.iter_records()) == len(damaged.expected["messages"]) - 1
        commitlog.close()
        logged = warnings(caplog)
        assert len(logged) == 1 and f"CommitLog record at offset {offset} ({path}, byte {at})" in logged[0]
    else:
        assert len(logged) == 1 and f"CommitLog offset {offset}, where no whole record starts" in logged[0]
    with MessageStore.open(damaged.config) as store:
        after = damaged.expected["messages"][2001]
        buf = store.view_message(after["commitLogOffset"])
        assert buf is not None and len(buf) == after["size"], "records after the damage still answer"
    code, out = fsck(damaged.root, capsys)
    assert code == 1
    assert f"CommitLog record at offset {offset} (file {path.name}, byte {at}) is corrupt" in out
    assert f"whole records resume at offset {offset + victim['size']}" in out
    # A rebuild refuses the gap by default, leaving the index as it was; asked to, it indexes every
    # record after the damage (the broker's recovery would stop there).
    before = [p.read_bytes() for p in sorted(damaged.config.index_dir.iterdir())]
    with pytest.raises(CommitLogGapError, match=f"whole records stop at offset {offset} and resume"):
        rebuild_index(damaged.config)
    assert [p.read_bytes() for p in sorted(damaged.config.index_dir.iterdir())] == before
    rebuild_index(damaged.config, around_gaps=True)
    code, out = fsck(damaged.root, capsys)
    assert "index is behind" not in out
    with MessageStore.open(damaged.config) as store:
        for m in damaged.expected["messages"][2001:2040]:
            if m["uniqKey"] and m["sysFlag"] & 0xC != 0xC:
                hits = store.query_message(m["topic"], m["uniqKey"], 32, 0, 2**63 - 1, exact_key=True)
                assert [int.from_bytes(b[28:36], "big") for b in hits.buffers] == [m["commitLogOffset"]]


# -- index files -----------------------------------------------------------------------------------


def test_zeroed_entries_inside_an_index_file(
    damaged: Damaged, visits: list, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    path = damaged.index_files[2]
    touched = damaged.indexed_offsets(path)
    data = bytearray(path.read_bytes())
    lo = damaged.entries_at() + 600 * INDEX_ENTRY_SIZE
    data[lo : lo + 400 * INDEX_ENTRY_SIZE] = bytes(400 * INDEX_ENTRY_SIZE)
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING)
    run_queries(damaged, visits, hits_any(touched))
    logged = warnings(caplog)
    assert_once_each(logged)
    assert all(path.name in m for m in logged)
    assert any("entry" in m and "zeroed" in m for m in logged)
    code, out = fsck(damaged.root, capsys)
    assert code == 1
    assert f"index file {path.name}: entry 600 (byte {lo + 4}) points at CommitLog offset 0" in out


def test_random_bytes_inside_an_index_file(
    damaged: Damaged, visits: list, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(7)
    path = damaged.index_files[3]
    touched = damaged.indexed_offsets(path)
    data = bytearray(path.read_bytes())
    # Random bytes over the slots and the entries (the header stays: that case is below).
    for lo, n in [(INDEX_HEADER_SIZE + 100, 900), (damaged.entries_at() + 200 * INDEX_ENTRY_SIZE, 30000)]:
        data[lo : lo + n] = rng.randbytes(n)
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING)
    run_queries(damaged, visits, hits_any(touched))
    assert_once_each(warnings(caplog))
    code, out = fsck(damaged.root, capsys)
    assert code == 1
    assert f"index file {path.name}: slot " in out and "outside 1..indexCount-1" in out
    assert f"index file {path.name}: entry " in out and "(and " in out, "counted, not one line each"
    assert len(out.splitlines()) < 40


def _chain(f: IndexFile, slot: int) -> list[int]:
    out = []
    n = f.slot(slot)
    while 0 < n < f.header.index_count and len(out) < 5000:
        out.append(n)
        n = f.entry(n)[3]
    return out


def test_forward_and_looping_chains(
    damaged: Damaged, visits: list, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = damaged.config
    path = damaged.index_files[1]
    touched = damaged.indexed_offsets(path)
    # The chain of a key the Java answers cover, with at least two entries in this file.
    f = IndexFile.open(path, cfg.max_hash_slot_num, cfg.max_index_num)
    queries = [q for q in damaged.expected["queries"] if "exception" not in q and q["results"]]
    for q in queries:
        slot = index_key_hash(build_index_key(q["topic"], q["key"])) % cfg.max_hash_slot_num
        chain = _chain(f, slot)
        if len(chain) >= 3:
            break
    count = f.header.index_count
    f.close()
    head, _older, oldest = chain[:3]
    data = bytearray(path.read_bytes())
    base = damaged.entries_at()

    def link(n: int, prev: int) -> None:
        h, phy, diff, _ = ENTRY.unpack_from(data, base + n * INDEX_ENTRY_SIZE)
        ENTRY.pack_into(data, base + n * INDEX_ENTRY_SIZE, h, phy, diff, prev)

    link(oldest, head)  # head -> older -> oldest -> head: a loop through a forward link
    # Another slot points beyond indexCount.
    empty = next(s for s in range(cfg.max_hash_slot_num) if SLOT.unpack_from(data, 40 + 4 * s)[0] == 0)
    SLOT.pack_into(data, 40 + 4 * empty, count + 5)
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING)
    with MessageStore.open(cfg) as store:
        for _ in range(50):  # the same looping walk many times: bounded, and logged once
            store.query_message(q["topic"], q["key"], 64, 0, 2**63 - 1)
    assert {v for name, v, _ in visits if name == path.name} == {3}, "head, older, oldest, then stop"
    assert warnings(caplog) == [
        f"index file {path}: entry {oldest} links forward to entry {head} (a corrupt chain); chain walks "
        "in this file stop before revisiting an entry"
    ], "50 looping queries, one line"
    caplog.clear()
    run_queries(damaged, visits, hits_any(touched))
    assert_once_each(warnings(caplog))
    code, out = fsck(damaged.root, capsys)
    assert code == 1
    assert (
        f"entry {oldest} (byte {base + oldest * INDEX_ENTRY_SIZE + 16}) links forward to entry {head}" in out
    )
    assert f"slot {empty} (byte {40 + 4 * empty}) points at entry {count + 5}, outside" in out


@pytest.mark.parametrize("which", [1, -1])
def test_header_counts_beyond_the_file(
    damaged: Damaged,
    visits: list,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    which: int,
) -> None:
    path = damaged.index_files[which]
    touched = damaged.indexed_offsets(path)
    data = bytearray(path.read_bytes())
    fields = list(HEADER.unpack_from(data, 0))
    fields[4], fields[5] = 10**6, 2**31 - 1  # hashSlotCount, indexCount far beyond the geometry
    HEADER.pack_into(data, 0, *fields)
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING)
    run_queries(damaged, visits, hits_any(touched))
    logged = warnings(caplog)
    assert len(logged) == 1 and path.name in logged[0] and "left out of queries" in logged[0], logged
    code, out = fsck(damaged.root, capsys)
    assert code == 1
    assert f"index file {path.name}: header (bytes 0..39): indexCount {2**31 - 1} outside" in out
    assert f"index file {path.name}: indexCount {2**31 - 1} (byte 36) exceeds maxIndexNum" in out


def test_index_file_of_the_wrong_size(
    damaged: Damaged, visits: list, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    path = damaged.index_files[2]
    touched = damaged.indexed_offsets(path)
    os.truncate(path, path.stat().st_size - 1000)
    caplog.set_level(logging.WARNING)
    run_queries(damaged, visits, hits_any(touched))
    logged = warnings(caplog)
    assert len(logged) == 1 and path.name in logged[0] and "left out" in logged[0], logged
    code, out = fsck(damaged.root, capsys)
    assert code == 1
    assert f"index file {path} has 42048 bytes, but maxHashSlotNum=512 and maxIndexNum=2048" in out


# -- markers ---------------------------------------------------------------------------------------


def test_missing_checkpoint(
    damaged: Damaged, visits: list, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged.config.checkpoint_path.unlink()
    caplog.set_level(logging.WARNING)
    run_queries(damaged, visits, lambda q: False)
    logged = warnings(caplog)
    assert len(logged) == 1 and "no checkpoint" in logged[0]
    code, out = fsck(damaged.root, capsys)
    assert code == 1 and f"checkpoint: cannot read checkpoint {damaged.config.checkpoint_path}" in out


def test_unreadable_checkpoint(
    damaged: Damaged, visits: list, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged.config.checkpoint_path.write_bytes(b"abc")  # a torn write: fewer than its 3 timestamps
    caplog.set_level(logging.WARNING)
    run_queries(damaged, visits, lambda q: False)
    logged = warnings(caplog)
    assert len(logged) == 1 and "has 3 bytes, fewer than its 3 timestamps" in logged[0], logged
    code, out = fsck(damaged.root, capsys)
    assert code == 1 and "has 3 bytes, fewer than its 3 timestamps" in out


def test_abort_marker(
    damaged: Damaged, visits: list, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    (damaged.root / "abort").touch()
    caplog.set_level(logging.WARNING)
    run_queries(damaged, visits, lambda q: False)
    logged = warnings(caplog)
    assert len(logged) == 1 and "abort exists" in logged[0]
    code, out = fsck(damaged.root, capsys)
    assert code == 1 and f"{damaged.root / 'abort'} exists" in out
