"""Consistency checks of a store directory: what ``rmq-query fsck`` reports.

Every problem names the file, the position and what is wrong, so it can be acted on:

* markers: an ``abort`` file left by an unclean shutdown (with a broker running now, holding the
  store's ``lock``, it is a note: a running broker keeps it), a missing or short
  checkpoint, a checkpoint ``indexMsgTimestamp`` older than the newest full index file;
* CommitLog: file names are contiguous multiples of the file size, no file is short (truncated),
  every record checks (lengths and BODYCRC, as the broker's recovery does) from the first file to
  the written end, the walk does not stop before the last file, and nothing but zeros follows the
  last whole record (a corrupt record mid-file would hide everything after it);
* IndexFiles: size against the configured geometry, a header no writer can leave, the slots and
  chains agreeing with each other (``store.check.index_files``) and (``deep``) every entry pointing at the
  start of a record that carries a key with the entry's hash;
* the index is not behind the CommitLog (records after the last indexed one that have keys; with a
  running broker, records stored in the last ``LIVE_INDEX_LAG_MS`` are only noted: its reput thread
  indexes them within milliseconds).
* ConsumeQueues: every entry against its record, none missing or unclaimed (``consume_queue_check``;
  with a running broker, entries of records of the last ``LIVE_INDEX_LAG_MS`` may still be on their way).

CommitLog gaps (``store.commitlog.gaps``: whole records stop and resume later) are walked across, so what
follows a gap is checked too. A gap is a problem, unless the store was deliberately rebuilt around it
(``rebuild-index --index-around-gaps``): the consume queues hold entries for records after it and
none pointing into it, and the index (when the store keeps one) reaches past it. Such a gap is a
*known gap*: listed on its own line (the records in it are still lost), with the file and record
problems it explains, and the report stays OK, so a new problem stands out.
"""

from __future__ import annotations

import bisect
import itertools
import os
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from protocol.errors import ProtocolError
from protocol.message import read_index_fields
from protocol.record_layout import SIZE_MAGIC_WIDTH
from store.check import index_scan
from store.check.consume_queues import ConsumeQueueCheck
from store.check.index_files import Findings, scan_index_file
from store.check.index_scan import matching_keys
from store.checkpoint import Checkpoint, abnormal_exit
from store.commitlog import record
from store.commitlog.gaps import Gap
from store.commitlog.mapped_files import CommitLog, MappedFile
from store.config.store_config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, StoreConfig
from store.errors import CheckpointError, StoreError
from store.index.builder import KeyHasher, index_keys
from store.index.index_file import ENTRY, IndexFile, header_problem
from store.index.index_range import index_range
from store.platform.broker_lock import broker_lock_holder
from store.reput.dispatcher import Dispatcher, Run, record_size
from store.reput.walk import Reput

_ZEROS = bytes(1 << 20)
#: A walk hands the CommitLog pages behind it back to the kernel every this many bytes: they stay
#: in the page cache, but not in fsck's resident memory (it read every page of the store).
RELEASE_BYTES = 64 << 20
#: With a running broker, keyed records stored this recently and not yet indexed are not a problem.
LIVE_INDEX_LAG_MS = 10_000


@dataclass(slots=True)
class FsckReport:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Gaps the index and consume queues were built around (``--index-around-gaps``): data lost, known.
    known_gaps: list[str] = field(default_factory=list)
    records: int = 0
    entries: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def check_store(
    config: StoreConfig, *, deep: bool = False, progress: Callable[[int, int], None] | None = None
) -> FsckReport:
    """Check the store; ``progress(done, total)`` is told the CommitLog bytes walked so far (the walk
    is most of the time: the consume queues ride it; the index check follows)."""
    report = FsckReport()
    live = broker_lock_holder(config.store_path_root_dir)
    index_files = _open_index_files(config, report)
    try:
        _check_markers(config, index_files, report, live)
        started_ms = int(time.time() * 1000)
        commitlog = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
        recent_ms = started_ms - LIVE_INDEX_LAG_MS if live is not None else None
        queue_check = None
        try:
            # The consume queue check rides the CommitLog check's walk: the CommitLog is read once.
            queue_check = ConsumeQueueCheck(config, commitlog, recent_ms=recent_ms)
            gaps = _check_commitlog(commitlog, config, report, queue_check.dispatcher, progress)
            _check_index(index_files, commitlog, report, deep=deep, recent_ms=recent_ms)
            queues = queue_check.finish([g for g, _lines in gaps])
            report.problems += queues.problems
            report.notes += queues.notes
            _classify_gaps(config, index_files, queues.built_around, gaps, report)
        finally:
            if queue_check is not None:
                queue_check.close()
            commitlog.close()
    finally:
        for f in index_files:
            f.close()
    return report


