"""The ``static final int`` constants of a compiled Java class, read from its class file in a jar.

For tests that check a transcription of Java constants against the real thing without a JDK: the
class file format (JVMS chapter 4) is read as far as its fields, and each ``public static final int``
field's ``ConstantValue`` attribute gives its value, as javac wrote it from the source's initializer.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

ACC_PUBLIC, ACC_STATIC, ACC_FINAL = 0x0001, 0x0008, 0x0010
_MAGIC = 0xCAFEBABE
_UTF8, _INTEGER, _LONG, _DOUBLE = 1, 3, 5, 6
#: Sizes of the constant pool entries after their tag, for the tags that are neither Utf8 nor 8 bytes.
_ENTRY_SIZE = {3: 4, 4: 4, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> tuple:
        values = struct.unpack_from(">" + fmt, self.data, self.at)
        self.at += struct.calcsize(">" + fmt)
        return values

    def u2(self) -> int:
        return self.take("H")[0]

    def skip(self, n: int) -> None:
        self.at += n


def public_int_constants(class_bytes: bytes) -> dict[str, int]:
    """``{name: value}`` of every ``public static final int`` field that has a constant value."""
    r = _Reader(class_bytes)
    magic, _minor, _major, pool_count = r.take("IHHH")
    if magic != _MAGIC:
        raise ValueError("not a class file")
    pool: dict[int, str | int] = {}
    index = 1
    while index < pool_count:
        (tag,) = r.take("B")
        if tag == _UTF8:
            length = r.u2()
            pool[index] = class_bytes[r.at : r.at + length].decode("utf-8", "replace")
            r.skip(length)
        elif tag == _INTEGER:
            pool[index] = r.take("i")[0]
        elif tag in (_LONG, _DOUBLE):
            r.skip(8)
            index += 1  # an 8-byte constant takes two pool entries
        elif tag in _ENTRY_SIZE:
            r.skip(_ENTRY_SIZE[tag])
        else:
            raise ValueError(f"unknown constant pool tag {tag} at entry {index}")
        index += 1
    r.skip(6)  # access_flags, this_class, super_class
    r.skip(2 * r.u2())  # interfaces
    constants: dict[str, int] = {}
    for _ in range(r.u2()):
        access, name_index, descriptor_index, attributes = r.take("HHHH")
        for _ in range(attributes):
            attribute_name, length = r.take("HI")
            if pool.get(attribute_name) == "ConstantValue" and pool.get(descriptor_index) == "I":
                value = pool[struct.unpack_from(">H", class_bytes, r.at)[0]]
                if access & (ACC_PUBLIC | ACC_STATIC | ACC_FINAL) == ACC_PUBLIC | ACC_STATIC | ACC_FINAL:
                    constants[str(pool[name_index])] = int(value)
            r.skip(length)
    return constants


def jar_int_constants(jar: Path, class_name: str) -> dict[str, int]:
    """``public_int_constants`` of ``class_name`` (``org.example.Name``) in ``jar``."""
    with zipfile.ZipFile(jar) as archive:
        return public_int_constants(archive.read(class_name.replace(".", "/") + ".class"))
