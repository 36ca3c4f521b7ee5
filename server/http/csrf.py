"""The proof a state-changing request (the resend POST) must carry: cross-site request forgery.

A browser attaches the credentials it keeps for this server (HTTP basic under ``--acl``) to any
request a page makes, whichever site the page comes from. ``Origin`` alone does not stop that: some
requests carry none, and a page served under a rebound name is "same origin". So a request that is
not a read (anything but GET, HEAD, OPTIONS) must also send this server's token in the
``X-RMQ-CSRF-Token`` header. The lookup page gets it from ``GET /api/csrf-token``; a page of another
site cannot read that answer (the server sends no CORS headers, so the browser keeps it from the
page), cannot send a custom header across sites without a CORS preflight the server never grants,
and a rebound name is refused before any of this (``server.http.host_check``). A script (curl) does
the same GET and sends the header.

The token is 256 random bits made when the HTTP port starts, compared in constant time; it is no
credential (access control still decides what an account may do), only the proof that whoever sends
the request could read this server's own answers. Requests a browser marks as cross-site
(``Sec-Fetch-Site: cross-site``) or whose ``Origin`` names another host are refused as well.
"""

from __future__ import annotations

import hmac
import secrets

from aiohttp import web

from server.http.errors import ApiError

#: The request header that carries the token.
HEADER = "X-RMQ-CSRF-Token"
#: Methods that change nothing: they need no token.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class CsrfToken:
    """This server's token, and the check of a request against it."""

    def __init__(self, value: str | None = None) -> None:
        self.value = value if value is not None else secrets.token_urlsafe(32)

    def check(self, request: web.Request) -> None:
        """Raise 403 unless ``request`` is safe or proves it comes from this server's own page."""
        if request.method in SAFE_METHODS:
            return
        if request.headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
            raise _refused("a request from another site is refused")
        origin = request.headers.get("Origin")
        if origin is not None and origin.partition("://")[2].rstrip("/") != request.headers.get("Host", ""):
            raise _refused("a request from another origin is refused")
        sent = request.headers.get(HEADER)
        if sent is None or not hmac.compare_digest(sent.encode(errors="replace"), self.value.encode()):
            raise _refused(
                f"a request that changes something needs the {HEADER} header with the token "
                "GET /api/csrf-token answers (the page sends it)"
            )


def _refused(message: str) -> ApiError:
    return ApiError(403, "csrf", message)