def _open_index_files(config: StoreConfig, report: FsckReport) -> list[IndexFile]:
    """Every IndexFile that has the configured size; the others are problems."""
    try:
        names = sorted(n for n in os.listdir(config.index_dir) if n.isdigit())
    except FileNotFoundError:
        report.notes.append(f"no index directory at {config.index_dir}")
        return []
    files = []
    for name in names:
        try:
            files.append(
                IndexFile.open(config.index_dir / name, config.max_hash_slot_num, config.max_index_num)
            )
        except StoreError as exc:
            report.problems.append(str(exc))
    return files


def _check_markers(
    config: StoreConfig, index_files: list[IndexFile], report: FsckReport, live: int | None
) -> None:
    if live is not None:
        report.notes.append(
            f"a broker (pid {live}) is running on this store (it holds {config.store_path_root_dir / 'lock'})"
            + (
                f": {config.abort_path} is its running marker"
                if abnormal_exit(config.store_path_root_dir)
                else ""
            )
        )
    elif abnormal_exit(config.store_path_root_dir):
        report.problems.append(
            f"{config.abort_path} exists: the broker did not shut down cleanly (or is running now); a "
            "broker restarting on it deletes the index files newer than the checkpoint's "
            "indexMsgTimestamp (rmq-query rebuild-index --follow repairs them instead)"
        )
    try:
        checkpoint = Checkpoint.read(config.checkpoint_path)
    except CheckpointError as exc:
        report.problems.append(f"checkpoint: {exc}")
        return
    full = [f for f in index_files if f.is_write_full()]
    if full and checkpoint.index_msg_timestamp < full[-1].header.end_timestamp:
        report.problems.append(
            f"checkpoint {config.checkpoint_path}: indexMsgTimestamp {checkpoint.index_msg_timestamp} "
            f"(byte 16) is older than the end {full[-1].header.end_timestamp} of the full index file "
            f"{full[-1].name}: a broker restarting after a crash would delete that file"
        )


def _check_commitlog(
    commitlog: CommitLog,
    config: StoreConfig,
    report: FsckReport,
    also: Dispatcher | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[Gap, list[str]]]:
    """Check the CommitLog; returns its gaps, each with the file and record problems it explains
    (reported by ``_classify_gaps``, as problems or under a known gap). ``also`` is fed every run of
    the walk (the consume queue check's dispatcher)."""
    files = commitlog.files
    size = config.mapped_file_size_commit_log
    counter = _RecordCounter(commitlog, files[0].start if files else 0)
    # The reput's walk: whole records checked in one compiled call per run, across gaps as
    # ``GapWalk`` crosses them (the gaps are reported below).
    first, total = commitlog.min_offset, commitlog.max_offset - commitlog.min_offset
    walked = (lambda pos: progress(pos - first, total)) if progress is not None else None
    dispatchers: list[Dispatcher] = [counter] if also is None else [counter, also]
    reput = Reput(commitlog, dispatchers, on_gap=_note_gap, progress=walked)
    reput.run_once()
    commitlog.release(counter.released, commitlog.max_offset)
    report.records += counter.records
    last_end = counter.end
    gaps = reput.gaps
    explained: dict[int, list[str]] = {i: [] for i in range(len(gaps))}

    def within(start: int, end: int) -> int | None:
        """The gap that ``[start, end)`` lies in, if any."""
        return next((i for i, g in enumerate(gaps) if g.start <= start and end <= g.resume), None)

    # File-level problems inside a gap (a missing or short file) are the gap's: reported with it.
    for line, span in _file_spans(files, size):
        i = within(*span) if span is not None else None
        (report.problems if i is None else explained[i]).append(line)
    for bad, resume in sorted(commitlog.corrupt.items()):
        line = (
            f"CommitLog record at offset {bad}{_locate(files, bad)} is corrupt (it fails the broker's "
            f"recovery check: lengths or BODYCRC); whole records resume at offset {resume}"
        )
        i = within(bad, resume)
        (report.problems if i is None else explained[i]).append(line)
    for start, reason in sorted(commitlog.unreadable.items()):
        report.problems.append(f"CommitLog file {start:020d} cannot be read: {reason}")
    # Files after the last one holding data are pre-created by a running broker: all zeros.
    data = len(files)
    while data > 1 and files[data - 1].error is None and not _holds_data(files[data - 1]):
        data -= 1
    for f in files[data:]:
        stray = _first_nonzero_after(f, f.start)
        if stray is None:
            report.notes.append(
                f"CommitLog file {f.path.name} is pre-created (zeros): the next file to write"
            )
        else:
            report.problems.append(
                f"CommitLog file {f.path.name} begins with zeros but has non-zero bytes at offset {stray}: "
                "damaged (a file the broker pre-created holds zeros only)"
            )
    last_data = files[data - 1] if files else None
    if last_data is not None and last_end < last_data.start:
        where = _locate(files, last_end)
        report.problems.append(
            f"CommitLog records stop at offset {last_end}{where}, before the last file holding data "
            f"{last_data.path.name}: a corrupt or torn record mid-log hides every record after it"
        )
    elif last_data is not None:
        stray = _first_nonzero_after(last_data, last_end)
        if stray is not None:
            report.problems.append(
                f"CommitLog file {last_data.path.name}: non-zero bytes at offset {stray} after the last "
                f"whole record (which ends at {last_end}): a corrupt record mid-file or a torn tail"
            )
    report.notes.append(
        f"CommitLog: {len(files)} files, {report.records} records, offsets {commitlog.min_offset}"
        f"..{commitlog.max_offset}"
    )
    return [(g, explained[i]) for i, g in enumerate(gaps)]


