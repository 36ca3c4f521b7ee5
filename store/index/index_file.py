"""One IndexFile: the broker's hash index from ``topic#key`` to CommitLog offsets.

Layout (big-endian, preallocated to its full size, memory-mapped):

* header, 40 bytes: beginTimestamp i64, endTimestamp i64, beginPhyOffset i64, endPhyOffset i64,
  hashSlotCount i32, indexCount i32;
* ``hash_slot_num`` slots of i32: the newest entry number for keys hashing there (0 = empty);
* ``index_num`` entries of 20 bytes: keyHash i32, phyOffset i64, timeDiff i32 (seconds since
  beginTimestamp), prevIndex i32 (the older entry of the same slot, 0 = end of chain).

Entry 0 is never used (indexCount starts at 1), so a file holds ``index_num - 1`` keys. Every rule of
``putKey`` and ``selectPhyOffset`` follows the Java broker exactly, because rebuilt files must be
byte-identical to the broker's and queries must return the broker's answers; the chain walk also
refuses to revisit an entry, so a corrupt chain cannot loop.

**Safe length.** The file is mapped whole, and a map touched past the file's current end raises
SIGBUS (the process dies): ``cp new old`` and ``> old`` truncate the mapped inode before writing it
again. So whoever reads the map (the chain walk here, or compiled code handed ``buffer``) first
asks ``intact()``, which compares ``safe_length()`` (``fstat`` on the map's own descriptor, about
0.5 us) with the size the geometry gives, and leaves the file out while it is short.
``store.index.service`` does that once per file per query (its ``query_files`` call asks the same
question more cheaply: ``lseek(fd, 0, SEEK_END)`` on ``IndexFile.fd``, a descriptor of the mapped
inode kept open with the map), ``refresh()`` reopens a file whose path now names another inode and
says once that a file was deleted, cut short or zeroed.
"""

from __future__ import annotations

import array
import logging
import mmap
import os
import struct
import sys
import weakref
from pathlib import Path

from protocol.index_key import index_key_hash
from store.config.store_config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, index_file_size
from store.errors import IndexFileError, IndexGeometryError, IndexWriteError
from store.index.header import HEADER, IndexHeader, header_problem, is_time_matched
from store.index.query_walk import BUDGET, OUTSIDE, ZEROED, walk_chain
from store.platform import sigbus
from store.warn_once import WarnOnce

log = logging.getLogger("store.index")

__all__ = [
    "ENTRY",
    "HEADER",
    "SLOT",
    "UNBOUNDED",
    "IndexFile",
    "IndexHeader",
    "header_problem",
    "is_time_matched",
]

SLOT = struct.Struct(">i")
ENTRY = struct.Struct(">iqii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")

_OFF_BEGIN_TS = 0
_OFF_END_TS = 8
_OFF_BEGIN_PHY = 16
_OFF_END_PHY = 24
_OFF_SLOT_COUNT = 32
_OFF_INDEX_COUNT = 36
_INT_MAX = 2**31 - 1
#: Positions in ``IndexFile._state`` (the header's fields in its order).
_W_BEGIN_TS, _W_END_TS, _W_BEGIN_PHY, _W_END_PHY, _W_SLOTS, _W_COUNT = range(6)
#: A walk budget that never runs out (a chain visits each entry at most once).
UNBOUNDED = 2**62
#: Bytes of a writable file whose blocks are reserved at once, at least (``reserve``): one
#: ``posix_fallocate`` per step, not per key, and never the whole 420 MB of a default file for a
#: few keys.
RESERVE_STEP = 1 << 20


