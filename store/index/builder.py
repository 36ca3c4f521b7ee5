"""Builds IndexFiles from the CommitLog: the reput's index dispatcher (``CommitLogDispatcherBuildIndex``
and ``IndexService.buildIndex``).

The walk is the reput's (``store.reput``), shared with the consume queues; this dispatcher indexes
the runs of whole records it is handed with the compiled range loop (``index_range``), and, as a
``Scanner``, finds its runs itself when it leads the walk, so checking a record and indexing it stay
one pass. For every whole record from where indexing got to: skip TRANSACTION_ROLLBACK records; put
``topic#UNIQ_KEY`` if the record has one, then ``topic#token`` for each non-empty token of KEYS split
on single spaces; when the last IndexFile is full, create the next one (it inherits the previous
file's end offset/timestamp as its begin and end) and record that file's end timestamp in the
checkpoint's ``indexMsgTimestamp``, as the broker does. Fed the same CommitLog, this writes
IndexFiles byte-identical to the Java broker's (file names aside, which are creation times).

Where indexing got to is not stored anywhere else (the broker keeps no such offset either): it is the
last entry's CommitLog offset. The record at that offset may have been indexed only partly (a crash
between two of its keys), so its keys already present as trailing entries are counted and skipped;
no record is ever indexed twice and none is lost, so a restart resumes exactly. The reput starts
at the least resume point of its dispatchers; records before this one's are skipped here.

Before appending, the newest file is repaired to what a clean build would hold (``_repair``): puts
a crash tore are undone, trailing entries that point at no record with their key (a broker killed
mid-write, pages lost) are rolled back, an interrupted file creation is finished or removed, and a
stale checkpoint is brought up to date. After an abnormal exit (the ``abort`` marker) the broker
destroys the newest files and loses their keys; this builder keeps and repairs them instead.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from protocol.errors import ProtocolError
from protocol.message import read_index_fields
from store.checkpoint import UPDATE_LOCK as CHECKPOINT_UPDATE_LOCK
from store.checkpoint import Checkpoint, abnormal_exit
from store.commitlog import record
from store.commitlog.gaps import Gap
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.errors import IndexFileError, StoreError
from store.index.index_file import IndexFile, header_problem
from store.index.index_range import OTHER, ROLL, index_range
from store.index.keys import KeyHasher, index_keys
from store.index.service import IndexService
from store.platform.broker_lock import broker_lock_holder
from store.reput.dispatcher import Run, record_size, skip_to
from store.reput.walk import Reput, run_to_end
from store.staging import staged_output

log = logging.getLogger("store.index")
_NO_LIMIT = 1 << 62


class IndexBuilder:
    """Indexes a CommitLog into ``index_dir`` (the store's own ``index/`` unless told otherwise)."""

    def __init__(
        self,
        config: StoreConfig,
        commitlog: CommitLog | None = None,
        *,
        index_dir: Path | None = None,
        checkpoint_path: Path | None = None,
        now_millis: Callable[[], int] | None = None,
    ) -> None:
        self.config = config
        #: The gaps a rebuild indexed around (``rebuild_index`` sets them from its reput).
        self.gaps: list[Gap] = []
        #: After a rebuild's swap: what could not be finished (the new index is in place regardless).
        self.after_swap: list[str] = []
        self._own_commitlog = commitlog is None
        self.commitlog = commitlog or CommitLog(
            config.store_path_commit_log, config.mapped_file_size_commit_log
        )
        self.checkpoint_path = checkpoint_path if checkpoint_path is not None else config.checkpoint_path
        self.index_dir = Path(index_dir) if index_dir is not None else config.index_dir
        holder = broker_lock_holder(config.store_path_root_dir) if index_dir is None else None
        if holder is not None and abnormal_exit(config.store_path_root_dir):
            # A running broker keeps ``abort`` while it runs: nothing crashed.
            log.info(
                "a broker (pid %d) is running on this store: %s is its running marker",
                holder,
                config.abort_path,
            )
        elif index_dir is None and abnormal_exit(config.store_path_root_dir):
            log.warning(
                "%s exists: the last broker or builder on this store stopped uncleanly; keeping its index "
                "files (the broker would delete the newest) and repairing the newest from the CommitLog",
                config.abort_path,
            )
        self._remove_unfinished_files()
        self.index = IndexService(config, writable=True, index_dir=self.index_dir)
        self._now_millis = now_millis
        self.topics_seen: set[str] = set()
        self._hasher = KeyHasher()
        self.keys_indexed = 0
        self.records_indexed = 0
        self._lock = threading.Lock()
        try:
            self._repair()
        except BaseException:
            self.index.close()
            if self._own_commitlog:
                self.commitlog.close()
            raise
        self._next_offset, self._skip_keys = self._resume_point()
        #: The file the next key goes to (None: roll first); set by ``begin``.
        self._current: IndexFile | None = None
        self._reput: Reput | None = None

    # -- repair after a crash ------------------------------------------------------------------------

    def _remove_unfinished_files(self) -> None:
        """Delete 0-byte index files: a creation killed between ``open`` and sizing the file."""
        try:
            names = [n for n in os.listdir(self.index_dir) if n.isdigit()]
        except FileNotFoundError:
            return
        for name in names:
            path = self.index_dir / name
            try:
                if path.stat().st_size == 0:
                    log.warning("removing %s: an index file whose creation was interrupted", path)
                    path.unlink()
            except FileNotFoundError:
                pass

    def _entry_is_sound(self, f: IndexFile, n: int) -> tuple[int, int] | None:
        """(phyOffset, storeTimestamp) of entry ``n`` if it points at a record with a key of its hash."""
        key_hash, phy, _diff, prev = f.entry(n)
        if not 0 <= prev < n:
            return None
        buf = self.commitlog.read_record(phy)
        if buf is None or record.check(buf, 0, len(buf)) <= 0:
            return None
        try:
            fields = read_index_fields(buf, 0)
        except ProtocolError:
            return None
        if all(self._hasher(fields.topic, k) != key_hash for k in index_keys(fields)):
            return None
        return phy, fields.store_timestamp

    def _repair(self) -> None:
        """Make the newest file what a clean build up to its last sound entry would have written."""
        files = self.index.files
        if not files:
            return
        last = files[-1]
        prev = files[-2] if len(files) > 1 else None
        base = (prev.header.end_phy_offset, prev.header.end_timestamp) if prev is not None else (0, 0)
        count = last.header.index_count
        # A damaged count (negative, or past the file) says nothing: look for entries up to the end.
        top = count if 1 <= count <= last.index_num else last.index_num
        keep, end_values = 1, base
        for n in range(top - 1, 0, -1):
            sound = self._entry_is_sound(last, n)
            if sound is not None:
                keep, end_values = n + 1, sound
                break
        if keep == 1 and count > 1:
            # Not one entry points at a record with its key: this is not the CommitLog the index was
            # built from (a wrong --commitlog or --store), or it lost everything the newest file
            # indexes. Rolling back would erase the index; refuse and leave it as it is.
            first_phy = last.entry(1)[1]
            cause = (
                f"the CommitLog ends at {self.commitlog.max_offset}, before the first record it indexes "
                f"({first_phy}): CommitLog files lost or truncated, or the wrong CommitLog or store?"
                if first_phy >= self.commitlog.max_offset
                else "wrong CommitLog or store?"
            )
            raise IndexFileError(
                f"none of the {top - 1} entries of the newest index file {last.path} points at a record "
                f"with its key in the CommitLog at {self.commitlog.directory}: {cause} "
                "The index is left untouched (rmq-query rebuild-index rebuilds it from this CommitLog)"
            )
        h = last.header
        # A header no writer leaves (counts beyond the file, negative values) is rewritten from the
        # entries too, or the file would stay out of queries while the builder kept adding to it.
        problem = header_problem(h, last.hash_slot_num, last.index_num, last=True)
        intact = keep == count and last.written_end() == count and problem is None
        if intact and (h.end_phy_offset, h.end_timestamp) == end_values:
            if count > 1 or (h.begin_phy_offset, h.begin_timestamp) == base:
                self._repair_checkpoint(files)
                return
        begin = self._entry_is_sound(last, 1) if problem is not None and keep > 1 else None
        last.reserve(0)  # the rollback rewrites the slots: their blocks first (a sparse file)
        gone = last.rollback(keep, *end_values, begin=begin)
        last.flush()
        log.warning(
            "index file %s: repaired after %s: kept %d entries, undid %d that were torn or pointing at "
            "no record with their key; they are indexed again from the CommitLog",
            last.path,
            f"a damaged header ({problem})" if problem is not None else "an interrupted write",
            keep - 1,
            gone,
        )
        self._repair_checkpoint(files)

    def _repair_checkpoint(self, files: list[IndexFile]) -> None:
        """indexMsgTimestamp is the newest full file's end (a crash can stop before writing it)."""
        full = [f for f in files if f.is_write_full()]
        if not full:
            return
        checkpoint = Checkpoint.read_or_default(self.checkpoint_path)
        if checkpoint.index_msg_timestamp < full[-1].header.end_timestamp:
            checkpoint.index_msg_timestamp = full[-1].header.end_timestamp
            checkpoint.write(self.checkpoint_path)

    # -- where indexing got to -----------------------------------------------------------------------

    def _resume_point(self) -> tuple[int | None, int]:
        """(offset of the next record to index, keys of it already indexed)."""
        files = self.index.files
        nonempty = [f for f in files if f.header.index_count > 1]
        if not nonempty:
            return None, 0
        last_offset = nonempty[-1].entry(nonempty[-1].header.index_count - 1)[1]
        done = 0
        for f in reversed(nonempty):
            n = f.header.index_count - 1
            while n >= 1 and f.entry(n)[1] == last_offset:
                done += 1
                n -= 1
            if n >= 1:
                break
        return last_offset, done

    @property
    def next_offset(self) -> int:
        """The CommitLog offset of the next record to index (the next pass starts there at the latest)."""
        return self.commitlog.min_offset if self._next_offset is None else self._next_offset

    # -- building: the reput's dispatcher ------------------------------------------------------------

    def begin(self) -> bool:
        """Take records in this pass unless the newest file was cut short under us: writing into it
        would fault (SIGBUS), so indexing stops there (``IndexService.audit`` says why, once).
        When the audit just made found it whole (``IndexService.take_vouched``: a writable store's
        settle audits first), that answers it without another look at the file."""
        current = self.index.last_file()
        if current is not None and not self.index.take_vouched(current) and not current.intact():
            self.index.audit()
            return False
        self._current = None if current is None or current.is_write_full() else current
        return True

    def resume_offset(self) -> int:
        return self.next_offset

    def run_once(self, max_records: int | None = None) -> int:
        """Index every whole record not yet indexed (at most ``max_records``) through a reput that
        feeds this builder alone; returns records read."""
        if self._reput is None:
            self._reput = Reput(self.commitlog, [self])
        with self._lock:
            return self._reput.run_once(max_records)

    def _roll(self) -> IndexFile:
        full = self.index.last_file()
        millis = self._now_millis() if self._now_millis is not None else None
        new = self.index.create_file(millis)
        if full is not None and full.is_write_full():
            full.flush()
            # Its pages stay in the page cache (queries map them back); without this a rebuild kept
            # every full file it wrote resident: 420 MB more for each at the default geometry.
            full.release()
            with CHECKPOINT_UPDATE_LOCK:  # the consume queues' flush may update it from a thread
                checkpoint = Checkpoint.read_or_default(self.checkpoint_path)
                checkpoint.index_msg_timestamp = full.header.end_timestamp
                checkpoint.write(self.checkpoint_path)
        return new

    def dispatch(self, run: Run) -> None:
        """``CommitLogDispatcherBuildIndex`` for the records of ``run`` from ``next_offset``, by the
        compiled range loop (``index_range``); a record whose fields cannot be read gets no key."""
        view, base, pos, end = run.view, run.base, run.pos, run.end
        skip = self._skip_keys
        if self._next_offset is not None:
            if base + end <= self._next_offset:
                return  # every record of the run is indexed
            if base + pos < self._next_offset:
                pos = skip_to(run, self._next_offset)
            if base + pos != self._next_offset:
                skip = 0  # the keys already in belong to a record before this one
        while pos < end:
            stop, pos, _seen = self._index(run, pos, skip, _NO_LIMIT, checked=True)
            if stop != OTHER:
                break  # END: the run is indexed (or the file shrank under it: the rest is gone)
            # Whole (the reput checked it), but its fields cannot be read: no keys.
            offset = base + pos
            self.commitlog.warn(
                f"fields:{offset}",
                f"CommitLog record at offset {offset} passes the CommitLog's checks but its "
                "fields cannot be read; it is not indexed",
            )
            pos += record_size(view, pos)
            skip = 0
            self._next_offset, self._skip_keys = base + pos, skip

    def scan(self, run: Run, max_records: int) -> tuple[int, int] | None:
        """Index the records of ``run``, not checked yet, checking each as the reput would
        (``index_range`` checks every record it reads): ``(stop, records)``, ``stop`` where the
        first position that is not a plain whole record (or ``run.end``, or ``max_records``) stopped
        it. None when the run starts before ``next_offset`` (records it holds are not read here).

        The reput asks this of the index first: checking a record while indexing it costs almost
        nothing, a separate check pass over the same bytes costs about a tenth of indexing them.
        """
        pos = run.pos
        skip = self._skip_keys
        if self._next_offset is not None:
            if run.base + pos < self._next_offset:
                return None
            if run.base + pos != self._next_offset:
                skip = 0
        _stop, pos, seen = self._index(run, pos, skip, max_records, checked=False)
        return pos, seen

    def _index(self, run: Run, pos: int, skip: int, budget: int, *, checked: bool) -> tuple[int, int, int]:
        """``index_range`` over ``run`` from ``pos`` until it stops other than to roll to a new file:
        (why it stopped, where, records completed)."""
        view, base, end = run.view, run.base, run.end
        current = self._current
        topics = self.topics_seen
        seen = 0
        try:
            while True:
                if current is not None:
                    # The compiled loop writes through the map: the blocks the run's keys may need
                    # are reserved first (a record of n bytes holds fewer than n / 2 keys).
                    current.reserve((end - pos) // 2 + 1)
                stop, pos, skip, done, records, keys = index_range(
                    view, pos, end, base, current, topics, skip, budget - seen, run.safe_length, checked
                )
                seen += done
                self.records_indexed += records
                self.keys_indexed += keys
                self._next_offset, self._skip_keys = base + pos, skip
                if stop != ROLL:
                    return stop, pos, seen
                current = self._current = self._roll()
        except BaseException:
            # Keys written by an interrupted call are in the files; resume from what they say.
            self._next_offset, self._skip_keys = self._resume_point()
            raise

    def flush(self) -> None:
        last = self.index.last_file()
        if last is not None:
            last.flush()

    def close(self) -> None:
        with self._lock:
            self.flush()
            self.index.close()
            if self._own_commitlog:
                self.commitlog.close()


def rebuild_index(
    config: StoreConfig, *, now_millis: Callable[[], int] | None = None, around_gaps: bool = False
) -> IndexBuilder:
    """Rebuild ``<storeRoot>/index`` from the CommitLog without ever exposing half an index.

    The new files are written to a staging directory beside ``index/`` (``store.staging``, shared
    with the Spark engine); only when they are complete and flushed is the old directory moved aside
    and the new one renamed into place (then the old one deleted), and the checkpoint's
    ``indexMsgTimestamp`` set to the newest full file's end timestamp. A rebuild killed at any point
    leaves the old index whole (or restorable by the next run). Returns the (closed) builder, whose
    counters say what was indexed.

    A gap in the CommitLog (``store.commitlog.gaps``: a missing or cut-short file, a corrupt record, with
    whole records after it) raises ``CommitLogGapError`` and nothing is replaced, unless
    ``around_gaps``: then the records on both sides are indexed and ``builder.gaps`` lists the gaps.
    """
    leftovers: list[Path] = []
    with staged_output(config.index_dir, leftovers=leftovers) as staging:
        tmp_checkpoint = staging / "checkpoint.rebuild"
        builder = IndexBuilder(
            config, index_dir=staging, checkpoint_path=tmp_checkpoint, now_millis=now_millis
        )
        try:
            builder.gaps = run_to_end(builder.commitlog, builder, around_gaps=around_gaps)
        finally:
            builder.close()
        index_ts = Checkpoint.read_or_default(tmp_checkpoint).index_msg_timestamp
        tmp_checkpoint.unlink(missing_ok=True)
    # The new index is in place: what fails from here on is reported, not raised as a failed swap.
    builder.after_swap = [left_behind(path) for path in leftovers]
    problem = update_index_timestamp(config.checkpoint_path, index_ts)
    if problem:
        builder.after_swap.append(problem)
    return builder


def left_behind(path: Path) -> str:
    """The message for an old index that could not be removed after the swap."""
    return f"the replaced index could not be removed: it is left at {path} (delete it by hand)"


def update_index_timestamp(checkpoint_path: Path, index_ts: int) -> str | None:
    """Set the checkpoint's ``indexMsgTimestamp`` after a swap; the problem, if it could not be done."""
    try:
        checkpoint = Checkpoint.read_or_default(checkpoint_path)
        checkpoint.index_msg_timestamp = index_ts
        checkpoint.write(checkpoint_path)
    except (OSError, StoreError) as exc:
        return f"the checkpoint's indexMsgTimestamp was not set to {index_ts}: {exc}"
    return None
