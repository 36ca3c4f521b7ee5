"""Writing and reading the broker's ``config/*.json`` files as its ``ConfigManager`` does.

The broker writes each file whole: the new text to ``<name>.tmp``, the current file copied to
``<name>.bak``, then the temporary file renamed over it; it reads the file and, when that is missing
or unreadable, the ``.bak``. Doing the same here means a crash mid-write leaves the old file or the
new one, and a store moved between this server and a real broker keeps its fallback copy.

fastjson, which writes them, prints a map with integer keys unquoted (``{0:12,1:3}``), which is not
JSON; ``relaxed_json`` quotes such keys so a standard decoder reads them.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import msgspec

from store.errors import StoreError

#: An unquoted integer object key, after ``{`` or ``,`` (fastjson's ``Map<Integer, ...>``).
_BARE_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


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


def write_config_text(path: Path, text: str) -> None:
    """Replace the file with ``text`` (synced), keeping the previous one as ``.bak``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if path.exists():
        shutil.copyfile(path, path.with_name(path.name + ".bak"))
    tmp.replace(path)


def json_text(value: object) -> str:
    """One JSON value as fastjson writes a string, number or boolean."""
    return msgspec.json.encode(value).decode("utf-8")
