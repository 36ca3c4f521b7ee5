"""What ``QueryAdmin`` and ``Producer`` share: a name server list, a remoting client, the route lookup.

Both ask the name servers for a topic's route the same way (GET_ROUTEINFO_BY_TOPIC to each address
in turn until one answers, the next one only when the previous cannot be reached), both may be given
a ``RemotingClient`` or own one they close, and both are ``async with`` objects. They differ only
in what a missing route means: a query's verdict (``TOPIC_NOT_EXIST``) or a producer's cue to use
TBW102's route; so ``route`` and ``fetch_route`` answer None and leave that to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Self

from clients.client import DEFAULT_TIMEOUT, RemotingClient
from clients.errors import TransportError, UsageError
from clients.response_errors import expect_success
from clients.route import TopicRouteData, decode_route
from protocol.codes import RequestCode, ResponseCode
from protocol.custom_headers import GetRouteInfoRequestHeader


def split_namesrv(namesrv: str | Sequence[str]) -> list[str]:
    """Name server addresses from ``a:9876;b:9876`` (Java's separator) or a sequence."""
    items = namesrv.split(";") if isinstance(namesrv, str) else list(namesrv)
    return [a.strip() for a in items if a and a.strip()]


class NamesrvClient:
    """Requests over ``client`` (or an owned one, closed with this object) to name servers and the
    brokers they route to."""

    def __init__(
        self,
        namesrv: str | Sequence[str] | None,
        client: RemotingClient | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.namesrv_addrs = split_namesrv(namesrv) if namesrv else []
        self.client = client if client is not None else RemotingClient(timeout=timeout)
        self._owns_client = client is None
        self.timeout = timeout
        self._routes: dict[str, TopicRouteData] = {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_client:
            await self.client.close()

    async def route(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic``: cached once found; a missing one is asked for again next time."""
        cached = self._routes.get(topic)
        if cached is not None:
            return cached
        route = await self.fetch_route(topic)
        if route is not None:
            self._routes[topic] = route
        return route

    async def fetch_route(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic`` from the first name server that answers; None if it has none.

        A name server that cannot be reached is skipped; if none can, the last transport error is
        raised. Any answer other than SUCCESS or TOPIC_NOT_EXIST raises the class of its code.
        """
        answer = await self._route_answer(topic)
        return None if answer is None else answer[1]

    async def route_body(self, topic: str) -> bytes | None:
        """GET_ROUTEINFO_BY_TOPIC's body as the name server wrote it (``fetch_route``'s rules);
        None when it has no route. A body that is no route raises."""
        answer = await self._route_answer(topic)
        return None if answer is None else answer[0]

    async def _route_answer(self, topic: str) -> tuple[bytes, TopicRouteData] | None:
        if not self.namesrv_addrs:
            raise UsageError("no name server address given (use -n host:port or NAMESRV_ADDR)")
        last_error: TransportError | None = None
        for addr in self.namesrv_addrs:
            try:
                response = await self.client.invoke(
                    addr,
                    RequestCode.GET_ROUTEINFO_BY_TOPIC,
                    GetRouteInfoRequestHeader(topic).to_ext_fields(),
                    timeout=self.timeout,
                )
            except TransportError as exc:
                last_error = exc
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
            expect_success(response, addr)
            return response.body, decode_route(response.body)
        assert last_error is not None
        raise last_error
