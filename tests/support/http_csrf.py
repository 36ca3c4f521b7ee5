"""The CSRF token a POST to the HTTP port must send, fetched as the lookup page fetches it."""

from __future__ import annotations

import aiohttp


async def csrf_headers(session: aiohttp.ClientSession) -> dict[str, str]:
    """``{header: token}`` from ``GET /api/csrf-token`` (``server.http.csrf``)."""
    async with session.get("/api/csrf-token") as response:
        assert response.status == 200
        body = await response.json()
    return {body["header"]: body["csrfToken"]}
