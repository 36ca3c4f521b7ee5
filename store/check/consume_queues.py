"""``fsck`` of the ConsumeQueues: every queue against what the broker's reput makes of the CommitLog.

One walk over the CommitLog computes, for every record that gets an entry (``dispatch_entry``), the
entry its queue must hold at its queue offset, and compares it with the queue's files, read as the
broker reads them (``ConsumeQueue``). Reported, each naming the queue, the offset and the file:

* files of another size than ``mappedFileSizeConsumeQueue``, names off the file grid, holes between
  files (the broker cannot read across them);
* an entry that differs from its record's (CommitLog offset, size, tagsCode);
* records whose entry is missing (the queue is behind the CommitLog, or lost entries);
* entries between the min and max offset that no record claims (pointing at no record, or at a
  record of another queue), except pre-blank entries and entries below the CommitLog's first offset
  (the broker cleaned those records; their files go later).

A store without a ``consumequeue`` directory gets a note, not a problem (``rebuild-index`` builds it).
Nor are the records of a deleted topic (``mqadmin deleteTopic``: the broker drops its config from
``topics.json`` and destroys its consume queues, ``cleanUnusedTopic``, and keeps its records): a
topic that ``topics.json`` does not list and that has no consume queue directory gets a note.

The walk crosses CommitLog gaps (``store.commitlog.gaps``: a missing or cut-short middle file, a corrupt
record) as ``rebuild-index --index-around-gaps`` does, so the entries of the records after a gap are
checked against them instead of being reported as pointing at no record. A gap the queues were built
around (they hold entries for records after it and none that points into it: the lost records' queue
offsets are blank entries) is returned in ``built_around``; the caller reports it as a known gap.
An entry pointing into a gap, or at a record other than its own, is still a problem.
"""

from __future__ import annotations

import itertools
import os
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from store.commitlog.gaps import Gap
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.consumequeue.builder import BATCH_RECORDS, DISPATCHED_MARK, check_geometry, safe_topic_dir
from store.consumequeue.consume_queue import (
    CQ_STORE_UNIT_SIZE,
    PRE_BLANK_SIZE,
    ConsumeQueue,
    delay_level_table,
)
from store.consumequeue.consume_queue_build import SPECIAL, Group, extract_entries
from store.consumequeue.topic_counts import read_topics_json
from store.errors import StoreError
from store.reput.decode import DispatchError, dispatch_entry
from store.reput.dispatcher import Run
from store.reput.walk import Reput

__all__ = ["Claims", "ConsumeQueueCheck", "QueueCheck", "check_consume_queues"]

_NAME = re.compile(r"^\d{20}$")
#: Topics whose queues ``cleanUnusedTopic`` keeps though ``topics.json`` need not list them.
_KEPT_UNLISTED = frozenset({"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_OP_HALF_TOPIC"})
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ENTRY = struct.Struct(">qiq")
#: Lines reported per queue and kind; the rest are counted.
_MAX_LINES = 5
#: The walk hands the CommitLog pages behind it back to the kernel every this many bytes, and the
#: queues' pages every ``QUEUE_RELEASE_EVERY`` times that (one ``madvise`` per queue file each time).
RELEASE_BYTES = 64 << 20
QUEUE_RELEASE_EVERY = 4