def _file_spans(files: list[MappedFile], size: int) -> list[tuple[str, tuple[int, int] | None]]:
    """Problems of the file list (names off the grid, holes, wrong sizes), each with the CommitLog
    span it loses (None when it loses none)."""
    out: list[tuple[str, tuple[int, int] | None]] = []
    for prev, cur in itertools.pairwise(files):
        if cur.start != prev.start + size:
            out.append(
                (
                    f"CommitLog gap: {prev.path.name} is followed by {cur.path.name}",
                    (prev.start + size, cur.start),
                )
            )
    for f in files:
        if f.start % size:
            out.append((f"CommitLog file {f.path.name} does not start at a multiple of {size}", None))
        if f.length < size:
            out.append(
                (
                    f"CommitLog file {f.path.name} has {f.length} bytes, expected {size}: truncated (the "
                    "records after the cut are lost)",
                    (f.start + f.length, f.start + size),
                )
            )
        elif f.length != size:
            out.append((f"CommitLog file {f.path.name} has {f.length} bytes, expected {size}", None))
    return out


class _RecordCounter:
    """The check's dispatcher of the reput's walk (``store.reput.walk.Reput``): counts the whole
    records and where the last one ends. A ``Scanner``, so each stretch is checked by one compiled
    ``record.whole_run`` call here (the reput's own check), not record by record."""

    def __init__(self, commitlog: CommitLog, start: int) -> None:
        self.commitlog = commitlog
        self.records = 0
        #: Just past the last whole record.
        self.end = start
        self.released = commitlog.min_offset

    def begin(self) -> bool:
        return True

    def resume_offset(self) -> int:
        return self.commitlog.min_offset

    def flush(self) -> None:
        """Nothing is written."""

    def scan(self, run: Run, max_records: int) -> tuple[int, int]:
        """``record.whole_run`` over at most ``RELEASE_BYTES`` of ``run`` (the reput walks the
        record after it itself and goes on): the pages before the stretch, which every dispatcher
        has read, are released first."""
        self._release(run.base + run.pos)
        soft = min(run.end, run.pos + RELEASE_BYTES)
        stop, n = record.whole_run(run.view, run.pos, run.end, run.base, soft, max_records)
        if n:
            self._took(n, run.base + stop)
        return stop, n

    def dispatch(self, run: Run) -> None:
        """A run the reput's walk found itself (one record after a blank, a gap or corruption)."""
        self._release(run.base + run.pos)
        pos, n = run.pos, 0
        while pos < run.end:
            pos += record_size(run.view, pos)
            n += 1
        self._took(n, run.base + pos)

    def _took(self, n: int, end: int) -> None:
        self.records += n
        self.end = end

    def _release(self, offset: int) -> None:
        if offset - self.released >= RELEASE_BYTES:
            # The pages behind the walk are done with: out of fsck's resident memory.
            self.commitlog.release(self.released, offset)
            self.released = offset


