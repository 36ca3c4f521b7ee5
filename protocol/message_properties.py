"""The properties string of a message: ``name \\x01 value`` items joined by ``\\x02``.

Parsing follows Java's ``MessageDecoder.string2messageProperties`` (4.9.x and 5.x) exactly, because
what the broker indexed is what *that* parser saw: an item needs a non-empty name and a non-empty
value, the first ``\\x01`` splits name from value (later ones stay in the value), anything else is
skipped silently, and a repeated name keeps its last value. Unlike Java's ``HashMap`` the dict keeps
the file's order, so a decoded record re-encodes to the same bytes.

Writing follows ``messageProperties2String``: items joined by ``\\x02`` with no trailing separator,
``None`` values skipped.
"""

from __future__ import annotations

from collections.abc import Mapping

from protocol.message_flags import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

_NV = NAME_VALUE_SEPARATOR
_SEP = PROPERTY_SEPARATOR
_NV_BYTE_STR = NAME_VALUE_SEPARATOR.encode()
_SEP_BYTE = PROPERTY_SEPARATOR.encode()


def properties_to_string(properties: Mapping[str, str | None]) -> str:
    """Serialize properties in the dict's order, as Java's ``messageProperties2String`` does."""
    return _SEP.join(f"{name}{_NV}{value}" for name, value in properties.items() if value is not None)


def string_to_properties(text: str) -> dict[str, str]:
    """Parse a properties string with Java's rules (malformed items are skipped, never an error)."""
    result: dict[str, str] = {}
    for item in text.split(_SEP):
        cut = item.find(_NV)
        # cut > 0: non-empty name; cut < len - 1: non-empty value.
        if 0 < cut < len(item) - 1:
            result[item[:cut]] = item[cut + 1 :]
    return result


def find_properties(raw: bytes | memoryview, names: tuple[bytes, ...]) -> list[str | None]:
    """Values of a few properties straight from the UTF-8 bytes, without building the whole dict.

    ``names`` are UTF-8 property names (without 0x01 or 0x02); the answer is in the same order,
    ``None`` where absent. Same rules as ``string_to_properties``: every 0x02 starts an item (0x01
    and 0x02 never occur inside a multi-byte UTF-8 sequence), so the *last* ``0x02 name 0x01`` with a
    non-empty value is the one Java's parser keeps.
    """
    data = _SEP_BYTE + bytes(raw)
    found: list[str | None] = []
    for name in names:
        needle = _SEP_BYTE + name + _NV_BYTE_STR
        value = None
        end = len(data)
        while (at := data.rfind(needle, 0, end)) >= 0:
            start = at + len(needle)
            stop = data.find(_SEP_BYTE, start)
            if stop < 0:
                stop = len(data)
            if stop > start:
                value = data[start:stop].decode("utf-8", "replace")
                break
            end = at
        found.append(value)
    return found
