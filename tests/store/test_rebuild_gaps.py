"""``rebuild-index`` never replaces an index with one that stops at a gap in the CommitLog.

Copies of the Java store with a middle CommitLog file removed, a middle file cut short mid-record,
and a record corrupted in the middle of the log. By default the rebuild refuses (exit 1, the Java
index untouched byte for byte, the gap named by its offsets and files); with ``--index-around-gaps``
it indexes around the gap, and every query the Java broker answered returns Java's records minus
exactly those the damage destroyed, the records before and after the gap included. Expected offsets
come from ``java-4.9.7-a.expected.json`` (what the Java broker stored), not from the code under test.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from clients.cli import main
from protocol.message_flags import BORNHOST_V6_FLAG, STOREHOST_V6_FLAG
from store.config import StoreConfig
from store.message_store import MessageStore

STORE = "java-4.9.7-a"
FILE_SIZE = 262144
MIDDLE = 8  # the 9th of 17 CommitLog files


@dataclass
class Damage:
    """A damaged copy: where whole records stop and resume, what the message must say, what is lost."""

    root: Path
    start: int
    resume: int
    phrases: list[str]
    lost: set[int]


def copy_store(stores_dir: Path, root: Path) -> StoreConfig:
    """A writable copy of the Java store with its broker.conf inside (so ``--store DIR`` is enough)."""
    shutil.copytree(stores_dir / STORE, root)
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    text = (stores_dir / f"{STORE}.broker.conf").read_text(encoding="utf-8")
    conf = "\n".join(ln for ln in text.splitlines() if not ln.startswith("storePath")) + "\n"
    (root / "broker.conf").write_text(conf, encoding="utf-8")
    return StoreConfig.load(root / "broker.conf", overrides={"store_path_root_dir": root})


def file_name(n: int) -> str:
    return f"{n * FILE_SIZE:020d}"


def remove_middle_file(root: Path, messages: list[dict]) -> Damage:
    lo, hi = MIDDLE * FILE_SIZE, (MIDDLE + 1) * FILE_SIZE
    (root / "commitlog" / file_name(MIDDLE)).unlink()
    before = [m for m in messages if m["commitLogOffset"] < lo]
    stop = before[-1]["commitLogOffset"] + before[-1]["size"]  # then the end-of-file blank marker
    lost = {m["commitLogOffset"] for m in messages if lo <= m["commitLogOffset"] < hi}
    phrases = [f"file {file_name(MIDDLE)} (offsets {lo}..{hi}) is missing"]
    return Damage(root, stop, hi, phrases, lost)


def truncate_middle_file(root: Path, messages: list[dict]) -> Damage:
    lo, hi = MIDDLE * FILE_SIZE, (MIDDLE + 1) * FILE_SIZE
    inside = [m for m in messages if lo <= m["commitLogOffset"] < hi]
    victim = inside[len(inside) // 2]
    cut = victim["commitLogOffset"] + 10 - lo  # mid-record
    os.truncate(root / "commitlog" / file_name(MIDDLE), cut)
    lost = {m["commitLogOffset"] for m in inside if m["commitLogOffset"] >= victim["commitLogOffset"]}
    phrases = [
        f"file {file_name(MIDDLE)} has {cut} bytes, not {FILE_SIZE}: cut short at offset {lo + cut}",
        f"the bytes at offset {victim['commitLogOffset']} (file {file_name(MIDDLE)}, byte {cut - 10}) are "
        "not a whole record: TOTALSIZE",
    ]
    return Damage(root, victim["commitLogOffset"], hi, phrases, lost)


def corrupt_middle_record(root: Path, messages: list[dict]) -> Damage:
    victim = messages[2000]
    offset = victim["commitLogOffset"]
    path = root / "commitlog" / file_name(offset // FILE_SIZE)
    assert victim["bodyLen"] > 0
    with open(path, "r+b") as fh:  # one body byte inverted: BODYCRC no longer matches
        fh.seek(offset % FILE_SIZE + 36)  # SYSFLAG: says whether the hosts are IPv6 (20 bytes each)
        sys_flag = int.from_bytes(fh.read(4), "big")
        hosts = (12 if sys_flag & BORNHOST_V6_FLAG else 0) + (12 if sys_flag & STOREHOST_V6_FLAG else 0)
        at = offset % FILE_SIZE + 88 + hosts  # TOTALSIZE..BODYLEN take 88 bytes with IPv4 hosts
        fh.seek(at)
        byte = fh.read(1)
        fh.seek(at)
        fh.write(bytes([byte[0] ^ 0xFF]))
    phrases = [
        f"the bytes at offset {offset} (file {path.name}, byte {offset % FILE_SIZE}) are not a whole "
        "record: BODYCRC does not match the body"
    ]
    return Damage(root, offset, offset + victim["size"], phrases, {offset})


DAMAGES = {
    "missing-file": remove_middle_file,
    "truncated-file": truncate_middle_file,
    "corrupt-record": corrupt_middle_record,
}


@pytest.fixture(scope="module")
def expected(stores_dir: Path) -> dict:
    return json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))


def index_bytes(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "index").iterdir())}


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("."))


def check_answers_around(config: StoreConfig, expected: dict, lost: set[int]) -> tuple[int, int]:
    """Every Java query answers Java's records minus the lost ones; returns (records found, after gap).

    Queries over every store time are compared record for record. A time-bounded query is matched
    per index file against its begin timestamp in whole seconds (the broker's timeDiff), and the
    files' boundaries move when entries are missing, so those only must return whole, non-lost records.
    """
    found = after = 0
    gap_end = max(lost)
    by_sha = {r["rawSha256"] for q in expected["queries"] for r in q.get("results", [])}
    with MessageStore.open(config) as store:
        for q in expected["queries"]:
            if "exception" in q:
                continue
            got = store.query_message(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
            offsets = [int.from_bytes(b[28:36], "big") for b in got.buffers]
            shas = [hashlib.sha256(b).hexdigest() for b in got.buffers]
            assert not lost & set(offsets), q["label"]
            if q["begin"] != 0 or q["end"] != 2**63 - 1:
                assert set(shas) <= by_sha, q["label"]
                continue
            want = [r for r in q["results"] if r["commitLogOffset"] not in lost]
            if len(q["results"]) < q["maxNum"]:
                assert shas == [r["rawSha256"] for r in want], q["label"]
            else:  # Java's answer was cut at maxNum: older matches now fill the places of lost ones
                assert {r["rawSha256"] for r in want} <= set(shas) and len(shas) <= q["maxNum"], q["label"]
            found += len(want)
            after += sum(1 for r in want if r["commitLogOffset"] > gap_end)
    return found, after


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_gap_is_refused_and_the_old_index_kept(
    damage: str,
    stores_dir: Path,
    tmp_path: Path,
    expected: dict,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    root = tmp_path / "store"
    config = copy_store(stores_dir, root)
    d = DAMAGES[damage](root, expected["messages"])
    java_index = index_bytes(root)
    checkpoint = config.checkpoint_path.read_bytes()
    capsys.readouterr()

    assert main(["rebuild-index", "--store", str(root)]) == 1

    err = capsys.readouterr().err
    assert f"CommitLog gap: whole records stop at offset {d.start} and resume at offset {d.resume}" in err
    for phrase in d.phrases:
        assert phrase in err
    assert "--index-around-gaps" in err
    assert f"nothing was replaced; {config.index_dir} is unchanged" in err
    assert not [r for r in caplog.records if "still answer" in r.getMessage()]  # false at a gap
    assert index_bytes(root) == java_index
    assert config.checkpoint_path.read_bytes() == checkpoint
    assert leftovers(root) == []


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_index_around_gaps_answers_the_records_before_and_after_it(
    damage: str, stores_dir: Path, tmp_path: Path, expected: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    config = copy_store(stores_dir, root)
    d = DAMAGES[damage](root, expected["messages"])
    capsys.readouterr()

    assert main(["rebuild-index", "--store", str(root), "--index-around-gaps"]) == 0

    err = capsys.readouterr().err
    assert f"warning: indexed around it: CommitLog gap: whole records stop at offset {d.start}" in err
    assert leftovers(root) == []
    _found, after = check_answers_around(config, expected, d.lost)
    assert after > 1000, "the records after the gap answer"
