"""One IndexFile rebuilt from the CommitLog while the store is served (issue 31, item 7).

An IndexFile overwritten in place under a running reader (``cp`` of another IndexFile's bytes over
it: same inode, a header that begins elsewhere) leaves nothing of its keys to answer from, and
``IndexService.refresh`` leaves it out of queries. This rebuilds that one file, as the builder would
have written it, into a file of its own outside the store (an unlinked temporary file: a read-only
server never writes into a broker's directory), which then answers for it
(``IndexService.install_rebuilt``) until the file on disk is whole again.

The file is made the way the broker made it: created with the previous file's end values (or, for
the first file, values that give its first entry the time difference it had), then the records from
its first key's CommitLog offset on fed to ``index_range`` (the builder's loop: the same keys, the
same skips, the same puts) until it is full or past the record its header last said it ended at.
A record whose first keys went into the previous file (a roll in the middle of a record) gets its
remaining keys only, as the builder resumes one. Fed the same CommitLog, the bytes are the file's.
The walk is a reput dispatcher run in bounded slices by the store (``store.file_repairs``).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

from store.commitlog.mapped_files import CommitLog
from store.index.index_file import IndexFile, IndexHeader
from store.index.index_range import END, OTHER, ROLL, index_range
from store.reput.dispatcher import Run, record_size, skip_to

log = logging.getLogger("store.index")
_NO_LIMIT = 1 << 62


class IndexFileRebuild:
    """The reput dispatcher that writes one IndexFile again, into a temporary file of its own."""

    kind = "index"

    def __init__(
        self,
        name: str,
        path: Path,
        hash_slot_num: int,
        index_num: int,
        good: IndexHeader,
        first_entry: tuple[int, int, int, int] | None,
        previous: IndexFile | None,
        commitlog: CommitLog,
    ) -> None:
        self.name = name
        #: Where the file lives in the store (for the log; the rebuilt one is elsewhere).
        self.path = path
        self.good = good
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        created_phy = created_ts = 0
        skip = 0
        if previous is not None:
            before = previous.header
            created_phy, created_ts = before.end_phy_offset, before.end_timestamp
            if before.end_phy_offset == good.begin_phy_offset:
                # The previous file took this record's first keys before it was full.
                n = before.index_count - 1
                while n >= 1 and previous.entry(n)[1] == good.begin_phy_offset:
                    skip += 1
                    n -= 1
        if first_entry is not None:
            # The first key's time difference counts from the values the file was created with.
            diff = first_entry[2]
            created_ts = good.begin_timestamp - diff * 1000 if diff > 0 else 0
        self.label = f"index file {path}"
        self._dir = Path(tempfile.mkdtemp(prefix="rmq-query-index-"))
        try:
            self.target = IndexFile.create(
                self._dir / name,
                hash_slot_num,
                index_num,
                end_phy_offset=min(created_phy, good.begin_phy_offset),
                end_timestamp=created_ts,
            )
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self.next_offset = good.begin_phy_offset
        self._skip = skip
        last = commitlog.read_record(good.end_phy_offset)
        #: One past the record the file's header last said it ended at.
        self.to_offset = good.end_phy_offset + (len(last) if last is not None else 1)
        self.done = False
        self._topics: set[str] = set()

    # -- the reput's dispatcher -----------------------------------------------------------------------

    def begin(self) -> bool:
        return not self.done

    def resume_offset(self) -> int:
        return self.next_offset

    def flush(self) -> None:
        """Nothing to make durable: the file is this process's own, and temporary."""

    def dispatch(self, run: Run) -> None:
        view, base, pos, end = run.view, run.base, run.pos, run.end
        if self.done or base + end <= self.next_offset:
            return
        skip = self._skip
        if base + pos < self.next_offset:
            pos = skip_to(run, self.next_offset)
        if base + pos != self.next_offset:
            skip = 0  # the keys already in belong to a record before this one
        end = min(end, self.to_offset - base)
        target = self.target
        while pos < end:
            target.reserve((end - pos) // 2 + 1)
            stop, pos, skip, _seen, _records, _keys = index_range(
                view, pos, end, base, target, self._topics, skip, _NO_LIMIT, run.safe_length, True
            )
            self.next_offset, self._skip = base + pos, skip
            if stop == ROLL:
                self.done = True  # full: the keys after it went to the next file
                return
            if stop == OTHER:
                # Whole, but its fields cannot be read: no keys (as the builder skips it).
                pos += record_size(view, pos)
                skip = 0
                self.next_offset, self._skip = base + pos, 0
            elif stop == END:
                break
        if self.next_offset >= self.to_offset:
            self.done = True

    # -- the result -----------------------------------------------------------------------------------

    def finish(self) -> IndexFile:
        """The rebuilt file, opened read-only (its directory entry removed: the map keeps it)."""
        self.done = True
        target = self.target
        made = target.header
        target.close()
        try:
            rebuilt = IndexFile.open(self._dir / self.name, self.hash_slot_num, self.index_num)
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)
        rebuilt.path = self.path
        if made != self.good:
            log.warning(
                "index file %s: the rebuilt file's header %s differs from the one it last had %s (records "
                "lost from the CommitLog, or the file was being written): answering from what was rebuilt",
                self.path,
                made,
                self.good,
            )
        return rebuilt

    def abandon(self) -> None:
        """Drop the unfinished file (the store is closing)."""
        self.done = True
        self.target.close()
        shutil.rmtree(self._dir, ignore_errors=True)
