"""One IndexFile rebuilt from the CommitLog while the store is served (issue 31, item 7).

An IndexFile overwritten in place under a running reader (``cp`` of another IndexFile's bytes over
it: same inode, a header that begins elsewhere) leaves nothing of its keys to answer from, and
``IndexService.refresh`` leaves it out of queries. This rebuilds that one file, as the builder would
have written it, into a file of its own outside the store (an unlinked temporary file: a read-only
server never writes into a broker's directory), which then answers for it
(``IndexService.install_rebuilt``) until the file on disk is whole again. The newest file may still
be written (a live broker keeps putting keys into what is now garbage): its rebuild goes on
following the CommitLog once installed (``follow``), until the file is full, as the writer's would.

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
from store.index.index_file import IndexFile
from store.index.index_range import END, OTHER, ROLL, index_range
from store.index.service import DamagedFile, IndexService
from store.reput.dispatcher import Run, record_size, skip_to

log = logging.getLogger("store.index")
_NO_LIMIT = 1 << 62


class IndexFileRebuild:
    """The reput dispatcher that writes one IndexFile again, into a temporary file of its own."""

    def __init__(self, service: IndexService, request: DamagedFile, commitlog: CommitLog) -> None:
        name, good, first_entry, previous, newest = request
        self.service = service
        self.name = name
        #: Where the file lives in the store (for the log; the rebuilt one is elsewhere).
        self.path = service.index_dir / name
        path = self.path
        self.good = good
        self.hash_slot_num = hash_slot_num = service.hash_slot_num
        self.index_num = index_num = service.index_num
        #: The newest file: followed once installed, until it is full.
        self.follow = newest
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
        directory = Path(tempfile.mkdtemp(prefix="rmq-query-index-"))
        try:
            self.target = IndexFile.create(
                directory / name,
                hash_slot_num,
                index_num,
                end_phy_offset=min(created_phy, good.begin_phy_offset),
                end_timestamp=created_ts,
            )
        finally:
            # The map and descriptor keep the file: nothing is left behind, whatever happens next.
            shutil.rmtree(directory, ignore_errors=True)
        self.target.path = path
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
        if not self.follow:
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
                self.target.flush()
                return
            if stop == OTHER:
                # Whole, but its fields cannot be read: no keys (as the builder skips it).
                pos += record_size(view, pos)
                skip = 0
                self.next_offset, self._skip = base + pos, 0
            elif stop == END:
                break
        if not self.follow and self.next_offset >= self.to_offset:
            self.done = True

    # -- in the index ---------------------------------------------------------------------------------

    def install(self) -> None:
        """The walk caught up: the rebuilt file answers for the file from now on."""
        made = self.target.header
        if made != self.good and not self.follow:
            log.warning(
                "index file %s: the rebuilt file's header %s differs from the one it last had %s (records "
                "lost from the CommitLog?): answering from what was rebuilt",
                self.path,
                made,
                self.good,
            )
        self.service.install_rebuilt(self.name, self.target)

    def extend(self) -> None:
        """More keys were put (following the newest file): they are in the map already."""

    def alive(self) -> bool:
        """Does the rebuilt file still answer for the file (not dropped for a restored one)?"""
        return self.service.answers_with(self.name, self.target)

    def abandon(self) -> None:
        """Drop the file (the store is closing, or it could not be installed)."""
        self.done = True
        if not self.alive():
            self.target.close()
