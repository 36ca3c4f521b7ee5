"""Consistency checks of a store directory: what ``rmq-query fsck`` reports.

* CommitLog: file names are contiguous multiples of the file size, every record checks (lengths
  and BODYCRC, as the broker's recovery does) from the first file to the written end, and the walk
  does not stop before the last file (a record that fails mid-log is corruption, not a tail);
* IndexFiles: geometry, ascending names, headers consistent with their entries, and (``deep``)
  every entry pointing at the start of a record that carries a key with the entry's hash;
* the index is not behind the CommitLog (records after the last indexed one that have keys).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from protocol.message import read_index_fields
from store import record
from store.commitlog import CommitLog
from store.config import StoreConfig
from store.errors import StoreError
from store.index_builder import KeyHasher, index_keys
from store.index_service import IndexService


@dataclass(slots=True)
class FsckReport:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    records: int = 0
    entries: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def check_store(config: StoreConfig, *, deep: bool = False) -> FsckReport:
    report = FsckReport()
    commitlog = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    try:
        _check_commitlog(commitlog, config, report)
        try:
            index = IndexService(config)
        except StoreError as exc:
            report.problems.append(str(exc))
            return report
        try:
            _check_index(index, commitlog, report, deep=deep)
        finally:
            index.close()
    finally:
        commitlog.close()
    return report


def _check_commitlog(commitlog: CommitLog, config: StoreConfig, report: FsckReport) -> None:
    files = commitlog.files
    size = config.mapped_file_size_commit_log
    for prev, cur in itertools.pairwise(files):
        if cur.start != prev.start + size:
            report.problems.append(f"CommitLog gap: {prev.path.name} is followed by {cur.path.name}")
    for f in files:
        if f.start % size:
            report.problems.append(f"CommitLog file {f.path.name} does not start at a multiple of {size}")
        if f.length != size:
            report.problems.append(f"CommitLog file {f.path.name} has {f.length} bytes, expected {size}")
    last_end = files[0].start if files else 0
    for offset, buf in commitlog.iter_records():
        report.records += 1
        last_end = offset + len(buf)
    if files and last_end < files[-1].start:
        report.problems.append(
            f"CommitLog records stop at offset {last_end}, before the last file {files[-1].path.name}:"
            " a corrupt or torn record mid-log"
        )
    report.notes.append(
        f"CommitLog: {len(files)} files, {report.records} records, offsets {commitlog.min_offset}"
        f"..{commitlog.max_offset}"
    )


def _check_index(index: IndexService, commitlog: CommitLog, report: FsckReport, *, deep: bool) -> None:
    files = index.files
    hasher = KeyHasher()
    for f in files:
        h = f.header
        count = max(h.index_count, 1)
        if count > f.index_num:
            report.problems.append(
                f"index file {f.name}: indexCount {h.index_count} > maxIndexNum {f.index_num}"
            )
            continue
        report.entries += count - 1
        if count > 1:
            last = f.entry(count - 1)
            if last[1] != h.end_phy_offset:
                report.problems.append(
                    f"index file {f.name}: endPhyOffset {h.end_phy_offset} but last entry points at {last[1]}"
                )
        if not deep:
            continue
        for n in range(1, count):
            key_hash, phy, _diff, prev = f.entry(n)
            if not 0 <= prev < n:
                report.problems.append(f"index file {f.name}: entry {n} links forward to {prev}")
            buf = commitlog.read_record(phy)
            if buf is None or record.check(buf, 0, len(buf)) <= 0:
                if phy >= commitlog.min_offset:
                    report.problems.append(f"index file {f.name}: entry {n} points at {phy}, not a record")
                continue
            fields = read_index_fields(buf, 0)
            if key_hash not in {hasher(fields.topic, k) for k in index_keys(fields)}:
                report.problems.append(f"index file {f.name}: entry {n} hash matches no key of record {phy}")
    report.notes.append(f"index: {len(files)} files, {report.entries} entries")
    behind = 0
    last_indexed = files[-1].header.end_phy_offset if files else -1
    for offset, buf in commitlog.iter_records(max(last_indexed, 0)):
        if offset <= last_indexed:
            continue
        if index_keys(read_index_fields(buf, 0)):
            behind += 1
    if behind:
        report.problems.append(f"index is behind the CommitLog: {behind} records with keys are not indexed")
