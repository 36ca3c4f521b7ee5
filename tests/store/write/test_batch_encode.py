"""The compiled batch append (``store/write/_batch_encode_fast.c``, issue 33) against the Python
reference (``StoreWriter.put_batch``'s per-record ``encode_message`` path): the same batches written
by both into two stores give byte-identical CommitLog files and the same ``Appended`` answers
(offsets, sizes, offset ids, unique keys, queue offsets).

Each test loads the C module directly and sets it on the writer (or None for the reference), so the
C code is checked whichever way the suite runs (``RMQ_PURE_PYTHON=1`` or not); a spy counts the
batches the C call took, so a comparison where it silently declined everything cannot pass.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from protocol.message import decode_message
from protocol.message_flags import TRANSACTION_PREPARED_TYPE
from store.config.store_config import StoreConfig
from store.write import writer as writer_module
from store.write.writer import Appended, StoreRecord, StoreWriter


def _fast() -> ModuleType:
    try:
        return importlib.import_module("store.write._batch_encode_fast")
    except ImportError:
        pytest.skip("the compiled accelerator is not built (python setup.py build_ext --inplace)")


class _Spy:
    """The C module's ``encode_uniform``, counting the calls that encoded (not None)."""

    def __init__(self, fast: ModuleType) -> None:
        self.fast = fast
        self.took = 0
        self.declined = 0

    def encode_uniform(self, *args: Any) -> Any:
        result = self.fast.encode_uniform(*args)
        if result is None:
            self.declined += 1
        else:
            self.took += 1
        return result


def _write(
    root: Path, monkeypatch: pytest.MonkeyPatch, kernel: object, batches: list[list[StoreRecord]]
) -> tuple[list[list[Appended]], dict[str, bytes]]:
    monkeypatch.setattr(writer_module, "_batch_fast", kernel)
    config = StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=64 * 1024,
        max_hash_slot_num=64,
        max_index_num=256,
        broker_ip1="10.1.2.3",
    )
    clock = iter(range(1_700_000_000_000, 1_700_000_000_000 + 10_000))
    with StoreWriter(config, clock=lambda: next(clock)) as w:
        appended = [w.put_batch(batch) for batch in batches]
    files = {p.name: p.read_bytes() for p in sorted(config.store_path_commit_log.iterdir())}
    return appended, files


def _batch(n: int, make: Callable[[int], StoreRecord]) -> list[StoreRecord]:
    return [make(i) for i in range(n)]


def _batches() -> list[list[StoreRecord]]:
    """Java-like batches and the odd cases: str and bytes properties, UNIQ_KEY present, absent,
    repeated, empty or not UTF-8, empty and binary bodies, IPv6 hosts, a store host of its own,
    prepared transactions (no queue offset), many queues, big batches that roll files."""
    out: list[list[StoreRecord]] = []
    for b in range(12):
        out.append(
            _batch(
                32,
                lambda i, b=b: StoreRecord(
                    "BatchTopic",
                    bytes([(b + i) % 256]) * 1024,
                    f"KEYS\x01k-{b}-{i}\x02TAGS\x01TagB\x02UNIQ_KEY\x01{b:016X}{i:016X}\x02WAIT\x01true\x02CLUSTER\x01c",
                    queue_id=b % 4,
                    flag=i,
                    born_timestamp=1_690_000_000_000 + b,
                    born_host="192.168.7.9",
                    born_port=40000 + b,
                    reconsume_times=b % 3,
                ),
            )
        )
    odd_props: list[str | bytes] = [
        b"",
        "",
        "UNIQ_KEY\x01first\x02UNIQ_KEY\x01last",
        "UNIQ_KEY\x01kept\x02UNIQ_KEY\x01",
        b"UNIQ_KEY\x01\xff\xfebad\x02KEYS\x01x",
        "\x02\x02UNIQ_KEY\x01a\x01b\x02",
        "KEYS\x01ключ\x02UNIQ_KEY\x01ключ-7",
        "UNIQ_KEY",
        "x" * 32767,
    ]
    out.append(
        _batch(
            len(odd_props),
            lambda i: StoreRecord(
                "Odd", b"" if i % 2 else bytes(range(256)), odd_props[i], queue_id=1, flag=-i
            ),
        )
    )
    out.append(
        _batch(3, lambda i: StoreRecord("V6", b"six", f"UNIQ_KEY\x01v6-{i}", born_host="::1", born_port=9))
    )
    out.append(
        _batch(2, lambda i: StoreRecord("Own", b"own", "", store_host="fe80::7", store_port=7, queue_id=2))
    )
    out.append(
        _batch(
            4, lambda i: StoreRecord("Half", b"half", f"UNIQ_KEY\x01h{i}", sys_flag=TRANSACTION_PREPARED_TYPE)
        )
    )
    out.append([StoreRecord("Lone", b"one", "UNIQ_KEY\x01lone\x02KEYS\x01a b", queue_id=3)])
    # not uniform (two queues; two topics): the C call declines, the per-record path stores them
    out.append([StoreRecord("Mixed", b"a", "", queue_id=0), StoreRecord("Mixed", b"b", "", queue_id=1)])
    out.append([StoreRecord("MixA", b"a", ""), StoreRecord("MixB", b"b", "")])
    # a topic over 127 bytes (MAGIC_CODE_V2): declined, written by the Python path
    out.append([StoreRecord("L" * 130, b"long", "")])
    return out