def _note_gap(_gap: Gap) -> None:
    """fsck reads on after a gap; ``_classify_gaps`` reports it."""


def _classify_gaps(
    config: StoreConfig,
    index_files: list[IndexFile],
    built_around: list[Gap],
    gaps: list[tuple[Gap, list[str]]],
    report: FsckReport,
) -> None:
    """Report each gap: a known gap when the consume queues (and the index, if the store keeps one)
    were built around it, else a problem, followed by the file and record problems it explains."""
    around = {(g.start, g.resume) for g in built_around}
    index_end = index_files[-1].header.end_phy_offset if index_files else -1
    problems: list[str] = []
    for gap, lines in gaps:
        index_past = not config.message_index_enable or index_end >= gap.resume
        if (gap.start, gap.resume) in around and index_past:
            report.known_gaps.append(
                f"{gap.describe()}: the records in it are lost; the index and consume queues were built "
                "around it (rebuild-index --index-around-gaps: the lost records' queue offsets are blank "
                "entries)" + "".join(f"; {line}" for line in lines)
            )
        else:
            # A gap that is one corrupt record is said in full by that record's line.
            if not any(line.startswith(f"CommitLog record at offset {gap.start} ") for line in lines):
                problems.append(
                    f"{gap.describe()}: the records in it are lost, and the index or consume queues were "
                    "not built around it (restore the data, or rebuild-index --index-around-gaps)"
                )
            problems += lines
    report.problems[:0] = problems


def _holds_data(f: MappedFile) -> bool:
    """The file's first TOTALSIZE and MAGICCODE are written (a record or a blank): not merely pre-created."""
    return f.safe_length() >= SIZE_MAGIC_WIDTH and f.view()[:SIZE_MAGIC_WIDTH] != bytes(SIZE_MAGIC_WIDTH)


def _locate(files: list[MappedFile], offset: int) -> str:
    for f in files:
        if f.start <= offset < f.end:
            return f" (file {f.path.name}, byte {offset - f.start})"
    return ""


def _first_nonzero_after(f: MappedFile, offset: int) -> int | None:
    """The absolute offset of the first non-zero byte of ``f`` from ``offset``, if any."""
    view = f.view()
    length = f.safe_length()
    pos = max(offset - f.start, 0)
    # A blank end-of-file marker right after the last record is how a full file ends.
    if pos + SIZE_MAGIC_WIDTH <= length and record.check(view, pos, length) == record.BLANK:
        return None
    while pos < length:
        chunk = view[pos : min(pos + len(_ZEROS), length)]
        if chunk != _ZEROS[: len(chunk)]:
            return f.start + pos + next(i for i, b in enumerate(chunk) if b)
        pos += len(chunk)
    return None


def _check_index(
    files: list[IndexFile],
    commitlog: CommitLog,
    report: FsckReport,
    *,
    deep: bool,
    recent_ms: int | None = None,
) -> None:
    hasher = KeyHasher()
    for i, f in enumerate(files):
        h = f.header
        problem = header_problem(h, f.hash_slot_num, f.index_num, last=i == len(files) - 1)
        if problem is not None:
            report.problems.append(f"index file {f.name}: header (bytes 0..39): {problem}")
        report.problems.extend(scan_index_file(f))
        count = min(max(h.index_count, 1), f.index_num)
        report.entries += count - 1
        if count > 1:
            last = f.entry(count - 1)
            if last[1] != h.end_phy_offset:
                report.problems.append(
                    f"index file {f.name}: endPhyOffset {h.end_phy_offset} (byte 24) but the last entry "
                    f"points at {last[1]}"
                )
        if deep:
            _check_entries_against_records(f, count, commitlog, hasher, report)
        f.release()  # the scan touched every page of the file (420 MB at the default geometry)
    report.notes.append(f"index: {len(files)} files, {report.entries} entries")
    if files and files[-1].header.end_phy_offset >= commitlog.max_offset > 0:
        report.problems.append(
            f"index file {files[-1].name}: endPhyOffset {files[-1].header.end_phy_offset} (byte 24) is at "
            f"or past the CommitLog's end {commitlog.max_offset}: the CommitLog lost records the index "
            "points at"
        )
    behind = recent = 0
    last_indexed = files[-1].header.end_phy_offset if files else -1
    for offset, buf in releasing(
        commitlog, commitlog.iter_records(max(last_indexed, 0), commitlog.max_offset)
    ):
        if offset <= last_indexed:
            continue
        try:
            fields = read_index_fields(buf, 0)
        except ProtocolError:
            continue
        if index_keys(fields):
            if recent_ms is not None and fields.store_timestamp >= recent_ms:
                recent += 1
            else:
                behind += 1
    if behind:
        report.problems.append(f"index is behind the CommitLog: {behind} records with keys are not indexed")
    if recent:
        report.notes.append(f"{recent} records with keys stored in the last seconds are not indexed yet")


