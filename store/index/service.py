"""The IndexFiles of a store, as the broker's ``IndexService`` manages and queries them.

Files live in ``<storeRoot>/index/``, named ``yyyyMMddHHmmssSSS`` by creation time, and are ordered by
name. Queries walk them newest to oldest with the broker's pruning (a file is searched only if its
time span overlaps the range; the walk stops once a file begins before ``begin`` or ``max_num``
offsets were found, ``max_num`` capped at ``maxMsgsNumBatch``). The newest file's end values are
the ``indexLastUpdateTimestamp/Phyoffset`` a QUERY_MESSAGE response must carry.

``refresh()`` picks up files a live broker (or our own builder in another process) created since.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from protocol.index_key import build_index_key, index_key_hash
from store.config.store_config import StoreConfig
from store.errors import IndexFileError, IndexGeometryError, StoreError
from store.index.index_file import ENTRY, HEADER, UNBOUNDED, IndexFile, IndexHeader, header_problem
from store.index.query_walk import CHAIN, HEADER_PROBLEM, OUTSIDE, SHORT, SLOT, ZEROED, Resume, query_files
from store.platform import sigbus
from store.platform.file_facts import path_facts
from store.warn_once import WarnOnce

_INDEX_NAME = re.compile(r"^\d+$")
#: (files, their maps, descriptors, walked-segment caches): the lists the compiled walk takes.
_Maps = tuple[list[IndexFile] | None, list[object], list[int], list[dict[int, bytes]]]
log = logging.getLogger("store.index")
#: ``audit(tail=True)`` audits every file when the last such audit is this old (seconds), as the
#: CommitLog's ``refresh(tail=True)`` checks every file (``mapped_files.FULL_CHECK_EVERY``).
FULL_AUDIT_EVERY = 0.05


#: A file to rebuild (``IndexService.take_damaged``): its name, the header it last had sound, its
#: first entry if known, the file before it now answering (if any), whether it is the newest file.
DamagedFile = tuple[str, IndexHeader, tuple[int, int, int, int] | None, IndexFile | None, bool]


class QueryArgumentError(StoreError):
    """A query argument the broker rejects with an exception (answered as SYSTEM_ERROR)."""


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a query's budget stopped its chain walks, to finish the same query from there.

    It keeps the file list the walk began on (its maps, descriptors and a writer's headers), so
    the continued walk reads the very files the first part read, whatever ``refresh`` did since,
    and the query's own arguments, so it cannot be continued as another query.
    """

    files: list[IndexFile]
    maps: list[object]
    fds: list[int]
    headers: list[IndexHeader] | None
    query: tuple[int, int, int, int]  #: key hash, max_num (capped), begin, end
    point: Resume


@dataclass(slots=True)
class QueryOffsetResult:
    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0
    #: Index entries the chain walks read.
    visited: int = 0
    #: True when the walk stopped at its budget: ``phy_offsets`` holds what was found until then.
    budget_exhausted: bool = False
    #: Where it stopped (``query_offsets(resume=...)`` finishes it); None if it did not, or when a
    #: corrupt chain it stopped in linked forwards (that query is then started over).
    resume: ResumePoint | None = None


