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
_NV_BYTE = ord(NAME_VALUE_SEPARATOR)
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

    ``names`` are UTF-8 property names; the answer is in the same order, ``None`` where absent. Same
    rules as ``string_to_properties`` (0x01 and 0x02 never occur inside a multi-byte UTF-8 sequence,
    so splitting the bytes is splitting the string).
    """
    found: list[str | None] = [None] * len(names)
    for item in bytes(raw).split(_SEP_BYTE):
        cut = item.find(_NV_BYTE)
        if 0 < cut < len(item) - 1:
            name = item[:cut]
            for i, wanted in enumerate(names):
                if name == wanted:
                    found[i] = item[cut + 1 :].decode("utf-8", "replace")
    return found