def test_compiled_batches_write_the_python_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Spy(_fast())
    compiled = _write(tmp_path / "c", monkeypatch, spy, _batches())
    reference = _write(tmp_path / "p", monkeypatch, None, _batches())
    assert spy.took == len(_batches()) - 3 and spy.declined == 3
    assert compiled[0] == reference[0]
    assert compiled[1].keys() == reference[1].keys() and len(compiled[1]) > 1  # the batches rolled files
    for name, data in reference[1].items():
        assert compiled[1][name] == data, f"CommitLog file {name} differs"


def test_the_records_decode_as_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not only equal to the reference: each compiled record decodes, CRC checked, to its input."""
    spy = _Spy(_fast())
    batches = _batches()[:13]
    appended, files = _write(tmp_path / "c", monkeypatch, spy, batches)
    assert spy.took == 13
    size = 64 * 1024
    for batch, answers in zip(batches, appended, strict=True):
        for rec, a in zip(batch, answers, strict=True):
            data = files[f"{a.offset - a.offset % size:020d}"]
            msg = decode_message(data, a.offset % size, check_crc=True)
            assert (msg.topic, msg.body, msg.flag, msg.queue_id) == (
                rec.topic,
                rec.body,
                rec.flag,
                rec.queue_id,
            )
            assert msg.commit_log_offset == a.offset and msg.store_size == a.size
            assert msg.queue_offset == a.queue_offset and msg.unique_key == a.unique_key


def test_a_record_it_cannot_write_leaves_everything_to_python(tmp_path: Path) -> None:
    """Declining happens before ``place``: nothing is placed for a batch the C call does not take."""
    fast = _fast()
    placed: list[int] = []

    def place(total: int) -> int:
        placed.append(total)
        return 0

    addr = bytes([127, 0, 0, 1])
    good = StoreRecord("T", b"x", "")
    for bad in (
        StoreRecord("T", bytearray(b"x"), ""),  # type: ignore[arg-type]
        StoreRecord("T", b"x", "\udcff"),
        StoreRecord("T", b"x", "p" * 32768),
        StoreRecord("T", b"x", "", flag=2**31),
        StoreRecord("T", b"x", "", born_port=1),
        StoreRecord("U", b"x", ""),
    ):
        assert fast.encode_uniform([good, bad], addr, addr, 10911, 0, 1, 0, place) is None
    assert fast.encode_uniform([good], addr, addr, 10911, 0, 1, 2**63 - 1, place) is None
    assert fast.encode_uniform([good], addr + addr, addr, 10911, 0, 1, 0, place) is None  # sysFlag says IPv4
    assert placed == []
    assert fast.encode_uniform([good], addr, addr, 10911, 0, 1, 0, place) is not None
    assert placed == [91 + 1 + 1]  # the V1 layout's 91 bytes, a 1-byte body and a 1-byte topic
