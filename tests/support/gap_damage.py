"""Damaged copies of the Java store for the gap tests of both rebuild engines, and their checks.

Each damage says, from ``java-4.9.7-a.expected.json`` (what the Java broker stored), where whole
records stop and resume, the phrases a refusal must contain and the records it destroys.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from protocol.message_flags import BORNHOST_V6_FLAG, STOREHOST_V6_FLAG
from store.commitlog.gaps import Gap
from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from store.spark.ranges import CommitLogRange, list_files, plan_file
from store.spark.rebuild import DecodedRuns, decode_plan, find_gaps
from tests.support.paths import REPO_ROOT

STORE = "java-4.9.7-a"
FILE_SIZE = 262144
MIDDLE = 8  # the 9th of 17 CommitLog files
#: The broker's cap on one query's answer (IndexService, maxMsgsNumBatch), whatever maxNum says.
MAX_MSGS_NUM_BATCH = 64


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


def remove_middle_file(root: Path, messages: list[dict], n: int = MIDDLE) -> Damage:
    lo, hi = n * FILE_SIZE, (n + 1) * FILE_SIZE
    (root / "commitlog" / file_name(n)).unlink()
    before = [m for m in messages if m["commitLogOffset"] < lo]
    stop = before[-1]["commitLogOffset"] + before[-1]["size"]  # then the end-of-file blank marker
    lost = {m["commitLogOffset"] for m in messages if lo <= m["commitLogOffset"] < hi}
    phrases = [f"file {file_name(n)} (offsets {lo}..{hi}) is missing"]
    return Damage(root, stop, hi, phrases, lost)


def truncate_middle_file(root: Path, messages: list[dict], n: int = MIDDLE) -> Damage:
    lo, hi = n * FILE_SIZE, (n + 1) * FILE_SIZE
    inside = [m for m in messages if lo <= m["commitLogOffset"] < hi]
    victim = inside[len(inside) // 2]
    cut = victim["commitLogOffset"] + 10 - lo  # mid-record
    os.truncate(root / "commitlog" / file_name(n), cut)
    lost = {m["commitLogOffset"] for m in inside if m["commitLogOffset"] >= victim["commitLogOffset"]}
    phrases = [
        f"file {file_name(n)} has {cut} bytes, not {FILE_SIZE}: cut short at offset {lo + cut}",
        f"the bytes at offset {victim['commitLogOffset']} (file {file_name(n)}, byte {cut - 10}) are "
        "not a whole record: TOTALSIZE",
    ]
    return Damage(root, victim["commitLogOffset"], hi, phrases, lost)


def corrupt_middle_record(root: Path, messages: list[dict], i: int = 2000) -> Damage:
    victim = messages[i]
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
            if len(q["results"]) < min(q["maxNum"], MAX_MSGS_NUM_BATCH):
                assert shas == [r["rawSha256"] for r in want], q["label"]
            else:  # Java's answer was cut at maxNum (or 64): older matches take the places of lost ones
                assert {r["rawSha256"] for r in want} <= set(shas) and len(shas) <= q["maxNum"], q["label"]
            found += len(want)
            after += sum(1 for r in want if r["commitLogOffset"] > gap_end)
    return found, after


#: A consume queue entry's bytes, and the broker's blank entry (``ConsumeQueue.fillPreBlank``).
ENTRY = 20
BLANK = (0, 2**31 - 1, 0)


def tree_bytes(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
    }


def queue_entries(cq_dir: Path) -> dict[str, list[tuple[int, int, int]]]:
    """Every queue's entries by queue offset, up to its last non-zero entry (files read in order)."""
    queues: dict[str, list[tuple[int, int, int]]] = {}
    for queue in sorted(p for p in cq_dir.glob("*/*") if p.is_dir()):
        data = b"".join(f.read_bytes() for f in sorted(queue.iterdir()))
        first = int(min(f.name for f in queue.iterdir())) // ENTRY
        entries = [
            (
                int.from_bytes(data[i : i + 8], "big", signed=True),
                int.from_bytes(data[i + 8 : i + 12], "big", signed=True),
                int.from_bytes(data[i + 12 : i + 20], "big", signed=True),
            )
            for i in range(0, len(data), ENTRY)
        ]
        while entries and entries[-1] == (0, 0, 0):
            entries.pop()
        queues[str(queue.relative_to(cq_dir))] = [BLANK] * first + entries
    return queues


def check_queues_around(java: dict[str, list[tuple[int, int, int]]], built: Path, *damages: Damage) -> int:
    """Java's entries at the same queue offsets, blanks where a damage destroyed the record; returns
    how many entries after the last gap were rebuilt."""
    ours = queue_entries(built)
    assert set(ours) == set(java)
    after = 0
    for name, want in java.items():
        got = ours[name]
        lost = [any(d.start <= e[0] < d.resume for d in damages) for e in want]
        # A queue whose last entries were destroyed ends at its last surviving one.
        keep = max((i + 1 for i, gone in enumerate(lost) if not gone), default=0)
        assert len(got) == keep, name
        for i in range(keep):
            if lost[i]:
                assert got[i] == BLANK, (name, i)
            else:
                assert got[i] == want[i], (name, i)
                after += want[i][0] >= damages[-1].resume
    return after


#: Run as root, the command is stripped of the capabilities that bypass file modes, so a read-only
#: directory is read-only for it too (as for any operator who is not root).
NO_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``rmq-query ARGS`` in a subprocess, with file modes enforced even when run as root."""
    return run_cli_python("-m", "clients.cli", *args)


def run_cli_python(*args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` from the repository root, with file modes enforced even when run as root."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.fail("running as root needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
        prefix = NO_OVERRIDE
    return subprocess.run(
        [*prefix, sys.executable, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def spark_gaps_in_process(
    config: StoreConfig, decode: Callable[[CommitLogRange], DecodedRuns]
) -> tuple[list[Gap], list[str]]:
    """A Spark rebuild's plan, ``decode`` and gap stages run in this process (they are plain Python),
    with small ranges so that damage falls inside, between and across them."""
    plans = [plan_file(f, 1 << 16) for f in list_files(config.store_path_commit_log)]
    ranges = decode_plan(plans)
    return find_gaps([decode(r) for r in ranges], ranges, plans, config.mapped_file_size_commit_log)
