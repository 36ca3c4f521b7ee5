"""``config/delayOffset.json``: how far the schedule service has delivered each delay level.

The broker's ``ScheduleMessageService`` keeps, per delay level, the offset in the level's queue of
``SCHEDULE_TOPIC_XXXX`` (queue level - 1) of the next message to deliver, and saves the table as
fastjson writes a ``ConcurrentHashMap<Integer, Long>``: unquoted integer keys,
``{"offsetTable":{2:1,3:4}}`` pretty-printed with tabs. A broker opening a store without the file
delivers every scheduled message again, so the write path keeps it as the broker does.
"""

from __future__ import annotations

import re
from pathlib import Path

from store.errors import StoreError
from store.whole_file import replace_whole

_ENTRY = re.compile(r'"?(-?\d+)"?\s*:\s*(-?\d+)')


def read_delay_offsets(path: Path) -> dict[int, int]:
    """The level -> next offset table; empty when the file does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    start = text.find('"offsetTable"')
    if start < 0:
        raise StoreError(f"{path} has no offsetTable")
    body = text[text.index("{", start) : text.index("}", start)]
    return {int(level): int(offset) for level, offset in _ENTRY.findall(body)}


def write_delay_offsets(path: Path, offsets: dict[int, int]) -> None:
    """Save the table in the broker's layout, through a temporary file and a rename (one save of the
    file at a time: a delivery's and the one at close may come from different threads). ``offsets``
    must not change meanwhile: the caller passes a copy taken under its own lock
    (``DeliverySchedule.save``)."""
    entries = ",".join(f"{level}:{offset}" for level, offset in sorted(offsets.items()))
    text = '{\n\t"offsetTable":{' + entries + "\n\t}\n}"
    replace_whole(path, text.encode("utf-8"))