class _QueueFindings:
    def __init__(self, label: str) -> None:
        self.label = label
        self.lines: dict[str, list[str]] = {}
        self.counts: dict[str, int] = {}

    def add(self, kind: str, line: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        lines = self.lines.setdefault(kind, [])
        if len(lines) < _MAX_LINES:
            lines.append(line)

    def report(self) -> list[str]:
        out: list[str] = []
        for kind, lines in self.lines.items():
            out += [f"consume queue {self.label}: {line}" for line in lines]
            more = self.counts[kind] - len(lines)
            if more:
                out.append(f"consume queue {self.label}: ... and {more} more {kind} problems")
        return out


def _queue_dirs(root: os.PathLike[str] | str) -> list[tuple[str, int]]:
    out = []
    try:
        topics = [e for e in os.scandir(root) if e.is_dir()]
    except FileNotFoundError:
        return out
    for t in sorted(topics, key=lambda e: e.name):
        for q in os.scandir(t.path):
            if q.is_dir() and q.name.isdigit():
                out.append((t.name, int(q.name)))
    return sorted(out)


def _check_files(config: StoreConfig, topic: str, queue_id: int, found: _QueueFindings) -> None:
    directory = config.consume_queue_dir / topic / str(queue_id)
    size = config.consume_queue_file_size
    starts = []
    for name in sorted(os.listdir(directory)):
        if not _NAME.match(name):
            continue
        start = int(name)
        length = (directory / name).stat().st_size
        if start % size:
            found.add(
                "file", f"file {name} does not start at a multiple of mappedFileSizeConsumeQueue {size}"
            )
        if length != size:
            found.add("file", f"file {name} has {length} bytes, expected mappedFileSizeConsumeQueue {size}")
        starts.append(start)
    for a, b in itertools.pairwise(starts):
        if b != a + size:
            found.add("file", f"hole between files {a:020d} and {b:020d}: entries past it cannot be read")


class Claims:
    """Which offsets ``[0, total)`` of one queue a record claimed, in memory bounded for a queue
    claimed in order.

    The offsets are kept in chunks of ``CHUNK``: a chunk gets its flags when its first offset is
    claimed, and gives them up once every offset in it is claimed (it is then only a number in
    ``full``). The broker gives a queue's records consecutive offsets in CommitLog order, so a
    healthy queue has at most one chunk of flags at a time, however many entries it holds; only a
    damaged one (offsets skipped or out of order) keeps more. One flag per entry for every queue
    (what this replaces) grew with the store.
    """

    CHUNK = 4096
    __slots__ = ("_claimed", "_open", "_total", "full")

    def __init__(self, total: int) -> None:
        self._total = total
        self._open: dict[int, bytearray] = {}
        self._claimed: dict[int, int] = {}  # chunk -> offsets claimed in it, for the open ones
        #: Chunks whose every offset is claimed.
        self.full: set[int] = set()

    def claim(self, i: int) -> None:
        c = i // self.CHUNK
        if c in self.full:
            return
        flags = self._open.get(c)
        if flags is None:
            flags = self._open[c] = bytearray(min(self.CHUNK, self._total - c * self.CHUNK))
            self._claimed[c] = 0
        j = i - c * self.CHUNK
        if flags[j]:
            return
        flags[j] = 1
        claimed = self._claimed[c] = self._claimed[c] + 1
        if claimed == len(flags):
            del self._open[c], self._claimed[c]
            self.full.add(c)

    def claim_range(self, start: int, stop: int) -> None:
        """``claim`` of every offset in ``[start, stop)``, a chunk at a time (a batch of entries that
        matched its queue): a whole chunk claimed at once never gets flags."""
        chunk = self.CHUNK
        while start < stop:
            c = start // chunk
            base = c * chunk
            size = min(chunk, self._total - base)
            end = min(stop, base + size)
            if c not in self.full:
                flags = self._open.get(c)
                if flags is None and start == base and end == base + size:
                    self.full.add(c)
                else:
                    if flags is None:
                        flags = self._open[c] = bytearray(size)
                    flags[start - base : end - base] = b"\x01" * (end - start)
                    claimed = size - flags.count(0)
                    if claimed == size:
                        del self._open[c]
                        self._claimed.pop(c, None)
                        self.full.add(c)
                    else:
                        self._claimed[c] = claimed
            start = end

    def open_chunks(self) -> int:
        """Chunks holding flags now (the memory this uses, in ``CHUNK`` bytes)."""
        return len(self._open)

    def unclaimed(self) -> Iterator[int]:
        """Every offset no record claimed, in order."""
        for c in range((self._total + self.CHUNK - 1) // self.CHUNK):
            if c in self.full:
                continue
            base = c * self.CHUNK
            flags = self._open.get(c)
            if flags is None:
                yield from range(base, min(base + self.CHUNK, self._total))
                continue
            i = flags.find(0)
            while i >= 0:
                yield base + i
                i = flags.find(0, i + 1)


@dataclass(slots=True)
class QueueCheck:
    """What the check found: problems, notes, and the CommitLog gaps the queues were built around."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    built_around: list[Gap] = field(default_factory=list)


def _ignore_gap(_gap: Gap) -> None:
    """The check reads on after a gap (the CommitLog check reports it)."""


class _QueueWalk:
    """The reput's dispatcher for the check (``store.reput.walk.Reput``): each run of whole records
    goes through the builder's compiled ``extract_entries``, which computes a run's entries per queue
    in one call; a queue's batch that is consecutive, within the queue and equal byte for byte to
    the queue's files is claimed at once. Anything else (a batch that differs or leaves the queue,
    a record ``extract_entries`` leaves to ``dispatch_entry``) is checked one entry at a time, the
    reference rules (``_check_entry``), so the lines said are the same either way."""

    def __init__(self, check: _Check) -> None:
        self.check = check
        self.records = 0
        commitlog = check.commitlog
        self.released = commitlog.min_offset
        self.releases = 0

    # -- the reput's dispatcher ------------------------------------------------------------------------

    def begin(self) -> bool:
        return True

    def resume_offset(self) -> int:
        return self.check.commitlog.min_offset

    def flush(self) -> None:
        """Nothing is written."""

    def dispatch(self, run: Run) -> None:
        view, base, pos, end = run.view, run.base, run.pos, run.end
        check = self.check
        while pos < end:
            stop, after, seen, groups = extract_entries(view, pos, end, base, BATCH_RECORDS)
            self.records += seen
            for group in groups:
                check.group(group)
            pos = after
            if stop == SPECIAL:
                size = _I32.unpack_from(view, pos)[0]
                self.records += 1
                check.one(base + pos, view[pos : pos + size])
                pos += size
        self._release(base + end)

    def _release(self, offset: int) -> None:
        """The CommitLog pages behind the walk, and the queues' pages read so far, are done with:
        out of this process's resident memory (they stay in the page cache)."""
        if offset - self.released < RELEASE_BYTES:
            return
        check = self.check
        check.commitlog.release(self.released, offset)
        self.released = offset
        self.releases += 1
        if self.releases % QUEUE_RELEASE_EVERY == 0:
            for q in check.queues.values():
                q.release()


class _Check:
    """The state of one check: the queues met, what each holds claimed, the findings."""

    def __init__(self, config: StoreConfig, commitlog: CommitLog, recent_ms: int | None) -> None:
        self.config = config
        self.commitlog = commitlog
        self.recent_ms = recent_ms
        self.root = config.consume_queue_dir
        self.delays = delay_level_table(config.message_delay_level)
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.findings: dict[tuple[str, int], _QueueFindings] = {}
        self.claimed: dict[tuple[str, int], Claims] = {}
        self.entries = self.in_flight = 0
        self.last_claimed = -1  # the CommitLog offset of the last record whose entry is in its queue
        self._topics: dict[bytes, str] = {}
        topics_json = config.store_path_root_dir / "config" / "topics.json"
        #: The topics ``topics.json`` lists; None when there is no such file (nothing is deleted then).
        self._listed: frozenset[str] | None = (
            frozenset(read_topics_json(topics_json)) if topics_json.is_file() else None
        )
        #: topic -> whether it is a deleted one (decided once per topic met).
        self._deleted: dict[str, bool] = {}
        #: deleted topic -> records of it met.
        self.deleted_records: dict[str, int] = {}
        #: Records before their queue's first entry (a topic deleted and made again).
        self.earlier_records = 0
        self._firsts: dict[tuple[str, int], int] = {}
        #: topic -> the least first entry of its queues (made at the first need: every queue with a
        #: directory is open by then).
        self._topic_firsts: dict[str, int] | None = None
        self._floor = _dispatched_floor(self.root)

    def _earlier_life(self, key: tuple[str, int], q: ConsumeQueue, offset: int) -> bool:
        """Whether the record at CommitLog ``offset`` is of the topic's earlier life (deleted, then
        made again: its queues started afresh from offset 0, in new directories): it comes before
        its queue's first entry, or, for a queue with none, before the first entry of every queue of
        the topic, or (a topic with no queue at all) before where dispatch stood at the last
        deletion (``DISPATCHED_MARK``). A wrong entry is still found: no record claims it."""
        first = self._first_entry(key, q)
        if first >= 0:
            return offset < first
        firsts = self._topic_firsts
        if firsts is None:
            firsts = self._topic_firsts = {}
            for (topic, _qid), other in list(self.queues.items()):
                at = self._first_entry((topic, _qid), other)
                if at >= 0 and (topic not in firsts or at < firsts[topic]):
                    firsts[topic] = at
        topic_first = firsts.get(key[0])
        if topic_first is not None:
            return offset < topic_first
        return offset < self._floor

    def _first_entry(self, key: tuple[str, int], q: ConsumeQueue) -> int:
        """The CommitLog offset of the queue's first entry (-1 when it has none)."""
        first = self._firsts.get(key)
        if first is None:
            entry = q.entry(q.min_offset) if q.max_offset > q.min_offset else None
            first = self._firsts[key] = -1 if entry is None else entry.commit_log_offset
        return first

    def deleted(self, topic: str, records: int) -> bool:
        """Whether ``topic`` was deleted (not listed, no directory, not one the broker keeps the
        queues of whatever its config: ``cleanUnusedTopic``'s exceptions); its records are counted."""
        gone = self._deleted.get(topic)
        if gone is None:
            gone = (
                self._listed is not None
                and topic not in self._listed
                and topic not in _KEPT_UNLISTED
                and not (self.root / topic).is_dir()
            )
            if len(self._deleted) < 65536:
                self._deleted[topic] = gone
        if gone:
            self.deleted_records[topic] = self.deleted_records.get(topic, 0) + records
        return gone

    def queue_of(self, key: tuple[str, int]) -> ConsumeQueue:
        q = self.queues.get(key)
        if q is None:
            q = ConsumeQueue(self.root, key[0], key[1], self.config.consume_queue_file_size, self.commitlog)
            self.queues[key] = q
            self.findings[key] = _QueueFindings(f"{key[0]}/{key[1]}")
            self.claimed[key] = Claims(max(q.max_offset - q.min_offset, 0))
        return q

    def one(self, offset: int, buf: memoryview) -> None:
        """The record at ``offset`` (``buf``), its entry computed by ``dispatch_entry``."""
        try:
            entry = dispatch_entry(buf, self.delays)
        except (DispatchError, ValueError, struct.error):
            return
        if entry is None:
            return
        topic, queue_id, queue_offset, code, store_ts = entry
        self.entries += 1
        if not safe_topic_dir(topic):
            return  # the builder skips it too (and says so)
        if self.deleted(topic, 1):
            return
        key = (topic, queue_id)
        self._check_entry(key, self.queue_of(key), offset, len(buf), code, queue_offset, store_ts)

    def group(self, group: Group) -> None:
        """One queue's entries of a run, as ``extract_entries`` computed them (in CommitLog order)."""
        raw_topic, queue_id, entries, queue_offsets, times, consecutive = group
        n = len(entries) // CQ_STORE_UNIT_SIZE
        self.entries += n
        topic = self._topics.get(raw_topic)
        if topic is None:
            topic = raw_topic.decode("utf-8", "replace")
            if len(self._topics) < 4096:
                self._topics[raw_topic] = topic
        if not safe_topic_dir(topic) or self.deleted(topic, n):
            return
        key = (topic, queue_id)
        q = self.queue_of(key)
        offsets = memoryview(queue_offsets).cast("q")
        first, last = offsets[0], offsets[n - 1]
        low = q.min_offset
        if consecutive and low <= first and last < q.max_offset and _same_entries(q, first, entries):
            self.claimed[key].claim_range(first - low, last + 1 - low)
            at = _ENTRY.unpack_from(entries, (n - 1) * CQ_STORE_UNIT_SIZE)[0]
            if at > self.last_claimed:
                self.last_claimed = at
            return
        stamps = memoryview(times).cast("q")
        for i, (offset, size, code) in enumerate(_ENTRY.iter_unpack(entries)):
            self._check_entry(key, q, offset, size, code, offsets[i], stamps[i])

    def _check_entry(
        self,
        key: tuple[str, int],
        q: ConsumeQueue,
        offset: int,
        size: int,
        code: int,
        queue_offset: int,
        store_ts: int,
    ) -> None:
        """The reference rule: the entry at ``queue_offset`` of ``q`` against its record's."""
        found = self.findings[key]
        if queue_offset < q.min_offset:
            return
        if self._earlier_life(key, q, offset):
            self.earlier_records += 1
            return
        if queue_offset >= q.max_offset:
            if self.recent_ms is not None and store_ts >= self.recent_ms:
                self.in_flight += 1
                return
            found.add("missing", f"no entry at offset {queue_offset} for the record at {offset} (behind)")
            return
        got = q.entry(queue_offset)
        want = (offset, size, code)
        self.claimed[key].claim(queue_offset - q.min_offset)
        if offset > self.last_claimed:
            self.last_claimed = offset
        if got is None or (got.commit_log_offset, got.size, got.tags_code) != want:
            have = "nothing" if got is None else f"({got.commit_log_offset}, {got.size}, {got.tags_code})"
            found.add("entry", f"offset {queue_offset} holds {have}, its record says {want}")


def _dispatched_floor(root: os.PathLike[str] | str) -> int:
    """Where dispatch stood at the last topic deletion of a writable store (``DISPATCHED_MARK``), -1."""
    try:
        with open(os.path.join(root, DISPATCHED_MARK), "rb") as f:
            data = f.read(9)
    except OSError:
        return -1
    return _I64.unpack(data)[0] if len(data) == 8 else -1


def _same_entries(q: ConsumeQueue, first: int, entries: bytes) -> bool:
    """The queue holds exactly ``entries`` (20 bytes each) from logical offset ``first`` on."""
    want = memoryview(entries)
    done = 0
    at = first
    while done < len(want):
        buf = q.index_buffer(at)
        if buf is None:
            return False
        k = min(len(buf), len(want) - done) // CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE
        if k == 0 or buf[:k] != want[done : done + k]:
            return False
        done += k
        at += k // CQ_STORE_UNIT_SIZE
    return True


def check_consume_queues(
    config: StoreConfig, commitlog: CommitLog, *, recent_ms: int | None = None, gaps: Sequence[Gap] = ()
) -> QueueCheck:
    """The store's consume queues against ``commitlog``, in a walk of their own (``fsck`` shares the
    CommitLog check's walk instead: ``ConsumeQueueCheck``).

    ``recent_ms``: a broker is running; a missing entry of a record stored at or after this time is
    only counted in a note (its reput thread writes it within milliseconds). ``gaps``: the CommitLog's
    gaps (``GapWalk``), of which those the queues were built around are returned in ``built_around``.
    """
    check = ConsumeQueueCheck(config, commitlog, recent_ms=recent_ms)
    try:
        if check.dispatcher is not None:
            # The reput's walk: runs of whole records checked in one compiled call each, across
            # gaps as ``GapWalk`` crosses them (the CommitLog check reports them).
            Reput(commitlog, [check.dispatcher], on_gap=_ignore_gap).run_once()
        return check.finish(gaps)
    finally:
        check.close()


class ConsumeQueueCheck:
    """One check of the consume queues in three steps: opened (the queues' files checked), fed the
    CommitLog's records by a reput walk (``dispatcher``: ``fsck`` hands it the runs of its own
    CommitLog walk, so the CommitLog is read once), then ``finish``: the entries no record claimed,
    and the report. ``close`` closes the queues."""

    def __init__(self, config: StoreConfig, commitlog: CommitLog, *, recent_ms: int | None = None) -> None:
        self.commitlog = commitlog
        #: The whole answer when there is nothing to walk (no queues, or a geometry refused).
        self._early: QueueCheck | None = None
        self._check = _Check(config, commitlog, recent_ms)
        self._walk: _QueueWalk | None = None
        root = config.consume_queue_dir
        if not root.is_dir():
            self._early = QueueCheck(
                notes=[f"no consumequeue directory at {root} (rmq-query rebuild-index builds it)"]
            )
            return
        try:
            check_geometry(root, config.consume_queue_file_size)
        except StoreError as exc:
            self._early = QueueCheck(problems=[f"{exc} (the consume queues were not checked)"])
            return
        try:
            for key in _queue_dirs(root):
                self._check.queue_of(key)
                _check_files(config, key[0], key[1], self._check.findings[key])
        except BaseException:
            self.close()
            raise
        self._walk = _QueueWalk(self._check)

    @property
    def dispatcher(self) -> _QueueWalk | None:
        """The reput dispatcher to feed every record from the CommitLog's start (None: nothing to walk)."""
        return self._walk

    def close(self) -> None:
        for q in self._check.queues.values():
            q.close()

    def finish(self, gaps: Sequence[Gap] = ()) -> QueueCheck:
        """The report, once the walk is done; ``gaps``: the CommitLog's gaps (``GapWalk``), of which
        those the queues were built around are returned in ``built_around``."""
        if self._early is not None or self._walk is None:
            return self._early if self._early is not None else QueueCheck()
        check, walk, commitlog = self._check, self._walk, self.commitlog
        queues, findings, claimed = check.queues, check.findings, check.claimed
        cl_min = commitlog.min_offset
        problems: list[str] = []
        records, entries, in_flight = walk.records, check.entries, check.in_flight
        last_claimed = check.last_claimed
        into_gaps: set[int] = set()  # the gaps (by index) some non-blank entry points into
        for key, q in queues.items():
            for i in claimed[key].unclaimed():
                n = q.min_offset + i
                e = q.entry(n)
                if e is None or e.commit_log_offset < cl_min or e.size == PRE_BLANK_SIZE:
                    continue
                into_gaps.update(i for i, g in enumerate(gaps) if g.start <= e.commit_log_offset < g.resume)
                if e.commit_log_offset in commitlog.corrupt:
                    continue  # its record is corrupt: reported with the CommitLog
                findings[key].add(
                    "unclaimed",
                    f"offset {n} points at CommitLog {e.commit_log_offset} (size {e.size}), which is not "
                    "a record of this queue at this position",
                )
            q.release()
        commitlog.release(walk.released, commitlog.max_offset)
        for key in sorted(findings):
            problems += findings[key].report()
        notes = [
            f"consume queues: {len(queues)} queues, {entries} of {records} records get an entry, "
            f"{sum(q.max_offset - q.min_offset for q in queues.values())} entries between min and max"
        ]
        if check.deleted_records:
            names = sorted(check.deleted_records)
            notes.append(
                f"consume queues: {sum(check.deleted_records.values())} records of {len(names)} deleted "
                f"topic(s) have no entry, as the broker's deleteTopic leaves them (not in topics.json, no "
                f"consume queue directory): {', '.join(names[:10])}{', ...' if len(names) > 10 else ''}"
            )
        if check.earlier_records:
            notes.append(
                f"consume queues: {check.earlier_records} records come before their queue's first entry "
                "(their topic was deleted and made again, its queues afresh)"
            )
        if in_flight:
            notes.append(
                f"consume queues: {in_flight} records just stored have no entry yet (broker running)"
            )
        around = [g for i, g in enumerate(gaps) if i not in into_gaps and last_claimed >= g.resume]
        return QueueCheck(problems, notes, around)
