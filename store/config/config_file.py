"""Writing and reading the broker's ``config/*.json`` files as its ``ConfigManager`` does.

The broker writes each file whole: the new text to ``<name>.tmp``, the current file copied to
``<name>.bak``, then the temporary file renamed over it; it reads the file and, when that is missing,
empty or does not decode, the ``.bak`` (``ConfigManager.load`` and ``loadBak``). Doing the same here
means a crash mid-write leaves the old file or the new one, a store moved between this server and a
real broker keeps its fallback copy, and a file the broker would start from is one this server
starts from too. One difference, on purpose: when neither copy decodes the broker starts with an
empty table (offsets and groups silently gone); here that is an error, so nothing is overwritten.

fastjson, which writes them, prints a map with integer keys unquoted (``{0:12,1:3}``), which is not
JSON; ``relaxed_json`` quotes such keys so a standard decoder reads them.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import shutil
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import msgspec

from protocol.index_key import java_string_hash
from protocol.java_hashmap import hashmap_order_by_hash
from store.errors import StoreError
from store.whole_file import replace_whole

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_E = TypeVar("_E")

#: An unquoted integer object key, after ``{`` or ``,`` (fastjson's ``Map<Integer, ...>``).
_BARE_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def concurrent_map_order(keys: Iterable[str], initial_buckets: int) -> list[str]:
    """``keys`` (in insertion order) as the broker's ``ConcurrentHashMap`` of ``initial_buckets``
    buckets iterates them: by hash bucket, the table doubling each time it reaches three quarters
    full, as the map resizes (``sizeCtl``). fastjson writes the broker's tables in this order."""
    key_list = list(keys)
    buckets = initial_buckets
    while len(key_list) >= buckets - (buckets >> 2):
        buckets <<= 1
    return hashmap_order_by_hash(key_list, java_string_hash, buckets)


class KeptLayout(Generic[_E]):
    """A table's entries in the order the broker's ``ConcurrentHashMap`` writes them (by hash
    bucket, each bucket in its nodes' order: ``concurrent_map.ConcurrentMapOrder``, the table's own
    model of that order), each with its text in the file, kept between writes of the file.

    Written from scratch, a table of 50,000 topics or groups was ordered and formatted again for
    every change, ~300 ms on a busy machine, and a topic-creating SEND waits for that write (issue
    30). Here a write applies only what changed since the last one (``apply``): a new entry goes to
    the end of its bucket (bisection), a changed one keeps its place, a removed one leaves. When the
    map grew in between (its ``transfer`` reorders buckets) or the table changed other than through
    the recorded puts and removals, everything is made again (``rebuild``) in the model's order.
    """

    def __init__(self, entry_text: Callable[[str, _E], str]) -> None:
        self.entry_text = entry_text
        self.buckets = 0
        self.names: list[str] = []
        #: Each name's bucket, in the same order (non-decreasing).
        self.keys: list[int] = []
        self.texts: list[str] = []
        self.present: set[str] = set()

    def _bucket(self, name: str) -> int:
        h = java_string_hash(name) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (self.buckets - 1)

    def follows(self, events: list[tuple[bool, str]], size: int, buckets: int) -> bool:
        """Can ``apply`` bring the kept layout to a table of ``size`` entries in ``buckets`` buckets
        after ``events`` (``(True, name)`` a put, ``(False, name)`` a removal, in the order they
        happened)? Not when the map grew since the last write (its length changed)."""
        if self.buckets == 0 or buckets != self.buckets:
            return False
        present = len(self.present)
        seen: dict[str, bool] = {}
        for put, name in events:
            was = seen.get(name, name in self.present)
            if put and not was:
                present += 1
            elif not put and was:
                present -= 1
            seen[name] = put
        return present == size

    def rebuild(self, entries: dict[str, _E], buckets: int) -> None:
        """Everything again from the whole table, ``entries`` in the map's iteration order."""
        self.buckets = buckets
        self.names = list(entries)
        self.keys = [self._bucket(name) for name in self.names]
        self.texts = [self.entry_text(name, entries[name]) for name in self.names]
        self.present = set(self.names)

    def apply(self, events: list[tuple[bool, str]], now: Mapping[str, _E | None]) -> None:
        """Replay the puts and removals since the last write; texts are of the entries ``now``."""
        for put, name in events:
            key = self._bucket(name)
            at = self._find(name, key) if name in self.present else None
            if not put:
                if at is not None:
                    del self.names[at], self.keys[at], self.texts[at]
                    self.present.discard(name)
                continue
            entry = now.get(name)
            if entry is None:
                continue  # removed again later: its removal follows
            if at is None:
                at = bisect.bisect_right(self.keys, key)
                self.names.insert(at, name)
                self.keys.insert(at, key)
                self.texts.insert(at, self.entry_text(name, entry))
                self.present.add(name)
            else:
                self.texts[at] = self.entry_text(name, entry)

    def _find(self, name: str, key: int) -> int:
        at = bisect.bisect_left(self.keys, key)
        while self.names[at] != name:
            at += 1
        return at


