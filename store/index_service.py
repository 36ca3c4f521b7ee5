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
from store.config import StoreConfig
from store.errors import IndexFileError, IndexGeometryError, StoreError
from store.index_file import UNBOUNDED, IndexFile, header_problem, is_time_matched
from store.warn_once import WarnOnce

_INDEX_NAME = re.compile(r"^\d+$")
log = logging.getLogger("store.index")


class QueryArgumentError(StoreError):
    """A query argument the broker rejects with an exception (answered as SYSTEM_ERROR)."""


@dataclass(slots=True)
class QueryOffsetResult:
    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0
    #: Index entries the chain walks read.
    visited: int = 0
    #: True when the walk stopped at its budget: ``phy_offsets`` holds what was found until then.
    budget_exhausted: bool = False


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
        self._lock = threading.RLock()
        #: Files left out (wrong size) or untrusted (garbage header), each logged once.
        self.warn = WarnOnce(log)
        self.skipped: dict[str, str] = {}
        self.refresh()

    # -- file list -----------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Open files that appeared, forget files that were deleted (names sorted ascending)."""
        with self._lock:
            try:
                names = sorted(n for n in os.listdir(self.index_dir) if _INDEX_NAME.match(n))
            except FileNotFoundError:
                names = []
            except OSError as exc:
                raise IndexFileError(f"cannot list index directory {self.index_dir}: {exc}") from exc
            known = {f.name: f for f in self._files}
            files: list[IndexFile] = []
            wrong: list[IndexGeometryError] = []
            sizes: set[int] = set()
            for name in names:
                f = known.pop(name, None)
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
                files.append(f)
            if wrong and not files and len(sizes) == 1:
                # Every file has the same wrong size: the configuration, not the files, is wrong.
                raise wrong[0]
            for exc in wrong:
                self.warn(str(exc), f"{exc}; left out, the other index files still answer")
            self._files = files

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
        if last is None:
            return 0, 0
        h = last.header
        return h.end_timestamp, h.end_phy_offset

    def query_offsets(
        self, topic: str, key: str, max_num: int, begin: int, end: int, *, budget: int = UNBOUNDED
    ) -> QueryOffsetResult:
        """The broker's ``queryOffset``: offsets newest file first, at most ``min(max_num, 64)``.

        The chain walks read at most ``budget`` index entries in all. A walk that runs out is
        answered the way the broker answers a walk cut short (its ``selectPhyOffset`` and
        ``queryOffset`` catch, log and return what they hold): the offsets found so far, the
        last-update values, and no older file searched.
        """
        max_num = min(max_num, self.max_msgs_num_batch)
        if max_num < 0:
            raise QueryArgumentError(f"Illegal Capacity: {max_num}")
        result = QueryOffsetResult()
        key_hash = index_key_hash(build_index_key(topic, key))
        files = self._files
        last = len(files) - 1
        for i in range(last, -1, -1):
            f = files[i]
            header = f.header
            if i == last:
                result.index_last_update_timestamp = header.end_timestamp
                result.index_last_update_phyoffset = header.end_phy_offset
            problem = header_problem(header, self.hash_slot_num, self.index_num, last=i == last)
            if problem is not None:
                # Garbage must neither answer nor prune the walk over the intact older files.
                f.warn("header", f"index file {f.path}: {problem}; the file is left out of queries")
                continue
            if is_time_matched(header, begin, end):
                left = budget - result.visited
                visited, exhausted = f.walk(
                    result.phy_offsets, key_hash, max_num, begin, end, header=header, budget=left
                )
                result.visited += visited
                if exhausted:
                    result.budget_exhausted = True
                    break
            if header.begin_timestamp < begin:
                break
            if len(result.phy_offsets) >= max_num:
                break
        return result

    def close(self) -> None:
        with self._lock:
            for f in self._files:
                f.close()
            self._files = []
