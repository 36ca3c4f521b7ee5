"""The compiled range indexer (``store/index/_index_range_fast.c``) against its pure-Python reference.

Both must write byte-identical IndexFiles and checkpoints: on the Java broker's own store (where
Java's files are the expected bytes), on generated multi-file stores with every kind of key (non-BMP
characters, 403-char keys, many topics, rollbacks), on hostile CommitLogs (torn, corrupt, lying
lengths, bytes that are not UTF-8) and on randomly damaged record ranges called directly.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.index_key import build_index_key, index_key_hash
from protocol.message import MAGIC_CODE_V1, MAGIC_CODE_V2, read_index_fields
from protocol.message_flags import BLANK_MAGIC_CODE
from store.checkpoint import Checkpoint
from store.commitlog.gaps import CommitLogGapError
from store.config.store_config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, StoreConfig
from store.errors import IndexFileError
from store.index import index_range
from store.index.builder import rebuild_index
from store.index.index_file import IndexFile
from store.write.writer import StoreWriter
from tests.support.store_copy import writable_copy

compiled = pytest.importorskip("store.index._index_range_fast", reason="compiled accelerator not built")

IMPLS: dict[str, Callable[..., tuple[int, ...]]] = {
    "python": index_range.index_range_reference,
    "compiled": compiled.index_range,
}


def _index_bytes(index_dir: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(index_dir.iterdir()) if p.name.isdigit()]


def _copy(config: StoreConfig, dst: Path) -> StoreConfig:
    return writable_copy(config, dst)


def _build_both(
    config: StoreConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, around_gaps: bool = False
) -> dict[str, tuple[list[bytes], bytes, int, int, set[str]]]:
    """A rebuilt copy per implementation: (index files, checkpoint, keys, records, topics)."""
    out = {}
    for name, impl in IMPLS.items():
        copy = _copy(config, tmp_path / name)
        shutil.rmtree(copy.index_dir, ignore_errors=True)
        monkeypatch.setattr("store.index.builder.index_range", impl)
        clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
        builder = rebuild_index(copy, now_millis=clock.__next__, around_gaps=around_gaps)
        out[name] = (
            _index_bytes(copy.index_dir),
            copy.checkpoint_path.read_bytes(),
            builder.keys_indexed,
            builder.records_indexed,
            builder.topics_seen,
        )
    return out


def _entries(index_bytes: list[bytes], slots: int) -> list[tuple[int, int]]:
    """(keyHash, phyOffset) of every entry of every file, in order."""
    out = []
    for data in index_bytes:
        count = struct.unpack_from(">i", data, 36)[0]
        base = INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE
        for n in range(1, count):
            key_hash, phy = struct.unpack_from(">iq", data, base + n * INDEX_ENTRY_SIZE)
            out.append((key_hash, phy))
    return out


def test_java_store_rebuilt_by_both_is_javas_index(
    golden_stores: list[tuple[StoreConfig, dict]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java, _ = golden_stores[0]
    built = _build_both(java, tmp_path, monkeypatch)
    want_ts = Checkpoint.read(java.checkpoint_path).index_msg_timestamp
    for name, (files, _checkpoint, keys, _records, topics) in built.items():
        assert files == _index_bytes(java.index_dir), name
        assert Checkpoint.read(tmp_path / name / "checkpoint").index_msg_timestamp == want_ts, name
        assert keys == 11650, name
        assert {"TopicA", "TopicB", "topic_c-1"} <= topics, name
    assert built["python"] == built["compiled"]


#: Keys that exercise the hash: non-BMP characters (surrogate pairs in Java), CJK, a 403-char key,
#: runs of spaces (empty tokens), Java hash collisions and a key hashing to Integer.MIN_VALUE.
_ODD_KEYS = [
    "🔑1 𝄞music",
    "中文键 キー",
    "x" * 403,
    "  lead  and   trail  ",
    "Aa BB AaBB BBAa",
    "minhash-979196鿿鱮",
    "é" * 200,
    "tab\tsep no\x01ctl",
]


def _generated_store(root: Path, messages: int, seed: int) -> tuple[StoreConfig, int]:
    """A multi-file store (16 KiB CommitLog files) and how many keys a build must index."""
    rng = random.Random(seed)
    config = StoreConfig.for_store(
        root, mapped_file_size_commit_log=16384, max_hash_slot_num=37, max_index_num=97
    )
    writer_config = StoreConfig.for_store(root, mapped_file_size_commit_log=16384, message_index_enable=False)
    topics = [f"T{i}" for i in range(150)] + ["主题", "t" * 200, "emoji🔑topic"]
    expected_keys = 0
    clock = 1_700_000_000_000
    with StoreWriter(writer_config, clock=lambda: clock) as writer:
        for i in range(messages):
            clock += rng.choice([0, 1, 7, 999, 1000, 1001, 250_000])
            topic = rng.choice(topics) if rng.random() < 0.5 else "Hot"
            keys: str | None = rng.choice([*_ODD_KEYS, f"k{i}", f"k{i} s{i % 5}", "", " ", None])
            uniq: str | bool = rng.choice([True, True, False, "uniq with space", "ü-uniq"])
            sys_flag = rng.choice([0, 0, 0, 0x4, 0x8, 0xC])
            born = rng.choice(["127.0.0.1", "::1"])
            writer.append(
                topic,
                os.urandom(rng.randrange(0, 600)),
                keys=keys,
                unique_key=uniq,
                sys_flag=sys_flag,
                born_host=born,
            )
            if sys_flag != 0xC:
                n = 0 if uniq is False else 1
                n += len([k for k in (keys or "").split(" ") if k])
                expected_keys += n
    return config, expected_keys


@pytest.mark.parametrize("seed", [1, 2])
def test_generated_multi_file_stores_build_identically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    config, expected_keys = _generated_store(tmp_path / "src", 700, seed)
    built = _build_both(config, tmp_path, monkeypatch)
    files, _cp, keys, _records, topics = built["compiled"]
    assert keys == expected_keys
    assert len(files) > 10, "small geometry: many index files, so rolls land mid-record too"
    assert len(list(config.store_path_commit_log.iterdir())) > 10
    assert len(topics) > 100, "more topics than the compiled topic cache holds at once"
    assert built["python"] == built["compiled"]


# -- hostile CommitLogs ------------------------------------------------------------------------------

_FILE = 8192


def _records_of(config: StoreConfig) -> list[bytes]:
    """The records of a store written by StoreWriter, as bytes (one CommitLog file, no blank)."""
    data = (config.store_path_commit_log / f"{0:020d}").read_bytes()
    out, pos = [], 0
    while pos + 8 <= len(data):
        size, magic = struct.unpack_from(">ii", data, pos)
        if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2):
            break
        out.append(data[pos : pos + size])
        pos += size
    return out


def _lay_out(root: Path, records: list[bytes]) -> list[int]:
    """Write ``records`` into 8 KiB CommitLog files as the broker would (blank marker, next file),
    each with PHYSICALOFFSET set to where it lands; returns their offsets."""
    log_dir = root / "commitlog"
    log_dir.mkdir(parents=True)
    files: dict[int, bytearray] = {}
    offsets, pos = [], 0
    for rec in records:
        start = pos - pos % _FILE
        if pos + len(rec) + 8 > start + _FILE:
            buf = files.setdefault(start, bytearray(_FILE))
            struct.pack_into(">ii", buf, pos - start, start + _FILE - pos, BLANK_MAGIC_CODE)
            pos = start + _FILE
            start = pos
        buf = files.setdefault(start, bytearray(_FILE))
        rec = bytearray(rec)
        if len(rec) >= 36:
            struct.pack_into(">q", rec, 28, pos)
        buf[pos - start : pos - start + len(rec)] = rec
        offsets.append(pos)
        pos += len(rec)
    for start, buf in files.items():
        (log_dir / f"{start:020d}").write_bytes(bytes(buf))
    return offsets


def _patched(rec: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(rec)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def _props_at(rec: bytes) -> int:
    """Where the properties length field of a V1/V2 record lies."""
    f = read_index_fields(rec, 0)
    return len(rec) - 2 - len(_props(rec, f.topic))


def _props(rec: bytes, topic: str) -> bytes:
    at = rec.rfind(topic.encode()) + len(topic.encode())
    return rec[at + 2 :]


def test_hostile_commitlog_builds_identically_and_indexes_exactly_the_sound_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = StoreConfig.for_store(
        tmp_path / "src", mapped_file_size_commit_log=1 << 20, message_index_enable=False
    )
    with StoreWriter(src) as w:
        for i in range(40):
            w.append("H", b"b" * (i * 13 % 300), keys=f"good-{i} kéy-{i}")
        w.append("H", b"noprops", unique_key=False)  # no properties at all
        w.append("H" * 200, b"long topic", keys="v1-topic")  # a V2 record (topic > 127 bytes)
    good = _records_of(src)
    no_props, long_topic = good[40], good[41]
    sound = good[:40]
    hostile: list[tuple[str, bytes]] = []
    rec = good[0]
    hostile.append(("bad magic", _patched(rec, 4, ">i", 0x12345678)))
    hostile.append(
        ("body CRC", _patched(rec, 8, ">i", (struct.unpack_from(">i", rec, 8)[0] + 1) & 0x7FFFFFFF))
    )
    hostile.append(("TOTALSIZE 2^31-1", _patched(rec, 0, ">i", 0x7FFFFFFF)))
    hostile.append(("negative TOTALSIZE", _patched(rec, 0, ">i", -5)))
    hostile.append(("huge properties length", _patched(rec, _props_at(rec), ">h", 0x7FFF)))
    hostile.append(("negative properties length", _patched(no_props, len(no_props) - 2, ">h", -1)))
    # A V1 record whose one-byte topic length is >= 128 (signed in the decoder, as in Java).
    topic_len_at = long_topic.find(b"H" * 200) - 2
    v1 = bytearray(long_topic[:topic_len_at] + bytes([200]) + long_topic[topic_len_at + 2 :])
    struct.pack_into(">ii", v1, 0, len(v1), MAGIC_CODE_V1)
    hostile.append(("V1 topic length 200", bytes(v1)))
    # Keys that are not UTF-8: é's two bytes replaced by 0xFF 0xFE, and a lone continuation byte.
    bad_utf8 = good[1].replace("kéy-1".encode(), b"k\xff\xfey-1").replace(b"good-1", b"go\x80d-1")
    assert len(bad_utf8) == len(good[1])
    layout: list[tuple[str, bytes]] = []
    for i, r in enumerate(sound):
        layout.append(("sound", r))
        if i < len(hostile):
            layout.append(hostile[i])
    layout.append(("non-UTF-8 keys", bad_utf8))
    layout.append(("torn tail", sound[5][: len(sound[5]) // 2]))
    root = tmp_path / "hostile"
    offsets = _lay_out(root, [r for _, r in layout])
    config = StoreConfig.for_store(
        root, mapped_file_size_commit_log=_FILE, max_hash_slot_num=11, max_index_num=30
    )
    for name, impl in IMPLS.items():  # corrupt records with whole records after them are gaps
        monkeypatch.setattr("store.index.builder.index_range", impl)
        with pytest.raises(CommitLogGapError, match="whole records stop at offset"):
            rebuild_index(config)
        assert not config.index_dir.exists(), name
    built = _build_both(config, tmp_path, monkeypatch, around_gaps=True)
    assert built["python"] == built["compiled"]
    files = built["compiled"][0]
    indexed = {phy for _h, phy in _entries(files, 11)}
    want = {
        off for off, (kind, _r) in zip(offsets, layout, strict=True) if kind in ("sound", "non-UTF-8 keys")
    }
    assert indexed == want
    # The non-UTF-8 keys are indexed as Java decodes them: each bad byte becomes U+FFFD.
    bad_at = offsets[[k for k, _ in layout].index("non-UTF-8 keys")]
    hashes = {h for h, phy in _entries(files, 11) if phy == bad_at}
    assert index_key_hash(build_index_key("H", "k\ufffd\ufffdy-1")) in hashes
    assert index_key_hash(build_index_key("H", "go\ufffdd-1")) in hashes


# -- direct calls on randomly damaged ranges ----------------------------------------------------------


def _run_range(
    impl: Callable[..., tuple[int, ...]], data: bytes, base: int, index_dir: Path, budget: int
) -> tuple[list[tuple[int, ...]], list[bytes], list[tuple[int, ...]], set[str]]:
    """Drive one implementation over ``data`` like the builder (rolls to new files), until it stops."""
    index_dir.mkdir()
    files: list[IndexFile] = []
    topics: set[str] = set()
    results = []
    pos, skip, target = 0, 0, None
    view = memoryview(data)
    for _ in range(1000):
        result = tuple(impl(view, pos, len(data), base, target, topics, skip, budget))
        results.append(result)
        stop, pos, skip = result[0], result[1], result[2]
        if stop != index_range.ROLL:
            break
        prev = files[-1] if files else None
        target = IndexFile.create(
            index_dir / f"{len(files):04d}",
            7,
            9,
            end_phy_offset=prev.header.end_phy_offset if prev else 0,
            end_timestamp=prev.header.end_timestamp if prev else 0,
        )
        files.append(target)
    states = [f.writer_state() for f in files]
    for f in files:
        f.close()
    return results, [p.read_bytes() for p in sorted(index_dir.iterdir())], states, topics


def test_damaged_ranges_give_the_same_answers_and_bytes(tmp_path: Path) -> None:
    config, _ = _generated_store(tmp_path / "src", 60, seed=3)
    data = (config.store_path_commit_log / f"{0:020d}").read_bytes()[:12000]
    rng = random.Random(11)
    for trial in range(300):
        damaged = bytearray(data)
        for _ in range(rng.randrange(1, 6)):
            at = rng.randrange(len(damaged))
            if rng.random() < 0.3 and at + 4 <= len(damaged):
                struct.pack_into(
                    ">i", damaged, at, rng.choice([-1, 0, 1, 90, 91, 0x7FFF, 0x7FFFFFFF, -(2**31)])
                )
            else:
                damaged[at] = rng.choice(
                    [0x00, 0x01, 0x02, 0x20, 0x80, 0xC3, 0xED, 0xF0, 0xFF, rng.randrange(256)]
                )
        end = rng.randrange(len(damaged) // 2, len(damaged) + 1)
        budget = rng.choice([1, 3, 10, 1 << 62])
        got = {}
        for name, impl in IMPLS.items():
            got[name] = _run_range(impl, bytes(damaged[:end]), 0, tmp_path / f"{trial}-{name}", budget)
        assert got["python"] == got["compiled"], f"trial {trial}"
        shutil.rmtree(tmp_path / f"{trial}-python")
        shutil.rmtree(tmp_path / f"{trial}-compiled")


def test_properties_of_random_bytes_hash_alike(tmp_path: Path) -> None:
    """The property scan and UTF-8 handling: random property bytes (not covered by BODYCRC)."""
    src = StoreConfig.for_store(
        tmp_path / "src", mapped_file_size_commit_log=1 << 20, message_index_enable=False
    )
    with StoreWriter(src) as w:
        w.append("P", b"body", keys="k" * 60, unique_key="u" * 30)
    rec = _records_of(src)[0]
    props_at = _props_at(rec) + 2
    alphabet = [
        *b"KEYSUNIQ_ \x01\x02",
        0x80,
        0xBF,
        0xC3,
        0xA9,
        0xED,
        0xA0,
        0xF0,
        0x9F,
        0x94,
        0x91,
        0xFF,
        *b"az",
    ]
    size = len(rec) - props_at
    fixed = [  # Java keeps the last non-empty value of a repeated property
        b"KEYS\x01first\x02KEYS\x01last",
        b"KEYS\x01kept\x02KEYS\x01\x02UNIQ_KEY\x01u1\x02UNIQ_KEY\x01u2",
        b"XKEYS\x01no\x02KEYSX\x01no\x02keys\x01no\x02KEYS\x01a\x01b c",
        b"\x02\x02KEYS\x01\xf0\x9f\x94\x91 \xed\xa0\x80 x\x02",
    ]
    rng = random.Random(5)
    for trial in range(300 + len(fixed)):
        props = bytearray(rec[props_at:])
        if trial < len(fixed):
            props = bytearray(fixed[trial].ljust(size, b"\x02"))
            assert len(props) == size
        for i in range(len(props) if trial >= len(fixed) else 0):
            if rng.random() < 0.4:
                props[i] = rng.choice(alphabet)
        if trial < len(fixed):
            pass
        elif rng.random() < 0.5:
            props[:5] = b"KEYS\x01"
        if trial >= len(fixed) and rng.random() < 0.5:
            at = rng.randrange(len(props) - 10)
            props[at : at + 10] = b"\x02UNIQ_KEY\x01"
        data = rec[:props_at] + bytes(props)
        got = {
            name: _run_range(impl, data, 0, tmp_path / f"{trial}-{name}", 1 << 62)
            for name, impl in IMPLS.items()
        }
        assert got["python"] == got["compiled"], f"trial {trial}: {bytes(props)!r}"


def test_the_range_end_is_never_crossed(tmp_path: Path) -> None:
    config, _ = _generated_store(tmp_path / "src", 5, seed=4)
    data = (config.store_path_commit_log / f"{0:020d}").read_bytes()
    first = struct.unpack_from(">i", data, 0)[0]
    for name, impl in IMPLS.items():
        # The first record ends one byte past `end`: not a whole record in range.
        results, _files, _states, _topics = _run_range(impl, data[: first - 1], 0, tmp_path / name, 1 << 62)
        assert results[-1][:2] == (index_range.OTHER, 0), name
    with pytest.raises(ValueError):
        compiled.index_range(memoryview(data[:100]), 0, 101, 0, None, set(), 0, 1)


def test_a_negative_properties_length_is_left_to_the_commitlog_walk(tmp_path: Path) -> None:
    """The walk accepts it (Java reads it as no properties), the field decoder refuses it: the range
    call stops there (OTHER) and the builder skips it with a warning (see the hostile store test)."""
    src = StoreConfig.for_store(
        tmp_path / "src", mapped_file_size_commit_log=1 << 20, message_index_enable=False
    )
    with StoreWriter(src) as w:
        w.append("N", b"body", unique_key=False)
    rec = _patched(_records_of(src)[0], len(_records_of(src)[0]) - 2, ">h", -1)
    for name, impl in IMPLS.items():
        results, _f, _s, topics = _run_range(impl, rec, 0, tmp_path / name, 1 << 62)
        assert results == [(index_range.OTHER, 0, 0, 0, 0, 0)], name
        assert topics == set(), name


def test_a_file_cut_under_the_map_cuts_the_range(tmp_path: Path) -> None:
    """``safe_length`` is asked again every RECHECK_EVERY bytes; a smaller answer ends the walk
    there (store.commitlog.mapped_files's safe-length contract), in both implementations alike."""
    from store.commitlog.mapped_files import RECHECK_EVERY

    src = StoreConfig.for_store(
        tmp_path / "src", mapped_file_size_commit_log=1 << 20, message_index_enable=False
    )
    with StoreWriter(src) as w:
        for i in range(400):
            w.append("C", b"c" * 300, keys=f"c{i} d{i % 7}")
    data = (src.store_path_commit_log / f"{0:020d}").read_bytes()
    end = len(data.rstrip(b"\0"))
    assert end > RECHECK_EVERY + 20000
    cut = RECHECK_EVERY + 5000
    for name, impl in IMPLS.items():
        asked: list[int] = []

        def safe_length(asked: list[int] = asked) -> int:
            asked.append(1)
            return cut

        index_dir = tmp_path / name
        index_dir.mkdir()
        target = IndexFile.create(index_dir / "0001", 1000, 4000)
        result = impl(memoryview(data), 0, end, 0, target, set(), 0, 1 << 62, safe_length)
        target.close()
        assert asked, name
        stop, pos = result[0], result[1]
        assert pos <= cut, name
        assert pos > RECHECK_EVERY, name
        assert stop == index_range.OTHER, f"{name}: the record across the cut is not whole"
    assert (tmp_path / "python" / "0001").read_bytes() == (tmp_path / "compiled" / "0001").read_bytes()


# -- a bytearray target (a Spark decode task's sink) and put_entries --------------------------------

PUT_ENTRIES = {"python": index_range.put_entries_reference, "compiled": compiled.put_entries}


def _file_entries(target: IndexFile) -> list[tuple[int, int, int]]:
    """(keyHash, phyOffset, timeDiff) of every entry put into ``target``, in order."""
    data = target.buffer
    base = INDEX_HEADER_SIZE + target.hash_slot_num * INDEX_SLOT_SIZE
    count = target.writer_state()[5]
    return [struct.unpack_from(">iqi", data, base + n * INDEX_ENTRY_SIZE) for n in range(1, count)]


def test_a_bytearray_target_packs_the_keys_an_index_file_gets(tmp_path: Path) -> None:
    """On damaged ranges, both implementations pack the same entries, stop at the same place, and pack
    exactly the keys (hash, offset) a big enough IndexFile gets from the same walk."""
    config, _ = _generated_store(tmp_path / "src", 60, seed=4)
    data = (config.store_path_commit_log / f"{0:020d}").read_bytes()[:12000]
    rng = random.Random(12)
    for trial in range(200):
        damaged = bytearray(data)
        for _ in range(rng.randrange(0, 4)):
            damaged[rng.randrange(len(damaged))] = rng.choice([0x00, 0x02, 0x20, 0xC3, 0xFF])
        end = rng.randrange(len(damaged) // 2, len(damaged) + 1)
        view = memoryview(bytes(damaged[:end]))
        got = {}
        for name, impl in IMPLS.items():
            sink, topics = bytearray(), set()
            result = tuple(impl(view, 0, end, 4096, sink, topics, 0, 1 << 62))
            target = IndexFile.create(tmp_path / f"{trial}-{name}", 7, 1000)
            file_topics: set[str] = set()
            into_file = tuple(impl(view, 0, end, 4096, target, file_topics, 0, 1 << 62))
            in_file = [(h, phy) for h, phy, _diff in _file_entries(target)]
            target.close()
            packed = list(index_range.PACKED.iter_unpack(sink))
            assert result == into_file and topics == file_topics, f"trial {trial} {name}"
            assert [(h, phy) for h, phy, _ts in packed] == in_file, f"trial {trial} {name}"
            got[name] = (result, bytes(sink), topics)
        assert got["python"] == got["compiled"], f"trial {trial}"


def test_put_entries_writes_what_put_hash_writes_and_stops_when_full(tmp_path: Path) -> None:
    rng = random.Random(13)
    entries = [
        (rng.randrange(2**31), 1000 + 97 * i, 1_700_000_000_000 + rng.randrange(-5000, 90_000))
        for i in range(40)
    ]
    blob = b"".join(index_range.PACKED.pack(*e) for e in entries)
    prev = {"end_phy_offset": 900, "end_timestamp": 1_699_999_999_000}  # a successor file's start
    by_hand = IndexFile.create(tmp_path / "by-hand", 7, 30, **prev)
    for e in entries:
        if not by_hand.put_hash(*e):
            break
    expected = (bytes(by_hand.buffer), by_hand.writer_state())
    by_hand.close()
    for name, put in PUT_ENTRIES.items():
        target = IndexFile.create(tmp_path / name, 7, 30, **prev)
        assert put(target, blob[: 5 * 20]) == 5
        assert put(target, blob[5 * 20 :]) == 29 - 5  # entry 0 is never used: 29 keys fit
        assert (bytes(target.buffer), target.writer_state()) == expected, name
        with pytest.raises(ValueError):
            put(target, b"\x00" * 19)
        target.close()


def test_the_writer_state_is_shared_in_place_and_a_closed_or_read_only_file_refused(tmp_path: Path) -> None:
    """The compiled writer reads and writes ``IndexFile``'s state array in place (``compiled_writer``):
    puts alternating between the compiled ``put_entries`` and Python's ``put_hash`` on one file give
    the bytes and state of Python's alone; a read-only or closed file is refused with an error by
    both implementations, and nothing is written."""
    rng = random.Random(50)
    entries = [(rng.randrange(2**31), 500 + 61 * i, 1_700_000_000_000 + 900 * i) for i in range(30)]
    by_hand = IndexFile.create(tmp_path / "by-hand", 5, 40)
    for e in entries:
        assert by_hand.put_hash(*e)
    expected = (bytes(by_hand.buffer), by_hand.writer_state(), by_hand.header)
    by_hand.close()
    mixed = IndexFile.create(tmp_path / "mixed", 5, 40)
    for i, e in enumerate(entries):
        if i % 3 == 0:
            assert mixed.put_hash(*e)
        else:
            assert compiled.put_entries(mixed, index_range.PACKED.pack(*e)) == 1
    assert (bytes(mixed.buffer), mixed.writer_state(), mixed.header) == expected
    mixed.close()
    assert mixed.compiled_writer is None
    blob = index_range.PACKED.pack(*entries[0])
    for name, put in PUT_ENTRIES.items():
        with pytest.raises((ValueError, IndexFileError)):
            put(mixed, blob)
        read_only = IndexFile.open(tmp_path / "by-hand", 5, 40)
        before = (tmp_path / "by-hand").read_bytes()
        with pytest.raises((ValueError, IndexFileError)):
            put(read_only, blob)
        read_only.close()
        assert (tmp_path / "by-hand").read_bytes() == before, name