class _JsonEntry(Protocol):
    def to_json(self) -> dict[str, object]: ...


class CompactBody:
    """A config table as its manager's ``encode()`` answers it (compact fastjson: ``dataVersion``,
    then the table under ``table_key`` in the order given), each entry's text kept while it is the
    same object and the whole body while the data version and size are unchanged (issue 30: at
    50,000 topics or groups the body is megabytes). Safe from any thread."""

    def __init__(self, table_key: str) -> None:
        self.table_key = table_key
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[object, str]] = {}
        self._body: tuple[tuple[int, int, int], bytes] | None = None

    def body(self, counter: int, timestamp: int, entries: Mapping[str, _JsonEntry]) -> bytes:
        key = (counter, timestamp, len(entries))
        with self._lock:
            if self._body is not None and self._body[0] == key:
                return self._body[1]
            texts = []
            kept: dict[str, tuple[object, str]] = {}
            for name, entry in entries.items():
                found = self._entries.get(name)
                if found is not None and found[0] is entry:
                    text = found[1]
                else:
                    fields = ",".join(f"{json_text(k)}:{json_text(v)}" for k, v in entry.to_json().items())
                    text = f"{json_text(name)}:{{{fields}}}"
                kept[name] = (entry, text)
                texts.append(text)
            self._entries = kept
            body = (
                f'{{"dataVersion":{{"counter":{counter},"timestamp":{timestamp}}},'
                f'"{self.table_key}":{{{",".join(texts)}}}}}'
            ).encode()
            self._body = (key, body)
            return body


_COMPACT_BODIES: weakref.WeakKeyDictionary[object, CompactBody] = weakref.WeakKeyDictionary()


def compact_body_of(table: object, table_key: str) -> CompactBody:
    """The ``CompactBody`` kept for ``table`` (made on first use, gone with the table)."""
    found = _COMPACT_BODIES.get(table)
    if found is None:
        found = _COMPACT_BODIES.setdefault(table, CompactBody(table_key))
    return found


def relaxed_json(text: str) -> object:
    """``text`` decoded, integer keys written bare by fastjson included; ``StoreError`` if not JSON."""
    try:
        return msgspec.json.decode(_BARE_KEY.sub(r'\1"\2"\3', text))
    except msgspec.DecodeError as exc:
        raise StoreError(f"not JSON: {exc}") from exc


def read_config_text(path: Path) -> str | None:
    """The file's text, or its ``.bak``'s when the file is missing or empty; None when neither is."""
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"cannot read {candidate}: {exc}") from exc
        if text.strip():
            return text
    return None


def load_config(path: Path, parse: Callable[[object], _T]) -> _T | None:
    """``parse`` of the file's JSON, else of its ``.bak``'s, as the broker loads a config file.

    A copy that is missing or empty is skipped; one that is not JSON, or that ``parse`` refuses
    (``StoreError``), is logged and the ``.bak`` tried. None when neither copy has any text;
    ``StoreError`` naming both when text was found but none of it could be read.
    """
    failures: list[str] = []
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            failures.append(f"cannot read {candidate}: {exc}")
            continue
        if not text.strip():
            continue
        try:
            value = parse(relaxed_json(text))
        except StoreError as exc:
            failures.append(f"{candidate}: {exc}")
            log.warning("cannot load %s: %s", candidate, exc)
            continue
        if failures:
            log.warning("loaded %s instead", candidate)
        return value
    if failures:
        raise StoreError("; ".join(failures))
    return None


def write_config_text(path: Path, text: str) -> None:
    """Replace the file with ``text`` (synced), keeping the previous one as ``.bak``; one save of a
    path at a time (``store.whole_file``), its ``.bak`` made under the same lock."""
    replace_whole(path, text.encode("utf-8"), lambda: _keep_as_bak(path) if path.exists() else None)


def _keep_as_bak(path: Path) -> None:
    """``path``'s current content becomes ``<name>.bak``: a second link to the file (the rename that
    follows gives ``path`` a new inode, so the link keeps the old content), no copy of a table that
    may be megabytes; copied where the file system has no hard links. Called under the path's lock,
    so no other save of it moves ``.bak.tmp`` meanwhile."""
    bak = path.with_name(path.name + ".bak")
    link = path.with_name(path.name + ".bak.tmp")
    try:
        link.unlink(missing_ok=True)
        os.link(path, link)
    except OSError:
        shutil.copyfile(path, bak)
        return
    link.replace(bak)


def json_text(value: object) -> str:
    """One JSON value as fastjson writes a string, number or boolean."""
    return msgspec.json.encode(value).decode("utf-8")
