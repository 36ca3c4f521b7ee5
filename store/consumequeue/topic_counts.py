"""The store's topics and their queue counts, kept current instead of re-read per request (issue 30).

Every route, pull check, GET_TOPIC_STATS_INFO, page and scrape asks "which topics, with how many
queues": ``config/topics.json`` (the broker's ``TopicConfigManager`` file) over the ``consumequeue``
directories (highest queue id + 1, for topics the file does not list). Reading both per request cost
O(topics) each time, so a scrape that asked once per topic was O(topics²): 375 s at 3,000 topics.

Here the answer is one dict, rebuilt only when a source changed, and patched in O(1) for the changes
this process makes itself:

- ``topics.json`` is re-parsed only when its (inode, size, mtime) changed, or its ``.bak``'s, or
  its journal's (a writable server of ours appends a change there first, the file is rewritten
  later): a broker beside us rewrites it per topic creation, so at most once per look. It is read
  as the broker loads it (the ``.bak`` when the file is missing or broken) with the journal
  replayed over it (``store.config.topics.read_listed_topics``). A writable store hands its in-memory
  table over instead (``follow_table``): the file is then ours and never read back, and each put or
  removal patches the answer.
- The ``consumequeue`` directory is listed again only when its own mtime changed (a topic directory
  added or removed); a topic's queue ids are listed when it first appears, and again when its
  directory's mtime changed, only for the topics ``topics.json`` does not list (for the others the
  file's counts win, so their queue directories do not matter). A writable store's consume queue
  builder tells of each queue it creates (``note_queue``) and the directories are not followed.

The dict handed out must not be changed by the caller; it is replaced, never mutated, when a source
is re-read, and patched in place only for single-topic changes (a new key or a new value), which
readers that index it see at once.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from store.config.journal import journal_path
from store.config.topics import read_listed_topics

__all__ = ["TopicCounts", "TopicQueueNums", "read_topics_json"]


@dataclass(frozen=True, slots=True)
class TopicQueueNums:
    read: int
    write: int


def _count(value: object) -> int:
    """A queue count field, the broker's ``TopicConfig`` default (16) when absent or not an int."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 16


def read_topics_json(path: Path) -> dict[str, TopicQueueNums]:
    """topic -> queue counts of the topic table a broker's ``topics.json`` holds: the file (or its
    ``.bak``) with our writable server's journal replayed (``read_listed_topics``); empty when
    there is none."""
    return {
        name: TopicQueueNums(_count(conf.get("readQueueNums")), _count(conf.get("writeQueueNums")))
        for name, conf in read_listed_topics(path).items()
    }


def _listed_stamp(path: Path) -> tuple[tuple[int, int, int] | None, ...]:
    """What ``read_topics_json`` reads, as (inode, size, mtime) of the file and of its journal: the
    table is read again when either changed (a writable server beside us appends its changes to the
    journal and rewrites the file later). The ``.bak`` is not looked at: it changes only as a whole
    write renames the file there and a new file in (the broker's ``string2File`` and ours), which
    the file's own stamp shows."""
    return (_stamp(path), _stamp(journal_path(path)))


