"""The name server's requests (``DefaultRequestProcessor``) over a ``NameRegistry``.

GET_ROUTEINFO_BY_TOPIC answers the merged route, or TOPIC_NOT_EXIST with the name server's remark
when no registered broker holds the topic (a topic only the stopped broker held is then unknown, as
on a real name server whose broker's channel closed). DELETE_TOPIC_IN_NAMESRV answers SUCCESS:
routes follow the brokers' topic tables, which DELETE_TOPIC_IN_BROKER changed before it
(``mqadmin deleteTopic`` deletes on the brokers first). Each route answer is noted in the
``RouteWatch`` (which brokers it named, to which connection), so that a broker that stopped comes
back only once the clients that knew it have seen it gone.
"""

from __future__ import annotations

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import DeleteTopicRequestHeader, GetRouteInfoRequestHeader, java_string
from server.namesrv.registry import NameRegistry
from server.namesrv.route_watch import RouteWatch
from server.remoting.dispatch import Dispatcher
from server.remoting.peer import CURRENT_PEER
from server.remoting.processors.name_server import topic_not_exist_remark


class NameServerRequests:
    """GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER and
    DELETE_TOPIC_IN_NAMESRV over the registered brokers."""

    __slots__ = ("_registry", "_watch")

    def __init__(self, registry: NameRegistry, watch: RouteWatch | None = None) -> None:
        self._registry = registry
        self._watch = watch

    def register_on(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, self.get_route_info_by_topic)
        dispatcher.register(RequestCode.GET_BROKER_CLUSTER_INFO, self.get_broker_cluster_info)
        dispatcher.register(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, self.get_all_topic_list)
        dispatcher.register(RequestCode.DELETE_TOPIC_IN_NAMESRV, self.delete_topic_in_namesrv)

    def get_route_info_by_topic(self, request: RemotingCommand) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        route = None if header.topic is None else self._registry.route(header.topic)
        peer = CURRENT_PEER.get()
        if self._watch is not None and header.topic is not None and peer is not None:
            holders = self._registry.holders(header.topic) if route is not None else ()
            self._watch.answered(f"{peer[0]}:{peer[1]}", header.topic, holders)
        if route is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, remark=topic_not_exist_remark(java_string(header.topic))
            )
        return request.make_response(ResponseCode.SUCCESS, body=route)

    def get_broker_cluster_info(self, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=self._registry.cluster_info())

    def get_all_topic_list(self, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=self._registry.topic_list())

    def delete_topic_in_namesrv(self, request: RemotingCommand) -> RemotingCommand:
        DeleteTopicRequestHeader.from_ext_fields(request.ext_fields)
        return request.make_response(ResponseCode.SUCCESS)
