"""The changes of a config table made since its file was last written whole, one fsynced line each.

The broker rewrites ``topics.json`` whole on every change. At 50,000 topics that file is 9 MB: its
text, write and fsync take 25 ms of a thread (more while the event loop competes for the
interpreter), and a SEND that creates a topic is answered only once the creation is durable. So a
change is first appended here, a few hundred bytes and one fsync (well under a millisecond), which
is what makes it durable; the whole file is rewritten later, once for a burst of changes
(``ConfigPersister``), and this file is emptied after each whole write.

Each line is a JSON object: ``{"v": counter, "t": timestamp, "put": name, "c": {config}}`` or
``{"v": counter, "t": timestamp, "del": name}``, ``v`` being the table's data-version counter after
the change. Loading the table replays the lines whose ``v`` is above the counter its file holds
(lines a whole write already covered are skipped, so a crash between the whole write and the
emptying replays nothing twice); a torn last line, which a crash in the middle of an append leaves,
ends the replay. Opening a writable store writes the table whole at once after a replay, so the
directory a real broker may be started on next holds every change in ``topics.json`` itself.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgspec

from store.errors import StoreError

log = logging.getLogger(__name__)

#: The journal beside a config file: ``topics.json`` -> ``topics.json.journal``.
SUFFIX = ".journal"


def journal_path(config_path: Path) -> Path:
    return config_path.with_name(config_path.name + SUFFIX)


class ConfigJournal:
    """An append-only file of change lines beside one config file."""

    def __init__(self, config_path: Path) -> None:
        self.path = journal_path(config_path)
        #: Lines appended since the last ``clear`` (for the persister's "write whole after N" rule).
        self.lines = 0

    def append(self, lines: list[bytes]) -> None:
        """Append ``lines`` (each one JSON object, no newline) and fsync them: durable on return.

        The first append after the file was made also syncs the directory, so the new name
        survives a power cut as well as its content."""
        if not lines:
            return
        made = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as f:
            f.write(b"".join(line + b"\n" for line in lines))
            f.flush()
            os.fsync(f.fileno())
        if made:
            _sync_dir(self.path.parent)
        self.lines += len(lines)

    def clear(self) -> None:
        """Empty the journal once a whole write of the table holds every line in it. Not synced:
        lines that outlive a crash are the ones the whole file already holds, skipped by version."""
        try:
            os.truncate(self.path, 0)
        except FileNotFoundError:
            pass
        self.lines = 0

    def read(self) -> list[dict[str, object]]:
        """The journal's change objects in order, up to the first line that is not one (a torn
        append). An unreadable file is a ``StoreError``; a missing one has no changes."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc}") from exc
        changes: list[dict[str, object]] = []
        for number, line in enumerate(data.split(b"\n"), 1):
            if not line:
                continue
            try:
                change = msgspec.json.decode(line)
            except msgspec.DecodeError:
                change = None
            if not _is_change(change):
                log.warning(
                    "%s: line %d is not a change (a torn append?): the replay stops there", self.path, number
                )
                break
            changes.append(change)
        self.lines = len(changes)
        return changes


def _is_change(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    if not isinstance(value.get("v"), int) or not isinstance(value.get("t"), int):
        return False
    if isinstance(value.get("put"), str):
        return isinstance(value.get("c"), dict)
    return isinstance(value.get("del"), str)


def _sync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
