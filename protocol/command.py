"""``RemotingCommand``: one request or response of the RocketMQ remoting protocol, decoded.

The fields mirror Java's ``RemotingCommand`` (code, language, version, opaque, flag, remark,
extFields, body) plus the serialization its header travelled in, because a broker answers in the
serialization of the request. Everything here is plain data: the frame codec (``protocol.frame``)
turns it into bytes and back.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE, LanguageCode, SerializeType

#: The ``version`` a Java 4.9.7 broker and name server put in every response
#: (``MQVersion.Version.V4_9_7.ordinal()``, set through ``rocketmq.remoting.version`` at startup).
#: Clients keep it as "the broker version", so answering like the broker the golden data came from
#: keeps every client on its tested path.
BROKER_VERSION = 407

Body = bytes | bytearray | memoryview
_JAVA = LanguageCode.JAVA


@dataclass(slots=True)
class RemotingCommand:
    """A decoded remoting command.

    ``language`` is a ``LanguageCode`` when the peer sent a known one; an unknown ROCKETMQ language
    byte stays a plain ``int`` (an unknown JSON language name decodes as ``LanguageCode.OTHER``).
    ``ext_fields`` keeps the order the peer sent (Java's ``HashMap`` order), which is what makes
    re-encoding byte-exact. ``body`` is ``None`` when the frame has no body, as in Java.
    """

    code: int
    language: LanguageCode | int = LanguageCode.JAVA
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: Body | None = None
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """Bit 0 of ``flag``: this command answers a request with the same ``opaque``."""
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """Bit 1 of ``flag``: the sender expects no answer, so none may be sent."""
        return bool(self.flag & RPC_ONEWAY)

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body | None = None,
        *,
        version: int = BROKER_VERSION,
    ) -> RemotingCommand:
        """The answer to this request, as the Java broker builds it.

        Same ``opaque`` (the client matches answers by it), ``flag`` with only the response bit
        (``createResponseCommand`` starts from 0 and marks the type), language JAVA, the broker's
        own ``version`` and the request's serialization type (``processRequestCommand`` copies it).
        """
        # Positional: this runs once per request, and keywords cost measurably here.
        return RemotingCommand(
            code,
            _JAVA,
            version,
            self.opaque,
            RPC_TYPE_RESPONSE,
            remark,
            ext_fields,
            body,
            self.serialize_type,
        )
