"""Whitelist address patterns of ``plain_acl.yml``, with the forms RocketMQ's
``RemoteAddressStrategyFactory`` accepts.

=========================  ===================================================================
``""`` / absent            matches nothing (an account without a whitelist must sign)
``*``, ``*.*.*.*``,        matches every address
``*:*:*:*:*:*:*:*``
``192.168.0.{1,2}``        the listed last parts (also ``fe80::{1,2}`` for IPv6)
``10.0.0.1,10.0.0.2``      exactly the listed addresses
``192.168.*.*``,           a wildcard or an ``a-b`` range at one position, every later position
``192.168.1.1-100``        ``*``; the first position is always literal (as in Java)
``10.1.2.3``, ``::1``      exactly that address (IPv6 compared in canonical form)
=========================  ===================================================================

Matching works on parsed numbers, not on string prefixes, and IPv4-mapped IPv6 peers
(``::ffff:10.1.2.3``, seen when listening on ``::``) match as their IPv4 address. IPv6 wildcards and
ranges must be written with all eight groups (no ``::``); anything Java would reject raises
``AclConfigError`` when the file is loaded, never at request time.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from server.acl.errors import AclConfigError

_ANY = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_host(host: str | None) -> Address | None:
    """The peer address as the patterns see it (IPv4-mapped IPv6 as IPv4); None if not an IP."""
    if not host:
        return None
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _exact(text: str) -> Address:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        raise AclConfigError(f"whitelist address {text!r} is not an IPv4 or IPv6 address") from None


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """One whitelist entry: ``matches(host)`` says whether a peer at ``host`` is whitelisted."""

    text: str
    any_address: bool = False
    addresses: frozenset[Address] = frozenset()
    #: For ranges: IPv4 or IPv6, then the literal leading parts and the bounds of the ranged one.
    version: int = 0
    head: tuple[int, ...] = ()
    low: int = 0
    high: int = -1

    def matches(self, host: str | None) -> bool:
        if self.any_address:
            return True
        address = parse_host(host)
        if address is None:
            return False
        if self.addresses:
            return address in self.addresses
        if address.version != self.version:
            return False
        parts = _parts(address)
        position = len(self.head)
        return parts[:position] == self.head and self.low <= parts[position] <= self.high


def _parts(address: Address) -> tuple[int, ...]:
    if isinstance(address, ipaddress.IPv4Address):
        return tuple(address.packed)
    packed = address.packed
    return tuple(int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2))


def parse_pattern(text: str | None) -> AddressPattern | None:
    """The pattern for ``text``; None for a blank entry (which matches nothing)."""
    if text is None or not str(text).strip():
        return None
    text = str(text).strip()
    if text in _ANY:
        return AddressPattern(text, any_address=True)
    if text.endswith("}"):
        prefix, brace, inner = text[:-1].rpartition("{")
        if not brace or not prefix or prefix[-1] not in ".:":
            raise AclConfigError(f"whitelist {text!r}: braces must hold the last part (192.168.0.{{1,2}})")
        items = [item for item in inner.split(",") if item.strip()]
        if not items:
            raise AclConfigError(f"whitelist {text!r}: nothing between the braces")
        return AddressPattern(text, addresses=frozenset(_exact(prefix + item.strip()) for item in items))
    if "," in text:
        items = [item for item in text.split(",") if item.strip()]
        return AddressPattern(text, addresses=frozenset(_exact(item) for item in items))
    if "*" in text or "-" in text:
        return _range(text)
    return AddressPattern(text, addresses=frozenset({_exact(text)}))


def _range(text: str) -> AddressPattern:
    ipv6 = ":" in text
    if ipv6 and "::" in text:
        raise AclConfigError(f"whitelist {text!r}: write IPv6 wildcards with all eight groups (no '::')")
    parts = [part.strip() for part in text.split(":" if ipv6 else ".")]
    width, base, top = (8, 16, 0xFFFF) if ipv6 else (4, 10, 255)
    if len(parts) != width:
        raise AclConfigError(f"whitelist {text!r}: expected {width} parts")
    ranged = next((i for i, part in enumerate(parts) if part == "*" or "-" in part), None)
    if ranged is None or ranged == 0:
        raise AclConfigError(f"whitelist {text!r}: the first part cannot be a wildcard or a range")
    if any(part != "*" for part in parts[ranged + 1 :]):
        raise AclConfigError(f"whitelist {text!r}: every part after a wildcard or range must be '*'")
    try:
        head = tuple(int(part, base) for part in parts[:ranged])
        if parts[ranged] == "*":
            low, high = 0, top
        else:
            first, _, last = parts[ranged].partition("-")
            if not first or not last:
                raise ValueError(parts[ranged])
            low, high = int(first, base), int(last, base)
    except ValueError:
        raise AclConfigError(f"whitelist {text!r}: not a number where one is expected") from None
    if not all(0 <= part <= top for part in head) or not 0 <= low <= high <= top:
        raise AclConfigError(f"whitelist {text!r}: a part is out of range or the range is reversed")
    return AddressPattern(text, version=6 if ipv6 else 4, head=head, low=low, high=high)