def _check_entries_against_records(
    f: IndexFile, count: int, commitlog: CommitLog, hasher: KeyHasher, report: FsckReport
) -> None:
    """Every entry of ``f`` against the record it points at, a chunk of entries at a time.

    Entries come in CommitLog order and a record's keys are consecutive entries, so a healthy chunk
    is exactly what the index builder's compiled ``index_range`` makes of the records it spans: one
    call packs their (key hash, offset) pairs and ``matching_keys`` compares them with the chunk's.
    A chunk that differs anywhere is checked entry by entry (``_EntryCheck``, the reference rule:
    each record read and its keys hashed once for the run of entries pointing at it), so the lines
    said are the same either way."""
    found = Findings()
    released = commitlog.min_offset
    entries_at = INDEX_HEADER_SIZE + f.hash_slot_num * INDEX_SLOT_SIZE
    data = f.buffer
    one_by_one = _EntryCheck(commitlog, hasher, found)
    base = 1
    while base < count:
        stop = min(base + index_scan.CHUNK, count)
        chunk = data[entries_at + base * INDEX_ENTRY_SIZE : entries_at + stop * INDEX_ENTRY_SIZE]
        n = stop - base

        def phy(i: int, chunk: bytes = chunk) -> int:
            return _PHY.unpack_from(chunk, i * INDEX_ENTRY_SIZE + 4)[0]

        # At most RELEASE_BYTES of CommitLog a chunk (the pages behind are released between chunks).
        within = bisect.bisect_left(range(n), phy(0) + RELEASE_BYTES, key=phy)
        if 0 < within < n:
            n = within + 1
            chunk = chunk[: n * INDEX_ENTRY_SIZE]
        if base + n < count:
            # End the chunk at a record's first key (the next chunk starts there), unless it is one
            # record's keys throughout.
            last = _PHY.unpack_from(chunk, (n - 1) * INDEX_ENTRY_SIZE + 4)[0]
            k = n - 1
            while k > 0 and _PHY.unpack_from(chunk, (k - 1) * INDEX_ENTRY_SIZE + 4)[0] == last:
                k -= 1
            if k > 0:
                n = k
                chunk = chunk[: n * INDEX_ENTRY_SIZE]
        first_phy = _PHY.unpack_from(chunk, 4)[0]
        last_phy = _PHY.unpack_from(chunk, (n - 1) * INDEX_ENTRY_SIZE + 4)[0]
        if _records_keys_match(commitlog, chunk, first_phy, last_phy):
            one_by_one.last_phy = -1
        else:
            one_by_one.entries(base, chunk)
        if last_phy - released >= RELEASE_BYTES:  # in CommitLog order: the pages behind are done
            commitlog.release(released, last_phy)
            released = last_phy
        base += n
    commitlog.release(released, commitlog.max_offset)
    report.problems.extend(found.lines(f.name))


_PHY = struct.Struct(">q")


