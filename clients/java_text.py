"""``new String(bytes, UTF_8)`` as the JDK (17) decodes it, replacement characters included.

Python's ``bytes.decode("utf-8", "replace")`` and Java agree on well-formed text but not on how many
U+FFFD a malformed sequence becomes: Java decodes a three-byte form of a surrogate (``ED A0 80``)
and then replaces it with one U+FFFD where Python emits three, and judges a bad multi-byte sequence
by Java's own ``malformed3``/``malformed4`` lengths. mqadmin prints message bodies this way, so
``printMsg`` output only matches byte for byte with the JDK's rules, written out here.
"""

from __future__ import annotations

REPLACEMENT = "\ufffd"


def _not_continuation(b: int) -> bool:
    return (b & 0xC0) != 0x80


def _malformed3(b1: int, b2: int, b3: int) -> bool:
    return (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or _not_continuation(b2) or _not_continuation(b3)


def _malformed3_length(b1: int, b2: int) -> int:
    return 1 if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or _not_continuation(b2) else 2


def _malformed3_2(b1: int, b2: int) -> bool:
    return (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or _not_continuation(b2)


def _bad_4_lead(b1: int, b2: int) -> bool:
    return (
        b1 > 0xF4
        or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
        or (b1 == 0xF4 and (b2 & 0xF0) != 0x80)
        or _not_continuation(b2)
    )


def java_utf8_decode(data: bytes) -> str:
    """The JDK's ``String(byte[], UTF_8)`` (``String.decodeUTF8_UTF16``)."""
    try:
        return data.decode("utf-8")  # well-formed: both agree (the common case, fast)
    except UnicodeDecodeError:
        pass
    out: list[str] = []
    n = len(data)
    sp = 0
    while sp < n:
        b1 = data[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:
            if sp < n:
                b2 = data[sp]
                sp += 1
                if _not_continuation(b2):
                    out.append(REPLACEMENT)
                    sp -= 1
                else:
                    out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                continue
            out.append(REPLACEMENT)
            break
        elif 0xE0 <= b1 <= 0xEF:
            if sp + 1 < n:
                b2, b3 = data[sp], data[sp + 1]
                sp += 2
                if _malformed3(b1, b2, b3):
                    out.append(REPLACEMENT)
                    sp = sp - 3 + _malformed3_length(b1, b2)
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(REPLACEMENT if 0xD800 <= c <= 0xDFFF else chr(c))
                continue
            if sp < n and _malformed3_2(b1, data[sp]):
                out.append(REPLACEMENT)
                continue
            out.append(REPLACEMENT)
            break
        elif 0xF0 <= b1 <= 0xF7:
            if sp + 2 < n:
                b2, b3, b4 = data[sp], data[sp + 1], data[sp + 2]
                sp += 3
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if (
                    _not_continuation(b2)
                    or _not_continuation(b3)
                    or _not_continuation(b4)
                    or not 0x10000 <= uc <= 0x10FFFF
                ):
                    out.append(REPLACEMENT)
                    sp -= 4
                    if _bad_4_lead(data[sp], data[sp + 1]):
                        sp += 1
                    elif _not_continuation(data[sp + 2]):
                        sp += 2
                    else:
                        sp += 3
                else:
                    out.append(chr(uc))
                continue
            if b1 > 0xF4 or (sp < n and _bad_4_lead(b1, data[sp])):
                out.append(REPLACEMENT)
                continue
            sp += 1
            out.append(REPLACEMENT)
            if sp < n and _not_continuation(data[sp]):
                continue
            break
        else:
            out.append(REPLACEMENT)
    return "".join(out)
