"""Which ``Host`` a request to the HTTP port may name: the defence against DNS rebinding.

A web page the operator opens elsewhere can point a name of its own (``attacker.example``) at this
server's address once the browser has loaded it; the browser then treats the server's answers as
the page's own origin and lets its scripts read them and POST to it. What gives such a request away
is its ``Host`` header, which names the attacker's name. So a request is answered only when its
``Host`` names this server:

- loopback: ``localhost`` and ``*.localhost`` (browsers resolve these to loopback themselves, RFC
  6761, so no DNS answer can move them), and any loopback address;
- any IP address literal: a browser sends one only for a URL that names the address itself, whose
  origin (scheme, address, port) no other site's page can share, so no rebinding is possible through
  it; this keeps a server bound to every interface reachable at each of the machine's addresses;
- the name the server is bound to (``--host``), the host it advertises (``--advertise``, broker.conf's
  ``brokerIP1``), this machine's host name;
- the names the operator allows (``serve --http-allow-host NAME``, e.g. the name a reverse proxy or
  a DNS alias serves it under).

The port is not compared (a proxy or a port forward may change it; rebinding keeps it anyway). A
request without ``Host`` (HTTP/1.0 scripts) comes from no browser and is answered; a malformed one is
refused like a foreign one.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

#: Names that always mean this machine's loopback (RFC 6761: resolvers and browsers keep them there).
LOOPBACK_NAME = "localhost"


def host_name(header: str) -> str | None:
    """The host part of a ``Host`` header, lower case, without port, brackets or a trailing dot;
    None when it is not a host (empty, unbalanced brackets, a port that is not a number)."""
    value = header.strip().lower()
    if value.startswith("["):
        inside, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return inside or None
    if value.count(":") == 1:
        value, _, port = value.partition(":")
        if not port.isdigit():
            return None
    elif ":" in value:
        return value if _ip(value) is not None else None  # an IPv6 address without brackets
    value = value.rstrip(".")
    if not value or any(c in value for c in "/\\@ ?#"):
        return None
    return value


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.partition("%")[0])  # a zone id (fe80::1%eth0) is no part of it
    except ValueError:
        return None


class AllowedHosts:
    """The ``Host`` names this server answers to (see the module's docstring)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names = frozenset(n for n in (host_name(name) for name in names) if n is not None)

    def allows(self, header: str | None) -> bool:
        """Whether a request whose ``Host`` header is ``header`` (None: it had none) is answered."""
        if header is None:
            return True
        name = host_name(header)
        if name is None:
            return False
        if name == LOOPBACK_NAME or name.endswith("." + LOOPBACK_NAME):
            return True
        if _ip(name) is not None:
            return True
        return name in self.names
