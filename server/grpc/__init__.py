"""The gRPC front door: the RocketMQ 5 Proxy's ``apache.rocketmq.v2.MessagingService`` for 5.x clients.

RocketMQ 5 clients (apache/rocketmq-clients) speak gRPC to a Proxy, not remoting to a broker. This
package is that Proxy for the same broker: its own port beside the remoting port, in the same
process, over the same store and topic table. ``v2`` names the protocol's generated messages (the
official Python client's ``rocketmq.grpc_protocol``); ``conversion`` turns a v2 ``Message`` into
the SEND a Proxy makes of it, sans-IO; ``validation`` holds the Proxy's input checks and the
statuses they answer; ``route`` builds QueryRoute's queues from a topic's config; ``client_settings``
the Settings the Proxy answers on the Telemetry stream; ``service`` the MessagingService calls;
``server`` the grpcio asyncio server, its bounds, start and stop; ``tls`` the port's TLS modes and
certificate, ``relay`` the public port in front of grpcio when TLS is on (TLS and plaintext clients
on one port, as the Proxy's permissive mode).
"""