def _read_header(path: Path) -> IndexHeader | None:
    """The header of the file now at ``path`` (None when it cannot be read whole)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(HEADER.size)
    except OSError:
        return None
    return IndexHeader(*HEADER.unpack(raw)) if len(raw) == HEADER.size else None


def _begins_differ(ours: IndexHeader, on_disk: IndexHeader) -> bool:
    """Both headers' begin values set, and different: the file holds another file's bytes."""
    return bool(ours.begin_timestamp and on_disk.begin_timestamp) and (
        ours.begin_timestamp,
        ours.begin_phy_offset,
    ) != (on_disk.begin_timestamp, on_disk.begin_phy_offset)


def index_file_name(millis: int) -> str:
    """The broker's ``UtilAll.timeMillisToHumanString``: local time as ``yyyyMMddHHmmssSSS``."""
    t = time.localtime(millis // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{millis % 1000:03d}"


class IndexService:
    """The ordered IndexFiles of one store; read-only unless ``writable`` (the index builder)."""

    def __init__(self, config: StoreConfig, *, writable: bool = False, index_dir: Path | None = None) -> None:
        self.config = config
        self.writable = writable
        self.index_dir = Path(index_dir) if index_dir is not None else config.index_dir
        self.hash_slot_num = config.max_hash_slot_num
        self.index_num = config.max_index_num
        self.max_msgs_num_batch = config.max_msgs_num_batch
        self._files: list[IndexFile] = []
        #: When ``audit(tail=True)`` last audited every file (``time.monotonic``).
        self._audited_all_at = 0.0
        #: The last file as the last ``audit`` found it whole (its path's inode the map's, its size
        #: at least the map's): the builder's ``begin`` right after takes that for its own
        #: ``intact`` check (``take_vouched``) instead of an ``fstat`` of the same inode.
        self._vouched: IndexFile | None = None
        #: The maps of ``_files`` for ``query_files`` (rebuilt when ``refresh`` replaces the list).
        self._maps: _Maps = (None, [], [], [])
        self._lock = threading.RLock()
        #: Files left out (wrong size) or untrusted (garbage header), each logged once.
        self.warn = WarnOnce(log)
        self.skipped: dict[str, str] = {}
        #: indexCount of each read-only file at the last refresh (a count going down is reported).
        self._seen_count: dict[str, int] = {}
        #: (beginTimestamp, beginPhyOffset) of each file once set: a writer never changes them, so a
        #: file of that name with others holds another file's bytes.
        self._begins: dict[str, tuple[int, int]] = {}
        #: The header each read-only file had at the last refresh that found it whole and sound, and
        #: its first entry: what a rebuild of it must reproduce (``store.index.file_rebuild``).
        self._good: dict[str, IndexHeader] = {}
        self._first_entry: dict[str, tuple[int, int, int, int]] = {}
        #: Files overwritten in place, waiting for the store to rebuild them (``take_damaged``), and
        #: rebuilt files answering for theirs until it is whole again (``install_rebuilt``).
        self._damaged: list[str] = []
        self._rebuilt: dict[str, IndexFile] = {}
        #: Files whose rebuild was asked (and not given up on, nor made moot by a restored file).
        self._asked: set[str] = set()
        #: Files that failed their checks (replaced by another file's bytes), and files rebuilt.
        self.failed_checks = 0
        self.files_rebuilt = 0
        sigbus.install()
        self._faults_seen = sigbus.fault_count()
        self.refresh()

    # -- file list -----------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Open files that appeared, forget files that were deleted (names sorted ascending).

        A known file that was deleted, cut short (``>``, or ``cp`` over it half-way), replaced by
        another inode, or whose ``indexCount`` went down (zeroed in place) is said once; a short one
        is left out until it has its size again, a replaced one is reopened.
        """
        with self._lock:
            try:
                names = sorted(n for n in os.listdir(self.index_dir) if _INDEX_NAME.match(n))
            except FileNotFoundError:
                names = []
            except OSError as exc:
                raise IndexFileError(f"cannot list index directory {self.index_dir}: {exc}") from exc
            known = {f.name: f for f in self._files}
            faults = sigbus.fault_count()
            if faults != self._faults_seen and not self.writable:
                # The SIGBUS guard put zero pages into some map (store.platform.sigbus): reopen every file.
                self._faults_seen = faults
                for f in known.values():
                    if self._rebuilt.get(f.name) is not f:
                        f.close()
                known = {n: f for n, f in known.items() if self._rebuilt.get(n) is f}
            files: list[IndexFile] = []
            wrong: list[IndexGeometryError] = []
            sizes: set[int] = set()
            for name in names:
                f = known.pop(name, None)
                rebuilt = self._rebuilt.get(name)
                if rebuilt is not None:
                    if f is not None and f is not rebuilt:
                        f.close()
                    if not self._restored(name, rebuilt):
                        files.append(rebuilt)
                        continue
                    f = None
                if f is not None and not self.writable and not self._still_good(f):
                    f.close()
                    f = None
                if f is None:
                    path = self.index_dir / name
                    try:
                        size = path.stat().st_size
                        if size == 0:
                            continue  # being created by a live broker: it is sized in a moment
                        f = IndexFile.open(path, self.hash_slot_num, self.index_num, writable=self.writable)
                    except FileNotFoundError:
                        continue
                    except IndexGeometryError as exc:
                        wrong.append(exc)
                        sizes.add(size)
                        self.skipped[name] = str(exc)
                        continue
                    except IndexFileError as exc:
                        self.warn(f"open:{name}", f"{exc}; left out, retried on the next refresh")
                        continue
                    header = f.read_header()
                    if self._other_bytes(name, header):
                        self._say_replaced(f.path, f.inode, header, self._left_out(name))
                        f.close()
                        continue
                    self._seen_count[name] = header.index_count
                files.append(f)
            if wrong and not files and len(sizes) == 1:
                # Every file has the same wrong size: the configuration, not the files, is wrong.
                raise wrong[0]
            for exc in wrong:
                self.warn(str(exc), f"{exc}; left out, the other index files still answer")
            for gone in known.values():
                self.warn(
                    f"deleted:{gone.name}:{gone.inode}",
                    f"index file {gone.path} was deleted while in use: the keys it held are no longer "
                    "found (rmq-query rebuild-index rebuilds them)",
                )
                self._seen_count.pop(gone.name, None)
                self._rebuilt.pop(gone.name, None)
                self._good.pop(gone.name, None)
                self._first_entry.pop(gone.name, None)
                gone.close()
            self._files = files
            if not self.writable:
                self._remember_good(files)

    # -- a file overwritten in place (issue 31, item 7): rebuilt from the CommitLog -------------------

    def _remember_good(self, files: list[IndexFile]) -> None:
        """Note each sound file's header (and first entry): what a rebuild must reproduce."""
        last = len(files) - 1
        for i, f in enumerate(files):
            if self._rebuilt.get(f.name) is f:
                continue
            header = f.read_header()
            if f.problem(header, last=i == last) is not None or self._other_bytes(f.name, header):
                continue
            self._good[f.name] = header
            if f.name not in self._first_entry and header.index_count > 1:
                self._first_entry[f.name] = f.entry(1)

    def _left_out(self, name: str) -> str:
        """What becomes of file ``name``, overwritten in place: rebuilt when its sound header is
        known (a rebuild is asked of the store once), else left out until restored."""
        good = self._good.get(name)
        if good is None or good.index_count <= 1:
            return "left out of queries until it is restored or rebuilt (rmq-query rebuild-index)"
        if name not in self._asked:
            self._asked.add(name)
            self._damaged.append(name)
            self.failed_checks += 1
        return (
            "left out of queries; rebuilding it from the CommitLog records "
            f"{good.begin_phy_offset}..{good.end_phy_offset}, which then answers for it until it is restored"
        )

    def take_damaged(self) -> list[DamagedFile]:
        """Files to rebuild since the last call: (name, the header it had, its first entry, the file
        before it now answering if any, whether it is the newest file)."""
        with self._lock:
            out: list[DamagedFile] = []
            for name in self._damaged:
                if name not in self._good:
                    continue  # deleted since: nothing to rebuild it for
                previous = None
                newest = True
                for f in self._files:
                    if f.name < name:
                        previous = f
                    elif f.name > name:
                        newest = False
                out.append((name, self._good[name], self._first_entry.get(name), previous, newest))
            self._damaged.clear()
            return out

    def install_rebuilt(self, name: str, rebuilt: IndexFile) -> None:
        """``rebuilt`` answers for file ``name`` from now on, in its place, until the file on disk is
        whole again (``_restored``)."""
        with self._lock:
            self._rebuilt[name] = rebuilt
            files = [f for f in self._files if f.name != name]
            for f in self._files:
                if f.name == name:
                    f.close()  # the file on disk, restored while the rebuild ran: the next refresh says so
            files.append(rebuilt)
            files.sort(key=lambda f: f.name)
            self._files = files
            self.files_rebuilt += 1
        log.warning(
            "index file %s: rebuilt from the CommitLog (%d keys); answering from the rebuilt file until "
            "it is restored",
            rebuilt.path,
            rebuilt.read_header().index_count - 1,
        )

    def answers_with(self, name: str, rebuilt: IndexFile) -> bool:
        """Does ``rebuilt`` answer for file ``name`` now?"""
        return self._rebuilt.get(name) is rebuilt

    def _restored(self, name: str, rebuilt: IndexFile) -> bool:
        """Does the file on disk hold what was rebuilt for it again (a restored copy)? Its header,
        its first entry and its last must be the rebuilt file's: a writer still putting keys into
        the overwritten file (a live broker's newest one) rewrites the header with the right counts,
        but the entries before are the other file's."""
        header = rebuilt.read_header()
        count = header.index_count
        at = rebuilt.size - (rebuilt.index_num - 1) * ENTRY.size  # where entry 1 starts
        spans = [(0, HEADER.size)]
        if count > 1:
            spans += [(at, ENTRY.size), (at + (count - 2) * ENTRY.size, ENTRY.size)]
        try:
            fd = os.open(self.index_dir / name, os.O_RDONLY)
        except OSError:
            return False
        try:
            for start, length in spans:
                if os.pread(fd, length, start) != rebuilt.buffer[start : start + length]:
                    return False
        except OSError:
            return False
        finally:
            os.close(fd)
        log.info("index file %s holds its keys again: answering from it", self.index_dir / name)
        del self._rebuilt[name]
        rebuilt.close()
        self._begins.pop(name, None)
        self._asked.discard(name)
        return True

    def _still_good(self, f: IndexFile) -> bool:
        """Check a known read-only file before it is used again; say what happened to it, once."""
        if not f.intact():
            self.warn(
                f"short:{f.name}:{f.inode}",
                f"index file {f.path} was cut short to {f.safe_length()} of {f.size} bytes while in "
                "use (truncated, or replaced by cp or >): left out until it has its size again",
            )
            return False
        try:
            inode = os.stat(f.path).st_ino
        except OSError:
            return True  # deleted just now: the next refresh says so
        if inode != f.inode:
            header = _read_header(f.path)
            if header is not None and self._other_bytes(f.name, header):
                # The old inode is still mapped here, with the keys this name held: answer from it.
                if not self.warn.seen(f"replaced:{f.path.name}:{inode}"):
                    self.failed_checks += 1
                self._say_replaced(
                    f.path,
                    inode,
                    header,
                    "answering from the file as it was, which this process still maps, until it is "
                    "restored or rebuilt (rmq-query rebuild-index)",
                )
                return True
            log.info("index file %s was replaced by another file: reopening it", f.path)
            return False
        header = f.read_header()
        if self._other_bytes(f.name, header):
            # Overwritten in place (cp over it): nothing of the old bytes is left to answer from.
            self._say_replaced(f.path, inode, header, self._left_out(f.name))
            return False
        count = header.index_count
        before = self._seen_count.get(f.name, count)
        self._seen_count[f.name] = count
        if count < before:
            last = f is self._files[-1] if self._files else False
            problem = header_problem(f.read_header(), self.hash_slot_num, self.index_num, last=last)
            consequence = (
                f"{problem}: left out of queries" if problem is not None else "queries use what it holds now"
            )
            self.warn(
                f"count-down:{f.name}:{f.inode}",
                f"index file {f.path}: indexCount went down from {before} to {count} while in use (zeroed "
                f"or overwritten; a writer only adds entries); {consequence}",
            )
            f.warn.mark("header")  # said here: the query walk does not say it again
        return True

    def _other_bytes(self, name: str, header: IndexHeader) -> bool:
        """Does ``header`` name another span than file ``name`` had? Records its begin values the
        first time they are set (a new file's are 0 until its first key)."""
        if header.begin_timestamp == 0:
            return False
        begins = (header.begin_timestamp, header.begin_phy_offset)
        known = self._begins.setdefault(name, begins)
        return known != begins

    def _say_replaced(self, path: Path, inode: int, header: IndexHeader, consequence: str) -> None:
        begin_ts, begin_phy = self._begins[path.name]
        self.warn(
            f"replaced:{path.name}:{inode}",
            f"index file {path} was replaced by another file's bytes while in use (its header begins "
            f"at timestamp {header.begin_timestamp}, CommitLog offset {header.begin_phy_offset}; this "
            f"file began at {begin_ts}, {begin_phy}): {consequence}",
        )

    def audit(self, *, tail: bool = False) -> None:
        """For the builder's own files (``writable``), which ``refresh`` must not drop or reopen: say
        once that one was deleted, replaced, cut short or zeroed under it (its later keys are lost).
        A full file (not the one being written) overwritten in place is left out of queries and
        rebuilt from the CommitLog, as ``refresh`` does for a read-only store's
        (``store.index.file_rebuild``; the writer's own header is the one to reproduce).

        With ``tail`` (a writable store after a put) only the last file, the one being written, and
        every file each ``FULL_AUDIT_EVERY``: it only warns, and a put then costs the same whatever
        the number of index files."""
        files = list(self._files)
        last = files[-1] if files else None
        self._vouched = None
        if tail and files:
            now = time.monotonic()
            if now - self._audited_all_at < FULL_AUDIT_EVERY:
                files = files[-1:]
            else:
                self._audited_all_at = now
        for f in files:
            if self._rebuilt.get(f.name) is f:
                continue  # this process's own rebuilt copy, outside the store
            overwritten = False
            try:
                inode, _, size = path_facts(f.path)
            except FileNotFoundError:
                what = "deleted"
            except OSError as exc:
                what = f"unreadable ({exc.strerror})"
            else:
                if inode != f.inode:
                    what = "replaced by another file"
                elif size < f.size:
                    # the inode the map reads, so its size is what the map's own fstat would find
                    # (``f.intact()``): not asked a second time after every put
                    what = f"cut short to {f.safe_length()} of {f.size} bytes"
                else:
                    if f is last and not f.closed:
                        self._vouched = f
                    written = f.index_count_as_written()
                    if written is not None:  # the bytes on disk are ours: both checks below pass
                        if written > 1 and f.name not in self._first_entry:
                            self._first_entry[f.name] = f.entry(1)
                        continue
                    # One read of the header on disk and one of ours, for both checks (this runs
                    # after every put of a writable store).
                    on_disk, ours = f.read_header(), f.header
                    overwritten = True
                    if on_disk.index_count < ours.index_count:
                        what = "zeroed or overwritten (its header's indexCount went down)"
                    elif _begins_differ(ours, on_disk):
                        what = "overwritten with another file's bytes (its header's begin values changed)"
                    else:
                        if ours.index_count > 1 and f.name not in self._first_entry:
                            self._first_entry[f.name] = f.entry(1)
                        continue
            consequence = (
                "the keys it held are lost for queries or a restart (rmq-query rebuild-index rebuilds them)"
            )
            if overwritten and f is not last and f.header.index_count > 1:
                consequence = self._rebuild_own(f)
            self.warn(
                f"audit:{f.name}:{f.inode}",
                f"index file {f.path} was {what} while this process builds it: {consequence}",
            )

    def take_vouched(self, f: IndexFile) -> bool:
        """Whether the ``audit`` just made found ``f``, the last file, whole (``IndexFile.intact``
        would say True: the same inode, its size at least the map's); said once per audit.

        A writable store's settle audits the last file and then has the builder ``begin``, which
        must know the same thing before it writes through the map: one ``stat`` of the path
        answers both, instead of that and an ``fstat`` of the map a moment later. Anything done
        in between (another ``audit``, a roll-over to a new file) leaves nothing vouched."""
        vouched, self._vouched = self._vouched, None
        return vouched is f

    def _rebuild_own(self, f: IndexFile) -> str:
        """The builder's full file ``f`` was overwritten: leave it out and ask for its rebuild."""
        with self._lock:
            if f.name not in self._asked:
                self._asked.add(f.name)
                self._good[f.name] = f.header
                self._damaged.append(f.name)
                self.failed_checks += 1
                self._files = [g for g in self._files if g is not f]
                f.close()
        h = f.header
        return (
            "left out of queries; rebuilding it from the CommitLog records "
            f"{h.begin_phy_offset}..{h.end_phy_offset}, which then answers for it"
        )

    @property
    def files(self) -> list[IndexFile]:
        return list(self._files)

    def last_file(self) -> IndexFile | None:
        files = self._files
        return files[-1] if files else None

    def create_file(self, now_millis: int | None = None) -> IndexFile:
        """The broker's ``getAndCreateLastIndexFile`` when the last file is full (or there is none)."""
        if not self.writable:
            raise IndexFileError("index service is read-only")
        with self._lock:
            prev = self.last_file()
            end_phy = end_ts = 0
            if prev is not None:
                end_phy, end_ts = prev.header.end_phy_offset, prev.header.end_timestamp
            self.index_dir.mkdir(parents=True, exist_ok=True)
            millis = int(time.time() * 1000) if now_millis is None else now_millis
            name = index_file_name(millis)
            while (self.index_dir / name).exists() or (prev is not None and name <= prev.name):
                millis += 1  # names must stay unique and ascending, even within one millisecond
                name = index_file_name(millis)
            f = IndexFile.create(
                self.index_dir / name,
                self.hash_slot_num,
                self.index_num,
                end_phy_offset=end_phy,
                end_timestamp=end_ts,
            )
            self._files.append(f)
            self._maps = (None, [], [], [])  # the list changed in place: its maps are gathered again
            return f

    def writable_last_file(self) -> IndexFile:
        last = self.last_file()
        if last is None or last.is_write_full():
            return self.create_file()
        return last

    # -- queries -------------------------------------------------------------------------------------

    def last_update(self) -> tuple[int, int]:
        """(indexLastUpdateTimestamp, indexLastUpdatePhyoffset): the newest file's end values."""
        last = self.last_file()
        if last is None or not last.intact():
            return 0, 0
        h = last.header
        return h.end_timestamp, h.end_phy_offset

    def query_maps(
        self,
    ) -> tuple[list[IndexFile], list[object], list[int], list[IndexHeader] | None, list[dict[int, bytes]]]:
        """What ``query_offsets`` walks, for a compiled caller that runs its loop itself (the request
        path's QUERY_MESSAGE, ``server.remoting.request_path``): (files oldest first, their maps, their
        descriptors, a writer's headers or None, their walked-segment caches), the same lists
        ``query_offsets`` would use now."""
        files = self._files
        maps = self._maps
        if maps[0] is not files:
            maps = self._maps = _query_maps(files)
        headers = [f.header for f in files] if self.writable else None
        return files, maps[1], maps[2], headers, maps[3]  # type: ignore[return-value]

    def query_offsets(
        self,
        topic: str,
        key: str,
        max_num: int,
        begin: int,
        end: int,
        *,
        budget: int = UNBOUNDED,
        resume: ResumePoint | None = None,
        deadline: int = 0,
    ) -> QueryOffsetResult:
        """The broker's ``queryOffset``: offsets newest file first, at most ``min(max_num, 64)``.

        The chain walks read at most ``budget`` index entries in all. A walk that runs out is
        answered the way the broker answers a walk cut short (its ``selectPhyOffset`` and
        ``queryOffset`` catch, log and return what they hold): the offsets found so far, the
        last-update values, and no older file searched; its ``resume`` says where it stopped.

        ``resume`` (an earlier result's, for the same arguments) continues that walk: the answer is
        the one a single call with this ``budget`` gives (``budget`` counts the entries read
        before), without reading those entries again. This is how a query the event loop started
        with a small budget is finished on a pool thread (``server.query_pool``).

        ``deadline`` (``time.monotonic_ns()``; 0 for none): the walks stop as at a spent budget once
        it has passed (the event loop's share of a query, bounded in time).
        """
        max_num = min(max_num, self.max_msgs_num_batch)
        if max_num < 0:
            raise QueryArgumentError(f"Illegal Capacity: {max_num}")
        key_hash = index_key_hash(build_index_key(topic, key))
        if resume is not None:
            if resume.query != (key_hash, max_num, begin, end):
                raise ValueError("query_offsets: a resume point of another query")
            files, file_maps, fds, headers = resume.files, resume.maps, resume.fds, resume.headers
            caches = [f.segments for f in files]
        else:
            files = self._files
            if not files:
                return QueryOffsetResult()
            # The per-file loop (size check, header rules, pruning, chain walks) is one call:
            # store.index.query_walk.query_files, compiled when built. A writer's files answer with its
            # own header state, as ``IndexFile.header`` does.
            maps = self._maps
            if maps[0] is not files:
                maps = self._maps = _query_maps(files)
            file_maps, fds, caches = maps[1], maps[2], maps[3]
            headers = [f.header for f in files] if self.writable else None
        offsets, visited, exhausted, last_ts, last_phy, events, point = query_files(
            file_maps,
            fds,
            headers,
            files[0].size,
            self.hash_slot_num,
            self.index_num,
            key_hash,
            max_num,
            begin,
            end,
            budget,
            None if resume is None else resume.point,
            deadline,
            caches,
        )
        if events:
            self._report(files, key_hash, events)
        stopped = None
        if point is not None:
            stopped = ResumePoint(files, file_maps, fds, headers, (key_hash, max_num, begin, end), point)
        return QueryOffsetResult(offsets, last_ts, last_phy, visited, exhausted, stopped)

    def _report(self, files: list[IndexFile], key_hash: int, events: list[tuple[int, int, object]]) -> None:
        """Log what a query met in each file (``query_files``' events), once per file and kind."""
        last = len(files) - 1
        for i, kind, detail in events:
            f = files[i]
            if kind == SHORT:
                # Cut short under us: reading it could fault (SIGBUS). Left out of this query.
                f.warn(
                    "short",
                    f"index file {f.path} is shorter than its {f.size} bytes now (truncated, or being "
                    "replaced by cp or >): left out of queries until it is whole again",
                )
            elif kind == HEADER_PROBLEM:
                # Garbage must neither answer nor prune the walk over the intact older files.
                header = IndexHeader(*detail)  # type: ignore[misc]
                problem = f.problem(header, last=i == last)
                f.warn("header", f"index file {f.path}: {problem}; the file is left out of queries")
            elif kind == SLOT:
                slot_value, index_count = detail  # type: ignore[misc]
                f.warn(
                    "slot",
                    f"index file {f.path}: slot {key_hash % self.hash_slot_num} points at entry "
                    f"{slot_value}, beyond indexCount {index_count}; that slot reads as empty",
                )
            elif kind == CHAIN:
                if not f.warn.seen("chain"):
                    target = f.entry(detail)[3]  # type: ignore[arg-type]
                    f.warn(
                        "chain",
                        f"index file {f.path}: entry {detail} links forward to entry {target} (a corrupt "
                        "chain); chain walks in this file stop before revisiting an entry",
                    )
            elif kind == ZEROED:
                f.warn("zero", f"index file {f.path}: entry {detail} is zeroed (damaged); chains end there")
            elif kind == OUTSIDE:
                f.warn(
                    "outside",
                    f"index file {f.path}: a chain points at entry {detail}, outside the mapped file; "
                    "chains end there",
                )

    def close(self) -> None:
        with self._lock:
            for f in self._files:
                f.close()
            self._files = []


def _query_maps(files: list[IndexFile]) -> _Maps:
    """The lists the compiled walk takes for ``files``: maps, descriptors and walked-segment caches."""
    return files, [f.buffer for f in files], [f.fd for f in files], [f.segments for f in files]