def _stamp(path: Path | str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _queue_ids(path: str) -> int:
    """Highest numeric sub-directory + 1 of a topic directory (0 when none)."""
    try:
        ids = [int(e.name) for e in os.scandir(path) if e.name.isdigit() and e.is_dir()]
    except OSError:
        return 0
    return max(ids) + 1 if ids else 0


#: Seconds between two looks at the directories of the topics ``topics.json`` does not list.
RECHECK_EVERY = 1.0
#: ``has_dir`` answers from the last look while it is younger than this (seconds).
HAS_DIR_LOOK_EVERY = 0.05

#: What a writable store's topic table tells of one topic: its (read, write) counts, None if removed.
TopicChange = Callable[[str, "tuple[int, int] | None"], None]


class TopicCounts:
    """topic -> (read, write) queue counts from ``topics.json`` (or a live table) over the directories."""

    def __init__(self, topics_json: Path, consumequeue_root: Path) -> None:
        self.topics_json = topics_json
        self.root = consumequeue_root
        self._lock = threading.RLock()
        #: From the file (or the live table): these win over the directories.
        self._listed: dict[str, TopicQueueNums] = {}
        self._listed_stamp: tuple[tuple[int, int, int] | None, ...] | None = None
        #: Read from the directories: topic -> (queue count, the topic directory's mtime_ns).
        self._dirs: dict[str, tuple[int, int]] = {}
        self._root_stamp: tuple[int, int, int] | None = None
        #: A live table is the listed source (``follow_table``): the file is not read.
        self._live = False
        #: The directories are followed by looking (read-only), not told (``note_queue``).
        self._follow_dirs = True
        #: The answer: ``_dirs`` overlaid by ``_listed``.
        self._merged: dict[str, TopicQueueNums] = {}
        #: Bumped whenever the answer changes, for callers that cache something derived from it.
        self.version = 0
        self._loaded = False
        #: Topics with directories that ``_listed`` lacks (their directories are looked at), and when
        #: they are next looked at.
        self._unlisted: list[str] = []
        self._next_recheck = 0.0
        #: When ``counts`` last looked (``has_dir`` looks again when that is over a moment old).
        self._last_look = float("-inf")

    # -- sources -------------------------------------------------------------------------------------

    def follow_table(self, topics: dict[str, tuple[int, int]]) -> None:
        """A writable store's own table is the listed source from now on (given whole, once); its
        later changes come through ``table_changed``. The directories are then told, not looked at."""
        with self._lock:
            self._live = True
            self._follow_dirs = False
            self._listed = {name: TopicQueueNums(r, w) for name, (r, w) in topics.items()}
            if not self._loaded:
                self._scan_root()
                self._loaded = True
            self._rebuild()

    def table_changed(self, topic: str, nums: tuple[int, int] | None) -> None:
        """One topic of the live table was put (``nums``) or removed (None): O(1)."""
        with self._lock:
            if nums is None:
                self._listed.pop(topic, None)
                from_dir = self._dirs.get(topic)
                if from_dir is not None and from_dir[0] > 0:
                    self._merged[topic] = TopicQueueNums(from_dir[0], from_dir[0])
                else:
                    self._merged.pop(topic, None)
            else:
                value = TopicQueueNums(*nums)
                self._listed[topic] = value
                self._merged[topic] = value
            self.version += 1

    def note_queue(self, topic: str, queue_id: int) -> None:
        """A consume queue directory this process is creating (a writable store's builder): O(1)."""
        with self._lock:
            count, mtime = self._dirs.get(topic, (0, 0))
            if queue_id + 1 <= count:
                return
            self._dirs[topic] = (queue_id + 1, mtime)
            if topic not in self._listed:
                self._merged[topic] = TopicQueueNums(queue_id + 1, queue_id + 1)
                self.version += 1

    def forget_dirs(self, topic: str) -> None:
        """A topic's consume queue directory this process removed (a deleted topic): O(1). Its
        counts stay only while the listed source (``topics.json`` or the live table) has it."""
        with self._lock:
            if self._dirs.pop(topic, None) is None:
                return
            if topic not in self._listed:
                self._merged.pop(topic, None)
            if topic in self._unlisted:
                self._unlisted.remove(topic)
            self.version += 1

    # -- looking -------------------------------------------------------------------------------------

    def counts(self) -> dict[str, TopicQueueNums]:
        """topic -> counts, after a look at whatever sources are followed (two ``stat`` calls when
        nothing changed). The dict is shared: do not change it."""
        with self._lock:
            self._last_look = time.monotonic()
            if not self._loaded:
                self._load()
            else:
                self._look()
            return self._merged

    def get(self, topic: str) -> TopicQueueNums | None:
        return self.counts().get(topic)

    def has_dir(self, topic: str) -> bool:
        """Whether ``topic`` has a consume queue directory, as last seen (a look is taken when the
        last is over ``HAS_DIR_LOOK_EVERY`` old): lets a reader skip the ``stat`` of each queue
        directory of a topic that has none (a scrape at 50,000 topics made 200,000 of them). A
        directory made since the last look reads as absent until the next: an empty queue, as a
        request a moment earlier would have found."""
        if topic in self._dirs:
            return True
        now = time.monotonic()
        if now - self._last_look < HAS_DIR_LOOK_EVERY:
            return False
        self.counts()
        return topic in self._dirs

    def _load(self) -> None:
        self._loaded = True
        if not self._live:
            self._listed_stamp = _listed_stamp(self.topics_json)
            self._listed = read_topics_json(self.topics_json)
        self._scan_root()
        self._rebuild()

    def _look(self) -> None:
        changed = False
        if not self._live:
            listed = _listed_stamp(self.topics_json)
            if listed != self._listed_stamp:
                self._listed_stamp = listed
                old = self._listed
                self._listed = read_topics_json(self.topics_json)
                # A topic the file no longer lists falls back to its directories: count them again.
                for name in old.keys() - self._listed.keys():
                    if name in self._dirs:
                        self._dirs[name] = self._read_dir(name)
                changed = True
        if self._follow_dirs:
            stamp = _stamp(self.root)
            if stamp != self._root_stamp:
                self._scan_root()
                changed = True
            elif time.monotonic() >= self._next_recheck and self._recheck_unlisted():
                changed = True
        if changed:
            self._rebuild()

    def _read_dir(self, name: str) -> tuple[int, int]:
        path = os.path.join(self.root, name)
        stamp = _stamp(path)
        return (_queue_ids(path), 0 if stamp is None else stamp[2])

    def _scan_root(self) -> None:
        """List the topic directories (names only); the queue ids of the new ones."""
        self._root_stamp = _stamp(self.root)
        try:
            names = [e.name for e in os.scandir(self.root) if e.is_dir()]
        except OSError:
            names = []
        old = self._dirs
        found: dict[str, tuple[int, int]] = {}
        for name in names:
            known = old.get(name)
            found[name] = known if known is not None else self._read_dir(name)
        if not self._follow_dirs:
            # Told of queues being created (``note_queue``) before their directory showed up here.
            for name, value in old.items():
                if name not in found:
                    found[name] = value
        self._dirs = found

    def _recheck_unlisted(self) -> bool:
        """A queue directory added under a topic ``topics.json`` does not list changes that topic's
        directory only: look at those (normally few: topics are listed; a store without the file
        has them all, so this look is made at most once per ``RECHECK_EVERY``)."""
        self._next_recheck = time.monotonic() + RECHECK_EVERY
        changed = False
        for name in self._unlisted:
            count, mtime = self._dirs.get(name, (0, 0))
            path = os.path.join(self.root, name)
            stamp = _stamp(path)
            if stamp is None or stamp[2] == mtime:
                continue
            self._dirs[name] = (_queue_ids(path), stamp[2])
            changed = changed or self._dirs[name][0] != count
        return changed

    def _rebuild(self) -> None:
        merged = {name: TopicQueueNums(n, n) for name, (n, _) in self._dirs.items() if n > 0}
        merged.update(self._listed)
        self._merged = merged
        listed = self._listed
        self._unlisted = [name for name in self._dirs if name not in listed]
        self.version += 1
