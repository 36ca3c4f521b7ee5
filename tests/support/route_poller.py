"""A raw name-server connection that asks a topic's route when a test says so, as a client's route
poll does: the cluster tests drive ``server.namesrv.route_watch`` with it and check the order of
events, not how long anything takes."""

from __future__ import annotations

import json
import socket

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.frame import FrameDecoder, encode_frame


class RoutePoller:
    """One name-server connection, as a client's: each ``poll`` asks the topic's route once."""

    def __init__(self, namesrv: str) -> None:
        host, port = namesrv.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self._opaque = 0

    def poll(self, topic: str) -> list[str]:
        """The brokers the route names (none when the topic is unknown)."""
        self._opaque += 1
        request = RemotingCommand(
            code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=self._opaque, ext_fields={"topic": topic}
        )
        self.sock.sendall(encode_frame(request))
        decoder = FrameDecoder()
        answers: list[RemotingCommand] = []
        while not answers:
            data = self.sock.recv(65536)
            assert data, "the name server closed the connection"
            answers = decoder.feed(data)
        if answers[0].code != ResponseCode.SUCCESS:
            return []
        route = json.loads(answers[0].body)
        return sorted(broker["brokerName"] for broker in route["brokerDatas"])

    def close(self) -> None:
        self.sock.close()