class IndexFile:
    """A memory-mapped IndexFile, read-only or writable (the writer keeps the header in memory)."""

    def __init__(
        self, path: Path, hash_slot_num: int, index_num: int, *, writable: bool, _fresh: bool = False
    ) -> None:
        self.path = Path(path)
        self.name = self.path.name
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.writable = writable
        self.size = index_file_size(hash_slot_num, index_num)
        self._entries_at = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE
        try:
            actual = self.path.stat().st_size
        except OSError as exc:
            raise IndexFileError(f"cannot open index file {self.path}: {exc}") from exc
        if actual != self.size:
            raise IndexGeometryError(
                f"index file {self.path} has {actual} bytes, but maxHashSlotNum={hash_slot_num} and "
                f"maxIndexNum={index_num} give {self.size} bytes: the configured geometry does not "
                "match the file"
            )
        flags = os.O_RDWR if writable else os.O_RDONLY
        try:
            fd = os.open(self.path, flags)
            try:
                st = os.fstat(fd)
                if st.st_size != self.size:
                    raise IndexFileError(f"index file {self.path} changed size while it was opened")
                access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
                self._mm: mmap.mmap = mmap.mmap(fd, self.size, access=access)
            except BaseException:
                os.close(fd)
                raise
        except OSError as exc:
            raise IndexFileError(f"cannot map index file {self.path}: {exc}") from exc
        #: Lets the SIGBUS guard cover this map; called once it is unmapped (``close``).
        self._untrack = sigbus.track(self._mm)
        #: The mapped inode: a path that names another one now was replaced (``refresh``).
        self.inode = st.st_ino
        #: A descriptor of the mapped inode, kept open for the query's size check
        #: (``store.index.query_walk.query_files``: ``lseek(fd, 0, SEEK_END)``, ~2.5x cheaper than the
        #: ``fstat`` behind ``mmap.size()``). Closed with the map: by ``close``, or, when a view still
        #: holds the map then, once the map itself is collected, so the number is never reused while
        #: the map (which a size check always holds first) can still be read.
        self.fd = fd
        self._close_fd = weakref.finalize(self._mm, os.close, fd)
        self._closed = False
        #: The chain segments the compiled key query walked in this map, to pass over the ones that
        #: cannot hold an answer or a stop for a later range (``store/index/_query_walk_core.h``,
        #: "Walked segments"; at most 4096 segments: 128 KiB, < 0.6 MiB with the dict). Filled and
        #: read by the compiled walk with the GIL held; valid only for the bytes this map holds, so
        #: emptied when the map is closed or entries are rolled back, and a file replaced by another
        #: inode gets a new object.
        self.segments: dict[int, bytes] = {}
        #: The last header judged by ``problem()`` and the verdict: (header, last, problem).
        self._judged: tuple[IndexHeader, bool, str | None] | None = None
        #: Problems met while reading this file, each logged once (see ``store.warn_once``).
        self.warn = WarnOnce(log)
        # Writer state, mirroring the broker's in-memory IndexHeader (loaded files: indexCount <= 0 -> 1):
        # begin/end timestamp, begin/end offset, slot count, index count (the ``_W_*`` positions),
        # in an ``array`` the compiled range indexer reads and writes in place (``compiled_writer``).
        h = self.read_header()
        count = 1 if _fresh or h.index_count <= 0 else h.index_count
        self._state = array.array(
            "q",
            (
                h.begin_timestamp,
                h.end_timestamp,
                h.begin_phy_offset,
                h.end_phy_offset,
                h.hash_slot_count,
                count,
            ),
        )
        #: What ``store/index/_index_range_fast.c`` writes through, taken with one attribute read
        #: per call: (the writer state, the map, hash_slot_num, index_num); None when the file is
        #: read-only or closed. Before, each call asked for five attributes and called
        #: ``writer_state`` and ``set_writer_state`` (~12k instructions a settle, h50).
        self.compiled_writer: tuple[array.array[int], mmap.mmap, int, int] | None = (
            (self._state, self._mm, hash_slot_num, index_num) if writable else None
        )
        #: Bytes from the start of the file whose blocks this writer reserved (``reserve``).
        self._reserved = 0

    # -- opening -----------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, hash_slot_num: int, index_num: int, *, writable: bool = False) -> IndexFile:
        """Map an existing IndexFile; its size must match the configured geometry."""
        return cls(path, hash_slot_num, index_num, writable=writable)

    @classmethod
    def create(
        cls,
        path: Path,
        hash_slot_num: int,
        index_num: int,
        *,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
    ) -> IndexFile:
        """Create a zero-filled, full-size file; a successor takes the previous end values as begin/end."""
        size = index_file_size(hash_slot_num, index_num)
        # The header, the slots and a first step of entries get their blocks before the file is
        # mapped (on a full tmpfs even reading a hole through the map faults); a file that cannot
        # have them is removed, and created again by the next pass once there is room.
        first = min(size, INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE + RESERVE_STEP)
        try:
            with open(path, "xb") as fh:
                try:
                    fh.truncate(size)
                    _reserve(fh.fileno(), path, 0, first)
                except BaseException:
                    path.unlink(missing_ok=True)
                    raise
        except OSError as exc:
            raise IndexFileError(f"cannot create index file {path}: {exc}") from exc
        f = cls(path, hash_slot_num, index_num, writable=True, _fresh=True)
        f._reserved = first
        if end_phy_offset > 0:
            f._state[_W_BEGIN_PHY] = f._state[_W_END_PHY] = end_phy_offset
            f._put_i64(_OFF_BEGIN_PHY, end_phy_offset)
            f._put_i64(_OFF_END_PHY, end_phy_offset)
        if end_timestamp > 0:
            f._state[_W_BEGIN_TS] = f._state[_W_END_TS] = end_timestamp
            f._put_i64(_OFF_BEGIN_TS, end_timestamp)
            f._put_i64(_OFF_END_TS, end_timestamp)
        return f

    # -- reading -----------------------------------------------------------------------------------

    def safe_length(self) -> int:
        """Bytes of the map that can be read now: the file's current size (at most ``size``)."""
        if self._closed:
            return 0
        try:
            now = self._mm.size()
        except (OSError, ValueError):
            return 0
        return now if now < self.size else self.size

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called (its map is gone: nothing can be read or written)."""
        return self._closed

    def intact(self) -> bool:
        """The whole map can be read now (the file was not cut short under it); see the docstring."""
        return self.safe_length() >= self.size

    def problem(self, header: IndexHeader, *, last: bool) -> str | None:
        """``header_problem`` for this file's geometry, remembered for the header it was asked about.

        Every query asks it of every file it searches, and a file's header changes only while a
        writer fills it: an equal header (six ints compared) gets the same verdict without the checks.
        """
        judged = self._judged
        if judged is not None and judged[1] is last and judged[0] == header:
            return judged[2]
        problem = header_problem(header, self.hash_slot_num, self.index_num, last=last)
        self._judged = (header, last, problem)
        return problem

    def read_header(self) -> IndexHeader:
        """The header as it is in the file now (a live broker may be updating it)."""
        return IndexHeader(*HEADER.unpack_from(self._mm, 0))

    def index_count_as_written(self) -> int | None:
        """The writer's index count when the file's header bytes are exactly the writer's own state
        (what ``put_hash`` and the compiled range loop write there), else None: the audit after
        every put of a writable store compares the two headers (``IndexService.audit``), and equal
        bytes answer it without building either as an ``IndexHeader``; any difference is left to
        that comparison."""
        if not self.writable:
            return None
        ours = HEADER.pack(*self._state)
        return self._state[_W_COUNT] if self._mm[: HEADER.size] == ours else None

    @property
    def header(self) -> IndexHeader:
        """The header: the writer's own state when writable, else the file's."""
        if self.writable:
            return IndexHeader(*self._state)
        return self.read_header()

    @property
    def index_count(self) -> int:
        return self.header.index_count

    @property
    def end_phy_offset(self) -> int:
        return self._state[_W_END_PHY] if self.writable else self.read_header().end_phy_offset

    @property
    def end_timestamp(self) -> int:
        return self.header.end_timestamp

    @property
    def begin_timestamp(self) -> int:
        return self.header.begin_timestamp

    def is_write_full(self) -> bool:
        if self.writable:
            return self._state[_W_COUNT] >= self.index_num
        return self.read_header().index_count >= self.index_num

    def is_time_matched(self, begin: int, end: int) -> bool:
        return is_time_matched(self.header, begin, end)

    @property
    def buffer(self) -> mmap.mmap:
        """The mapped file (for whole-file checks such as ``store.check.index_files``)."""
        return self._mm

    def entry(self, index_no: int) -> tuple[int, int, int, int]:
        """Entry ``index_no`` as (keyHash, phyOffset, timeDiff, prevIndex)."""
        if not 0 <= index_no < self.index_num:
            raise IndexError(index_no)
        return ENTRY.unpack_from(self._mm, self._entries_at + index_no * INDEX_ENTRY_SIZE)

    def slot(self, slot_no: int) -> int:
        return SLOT.unpack_from(self._mm, INDEX_HEADER_SIZE + slot_no * INDEX_SLOT_SIZE)[0]

    def select_phy_offsets(
        self,
        out: list[int],
        key: str,
        max_num: int,
        begin: int,
        end: int,
        *,
        header: IndexHeader | None = None,
    ) -> None:
        """Append to ``out`` the offsets of entries whose hash matches ``key`` within ``[begin, end]``."""
        self.select_by_hash(out, index_key_hash(key), max_num, begin, end, header=header)

    def select_by_hash(
        self,
        out: list[int],
        key_hash: int,
        max_num: int,
        begin: int,
        end: int,
        *,
        header: IndexHeader | None = None,
    ) -> int:
        """The broker's ``selectPhyOffset`` walk; returns the number of entries visited (chain length)."""
        return self.walk(out, key_hash, max_num, begin, end, header=header)[0]

    def walk(
        self,
        out: list[int],
        key_hash: int,
        max_num: int,
        begin: int,
        end: int,
        *,
        header: IndexHeader | None = None,
        budget: int = UNBOUNDED,
        checked_length: int | None = None,
    ) -> tuple[int, bool]:
        """``select_by_hash`` visiting at most ``budget`` entries: (visited, True if the budget ran out).

        The loop itself is ``store.index.query_walk.walk_chain`` (compiled when built, GIL released); this
        method reads the slot, hands the loop the file's checked length, and logs what the loop met.
        ``checked_length`` is what a caller that just asked ``intact()`` knows can be read (``size``);
        without it the length is checked here (``safe_length``).
        """
        length = self.safe_length() if checked_length is None else checked_length
        if length < INDEX_HEADER_SIZE + self.hash_slot_num * INDEX_SLOT_SIZE:
            return 0, False  # the slots themselves are gone: nothing can be read
        h = header if header is not None else self.header
        index_count = h.index_count
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * INDEX_SLOT_SIZE
        slot_value = SLOT.unpack_from(self._mm, slot_pos)[0]
        if slot_value <= 0 or slot_value > index_count or index_count <= 1:
            if slot_value > index_count > 1:
                self.warn(
                    "slot",
                    f"index file {self.path}: slot {key_hash % self.hash_slot_num} points at entry "
                    f"{slot_value}, beyond indexCount {index_count}; that slot reads as empty",
                )
            return 0, False
        found, visited, stop, stop_entry, forward = walk_chain(
            self._mm,
            length,
            self._entries_at,
            slot_value,
            key_hash,
            index_count,
            min(index_count, self.index_num - 1),
            h.begin_timestamp,
            h.begin_phy_offset,
            begin,
            end,
            max_num - len(out),
            budget,
        )
        out.extend(found)
        if forward and not self.warn.seen("chain"):
            target = self.entry(forward)[3]
            self.warn(
                "chain",
                f"index file {self.path}: entry {forward} links forward to entry {target} (a corrupt "
                "chain); chain walks in this file stop before revisiting an entry",
            )
        if stop == ZEROED:
            self.warn(
                "zero",
                f"index file {self.path}: entry {stop_entry} is zeroed (damaged); chains end there",
            )
        elif stop == OUTSIDE:
            self.warn(
                "outside",
                f"index file {self.path}: a chain points at entry {stop_entry}, outside the mapped file; "
                "chains end there",
            )
        return visited, stop == BUDGET

    # -- writing -----------------------------------------------------------------------------------

    def _put_i64(self, pos: int, value: int) -> None:
        _I64.pack_into(self._mm, pos, value)

    def _put_i32(self, pos: int, value: int) -> None:
        _I32.pack_into(self._mm, pos, value)

    def reserve(self, entries: int) -> None:
        """Reserve the blocks of the header, the slots and the next ``entries`` entries (at least a
        ``RESERVE_STEP`` more of the file, at most all of it) before they are written.

        Writes go through a shared map of a sparse file (the broker creates its IndexFiles so, and so
        does ``create``): a store into a page without blocks allocates one at the fault, and on a
        full disk that fault is SIGBUS, which kills the process. ``posix_fallocate`` asks for the
        blocks while a refusal is still an error: ``IndexWriteError``, nothing written. Data already
        in the file is untouched (only holes get blocks)."""
        want = self._entries_at + (self._state[_W_COUNT] + entries) * INDEX_ENTRY_SIZE
        if want <= self._reserved:
            return
        want = min(self.size, max(want, self._reserved + RESERVE_STEP))
        if want <= self._reserved:
            return  # the whole file is reserved: a full file rolls, it is not written past its end
        _reserve(self.fd, self.path, self._reserved, want)
        self._reserved = want

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """The broker's ``putKey``; False when the file is full (the caller rolls to a new file)."""
        return self.put_hash(index_key_hash(key), phy_offset, store_timestamp)

    def put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """``putKey`` for an already computed key hash (the builder's hot path)."""
        if not self.writable:
            raise IndexFileError(f"index file {self.path} is open read-only")
        index_count = self._state[_W_COUNT]
        if index_count >= self.index_num:
            return False
        entry_pos = self._entries_at + index_count * INDEX_ENTRY_SIZE
        if entry_pos + INDEX_ENTRY_SIZE > self._reserved:
            self.reserve(1)  # before the slot is read: on a full tmpfs even reading a hole faults
        mm = self._mm
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * INDEX_SLOT_SIZE
        slot_value = SLOT.unpack_from(mm, slot_pos)[0]
        empty = slot_value <= 0 or slot_value > index_count
        if empty:
            slot_value = 0
        begin_ts = self._state[_W_BEGIN_TS]
        if begin_ts <= 0:
            time_diff = 0
        else:
            delta = store_timestamp - begin_ts
            # Java's long division truncates toward zero.
            time_diff = delta // 1000 if delta >= 0 else -((-delta) // 1000)
            if time_diff > _INT_MAX:
                time_diff = _INT_MAX
            elif time_diff < 0:
                time_diff = 0
        ENTRY.pack_into(mm, entry_pos, key_hash, phy_offset, time_diff, slot_value)
        SLOT.pack_into(mm, slot_pos, index_count)
        if index_count <= 1:
            self._state[_W_BEGIN_PHY] = phy_offset
            self._state[_W_BEGIN_TS] = store_timestamp
        if empty:
            self._state[_W_SLOTS] += 1
        self._state[_W_COUNT] = index_count + 1
        self._state[_W_END_PHY] = phy_offset
        self._state[_W_END_TS] = store_timestamp
        self._write_header()
        return True

    def writer_state(self) -> tuple[int, int, int, int, int, int]:
        """The writer's header state (begin/end timestamp, begin/end offset, slot count, index count).

        A copy: the compiled range indexer (``store/index/_index_range_fast.c``) reads and writes the
        state itself, in place, through ``compiled_writer``.
        """
        begin_ts, end_ts, begin_phy, end_phy, slots, count = self._state
        return begin_ts, end_ts, begin_phy, end_phy, slots, count

    def set_writer_state(
        self, begin_ts: int, end_ts: int, begin_phy: int, end_phy: int, slot_count: int, index_count: int
    ) -> None:
        """Set the writer's header state (``writer_state``'s order) after puts made on the mapped file
        directly by a caller that kept the state itself."""
        self._state[_W_BEGIN_TS], self._state[_W_END_TS] = begin_ts, end_ts
        self._state[_W_BEGIN_PHY], self._state[_W_END_PHY] = begin_phy, end_phy
        self._state[_W_SLOTS], self._state[_W_COUNT] = slot_count, index_count

    def _write_header(self) -> None:
        HEADER.pack_into(self._mm, 0, *self._state)

    def written_end(self, start: int | None = None) -> int:
        """One past the last entry holding any bytes, counting from ``indexCount`` (torn puts leave
        some), or from ``start`` when the header's count cannot be trusted.

        Never past the file: a damaged header's ``indexCount`` (say 2^31-1) must not make ``rollback``
        zero, or allocate, gigabytes beyond it.
        """
        n = min(max(self._state[_W_COUNT] if start is None else start, 1), self.index_num)
        while n < self.index_num and any(self.entry(n)):
            n += 1
        return n

    def rollback(
        self, keep: int, end_phy_offset: int, end_timestamp: int, *, begin: tuple[int, int] | None = None
    ) -> int:
        """Forget entries ``keep`` and later, as if they had never been put; returns how many went.

        Undone entries (and those past ``indexCount`` a torn put left behind) are zeroed, as a clean
        build has zeros there; the slots are rebuilt from the kept entries and the header takes the
        given end values of the last kept entry's record and the recounted used slots. The result is
        the file a clean build would have written up to entry ``keep - 1``, even when a crash lost
        the links of the undone entries. ``begin`` (the first entry's record offset and store time)
        replaces begin values that a damaged header no longer holds.
        """
        if not self.writable:
            raise IndexFileError(f"index file {self.path} is open read-only")
        self.segments.clear()  # entries are rewritten in place: what was walked is no longer known
        keep = max(keep, 1)
        mm = self._mm
        # A count outside the file is garbage: the torn entries, if any, follow the last kept one.
        count_ok = 1 <= self._state[_W_COUNT] <= self.index_num
        top = self.written_end(None if count_ok else keep)
        if top > keep:
            mm[self._entries_at + keep * INDEX_ENTRY_SIZE : self._entries_at + top * INDEX_ENTRY_SIZE] = (
                bytes((top - keep) * INDEX_ENTRY_SIZE)
            )
        # Every slot names the newest kept entry of its hash (what each put left there), so the
        # slots are rebuilt from the entries: that also mends slots whose entries were lost.
        slots = array.array("i", bytes(self.hash_slot_num * INDEX_SLOT_SIZE))
        n_slots = self.hash_slot_num
        kept = mm[self._entries_at + INDEX_ENTRY_SIZE : self._entries_at + keep * INDEX_ENTRY_SIZE]
        for n, (key_hash, _phy, _diff, _prev) in enumerate(ENTRY.iter_unpack(kept), start=1):
            slots[key_hash % n_slots] = n
        used = sum(1 for v in slots if v)
        if sys.byteorder == "little":
            slots.byteswap()
        mm[INDEX_HEADER_SIZE : self._entries_at] = slots.tobytes()
        gone = max(top - keep, 0)
        self._state[_W_COUNT] = keep
        self._state[_W_SLOTS] = used
        if keep <= 1:
            # An empty file keeps only the begin/end values it was created with.
            self._state[_W_BEGIN_PHY] = self._state[_W_END_PHY] = end_phy_offset
            self._state[_W_BEGIN_TS] = self._state[_W_END_TS] = end_timestamp
        else:
            self._state[_W_END_PHY] = end_phy_offset
            self._state[_W_END_TS] = end_timestamp
            if begin is not None:
                self._state[_W_BEGIN_PHY], self._state[_W_BEGIN_TS] = begin
        self._write_header()
        return gone

    def release(self) -> None:
        """Drop this process's mapping of the pages touched so far; their data stays in the file.

        Safe for a writable file too: the map is shared, so written pages live in the page cache
        and a later access maps them back with their contents (``madvise(2)``, MADV_DONTNEED on a
        shared file mapping). Without this, ``serve --build-index`` kept every index page its
        queries and its builder touched resident.
        """
        if not self._closed:
            try:
                self._mm.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):
                pass

    def flush(self) -> None:
        if self.writable and not self._closed:
            self._mm.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.compiled_writer = None
        self.segments.clear()
        try:
            if self.writable:
                self._mm.flush()
            self._mm.close()
        except (BufferError, ValueError, OSError):
            # A view handed out earlier still references the map; the GC unmaps it later (and the
            # guard's release runs then).
            pass
        else:
            self._untrack()
            self._close_fd()

    def __repr__(self) -> str:
        return f"IndexFile({self.path!s}, {self.header})"


def _reserve(fd: int, path: Path, start: int, end: int) -> None:
    """``posix_fallocate`` bytes ``[start, end)`` of an IndexFile, or ``IndexWriteError``."""
    try:
        os.posix_fallocate(fd, start, end - start)
    except OSError as exc:
        raise IndexWriteError(
            f"index file {path}: cannot reserve bytes {start}..{end} for new keys: "
            f"{exc.strerror or exc}; nothing written, the keys are indexed once there is room"
        ) from exc