def _records_keys_match(commitlog: CommitLog, chunk: bytes, first_phy: int, last_phy: int) -> bool:
    """The entries ``chunk`` name exactly the keys of the records from ``first_phy`` to the one at
    ``last_phy``, in order (what the index builder puts for them: ``index_range``)."""
    if first_phy < commitlog.min_offset or last_phy < first_phy:
        return False
    packed = bytearray()
    topics: set[str] = set()
    for mf in commitlog.files:
        if mf.end <= first_phy or mf.start > last_phy or mf.mm is None:
            continue
        safe = mf.safe_length()
        pos = max(first_phy - mf.start, 0)
        end = safe
        if last_phy < mf.end:
            at = last_phy - mf.start
            if at + 4 > safe:
                return False
            with mf.view() as view:
                size = _SIZE.unpack_from(view, at)[0]
            if size <= 0 or at + size > safe:
                return False
            end = at + size
        if pos >= end:
            return False
        with mf.view() as view:
            index_range(view, pos, end, mf.start, packed, topics, 0, _NO_LIMIT, mf.safe_length, True)
    n, units = len(chunk) // INDEX_ENTRY_SIZE, len(packed) // INDEX_ENTRY_SIZE
    if units < n:
        return False
    # An IndexFile may begin or end inside one record's keys (the previous file filled up between
    # them): the chunk is then a run of packed's units that starts inside the first record's keys.
    lead = _run_length(packed, units, first_phy) - _run_length(chunk, n, first_phy)
    for skip in {max(lead, 0), 0}:
        if skip + n <= units:
            unit = packed[skip * INDEX_ENTRY_SIZE : (skip + n) * INDEX_ENTRY_SIZE]
            if matching_keys(chunk, unit) == n:
                return True
    return False


def _run_length(entries: bytes | bytearray, n: int, phy: int) -> int:
    """How many of the first of ``n`` 20-byte units (offset at byte 4) point at ``phy``."""
    k = 0
    while k < n and _PHY.unpack_from(entries, k * INDEX_ENTRY_SIZE + 4)[0] == phy:
        k += 1
    return k


_SIZE = struct.Struct(">i")
_NO_LIMIT = 1 << 62


class _EntryCheck:
    """The reference rule for entries checked one at a time: each record read and its keys hashed
    once for the run of entries pointing at it (``last_phy``, carried from chunk to chunk)."""

    def __init__(self, commitlog: CommitLog, hasher: KeyHasher, found: Findings) -> None:
        self.commitlog = commitlog
        self.hasher = hasher
        self.found = found
        self.last_phy = -1
        self.hashes: frozenset[int] | None = None  # the keys' hashes of the record at last_phy
        self.problem = ""  # or why last_phy is not a record to check against

    def entries(self, base: int, chunk: bytes) -> None:
        """Entries ``base`` .. of ``chunk``."""
        commitlog, found = self.commitlog, self.found
        for k, (key_hash, phy, _diff, _prev) in enumerate(ENTRY.iter_unpack(chunk)):
            n = base + k
            if phy != self.last_phy:
                self.last_phy = phy
                self.hashes, self.problem = _record_key_hashes(commitlog, phy, self.hasher)
            hashes = self.hashes
            if hashes is None:
                if self.problem == _NOT_A_RECORD:
                    if phy >= commitlog.min_offset:
                        found.add("record", f"entry {n} points at {phy}, not a record")
                else:
                    found.add("record", f"entry {n} points at {phy}, an undecodable record")
                continue
            if key_hash not in hashes:
                found.add("key", f"entry {n} hash matches no key of record {phy}")


_NOT_A_RECORD = "not a record"
_UNDECODABLE = "undecodable"


def _record_key_hashes(
    commitlog: CommitLog, phy: int, hasher: KeyHasher
) -> tuple[frozenset[int] | None, str]:
    """The index hashes of the keys of the record at ``phy``, or None and why there is none."""
    buf = commitlog.read_record(phy)
    if buf is None or record.check(buf, 0, len(buf)) <= 0:
        return None, _NOT_A_RECORD
    try:
        fields = read_index_fields(buf, 0)
    except ProtocolError:
        return None, _UNDECODABLE
    return frozenset(hasher(fields.topic, k) for k in index_keys(fields)), ""


def releasing(
    commitlog: CommitLog, records: Iterator[tuple[int, memoryview]], step: int | None = None
) -> Iterator[tuple[int, memoryview]]:
    """``records`` (in CommitLog order), handing the pages behind the walk back to the kernel every
    ``step`` bytes (``RELEASE_BYTES``) and the rest at the end: a walk over the whole store keeps
    ``step`` bytes of it resident, not all of it (the pages stay in the page cache)."""
    step = RELEASE_BYTES if step is None else step
    released: int | None = None
    offset = 0
    try:
        for offset, buf in records:
            if released is None:
                released = offset
            elif offset - released >= step:
                commitlog.release(released, offset)
                released = offset
            yield offset, buf
    finally:
        if released is not None:
            commitlog.release(released, max(offset, commitlog.max_offset))
