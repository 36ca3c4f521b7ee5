"""Access control on the gRPC port (``serve --acl plain_acl.yml``): the 5.x client's signature and the
plain ACL's permissions, as the Proxy checks them (``AuthenticationInterceptor``,
``PlainAccessResource.parse(GeneratedMessageV3, AuthenticationHeader)``).

Authentication. A 5.x client signs every call with its credentials in the metadata:
``authorization: MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<hex>``
where the signature is HMAC-SHA1 of the ``x-mq-date-time`` value under the secret key, in hex
(``AuthorizationHeader`` turns it into the Base64 ``AclUtils.calSignature`` makes; comparing the
bytes is the same). As ``PlainPermissionManager.validate`` orders it: a peer in
``globalWhiteRemoteAddresses`` passes; then the access key must be known, a peer in the account's
``whiteRemoteAddress`` passes, else the signature must match. A missing or malformed header, an
unknown key or a wrong signature is UNAUTHORIZED.

Authorization. The resources each call needs, as ``PlainAccessResource.parse`` lists them (a group is
its ``%RETRY%`` topic): QueryRoute ANY on the topic; SendMessage PUB on the topic (one topic per
request); EndTransaction PUB on the topic; Telemetry's publishing Settings PUB on each topic, its
subscription SUB on the group and each topic; a consumer's Heartbeat SUB on its group;
ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue and
QueryAssignment SUB on the group and the topic; NotifyClientTermination SUB on the group (a producer
names none: nothing). The offset calls, which the 5.1.4 Proxy does not have, follow the remoting
port (``server.acl.validator``): UpdateOffset as UPDATE_CONSUMER_OFFSET (SUB on group and topic),
GetOffset and QueryOffset as QUERY_CONSUMER_OFFSET and the queue-offset reads (the signature only).
A missing permission is FORBIDDEN with the plain ACL's message.

The 5.1.4 Proxy ends a refused call with gRPC's PERMISSION_DENIED; the statuses here are those of the
Proxy's later authentication (5.2+: ``AuthenticationException`` UNAUTHORIZED,
``AuthorizationException`` FORBIDDEN), answered in the response like every other refusal, which the
clients report with the message.
"""

from __future__ import annotations

import hashlib
import hmac
import string
from collections.abc import Mapping
from typing import Any

from server.acl.config import ANY, PUB, RETRY_PREFIX, SUB, Account, AclConfig
from server.acl.validator import DeniedError, check_resources
from server.grpc.v2 import ClientType, Code, definition, service
from server.grpc.validation import GrpcStatusError

AUTHORIZATION_KEY = "authorization"
DATE_TIME_KEY = "x-mq-date-time"
_HEX = frozenset(string.hexdigits)


def parse_authorization(header: str) -> tuple[str | None, str | None]:
    """``AuthorizationHeader``: (access key, hex signature); ``GrpcStatusError`` when malformed."""
    parts = header.split(" ", 1)
    if len(parts) != 2:
        raise GrpcStatusError(Code.UNAUTHORIZED, "authorization header is incorrect")
    access_key = signature = None
    for item in parts[1].split(","):
        kv = item.strip().split("=", 1)
        if len(kv) != 2:
            raise GrpcStatusError(
                Code.UNAUTHORIZED, f"authorization keyValues length is incorrect, actual length={len(kv)}"
            )
        if kv[0] == "Credential":
            access_key = kv[1].split("/")[0]
        elif kv[0] == "Signature":
            if len(kv[1]) % 2 or not set(kv[1]) <= _HEX:
                raise GrpcStatusError(Code.UNAUTHORIZED, "authorization signature is not hex")
            signature = kv[1].lower()
    return access_key, signature


def signature_of(secret_key: str, date_time: str) -> str:
    """The 5.x client's ``Signature.sign``: hex HMAC-SHA1 of the date-time under the secret key."""
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


class GrpcAccess:
    """One loaded ``plain_acl.yml`` as the gRPC port checks it."""

    def __init__(self, config: AclConfig) -> None:
        self.config = config

    def authenticate(self, metadata: Mapping[str, str], remote_host: str) -> Account | None:
        """The caller's account, None when its address is white-listed (everything allowed), or
        ``GrpcStatusError`` UNAUTHORIZED."""
        if any(pattern.matches(remote_host) for pattern in self.config.global_white):
            return None
        header = metadata.get(AUTHORIZATION_KEY)
        if not header:
            raise GrpcStatusError(Code.UNAUTHORIZED, "No accessKey is configured")
        access_key, signature = parse_authorization(header)
        if not access_key:
            raise GrpcStatusError(Code.UNAUTHORIZED, "No accessKey is configured")
        account = self.config.accounts.get(access_key)
        if account is None:
            raise GrpcStatusError(Code.UNAUTHORIZED, f"No acl config for {access_key}")
        white = account.white_remote_address
        if white is not None and white.matches(remote_host):
            return None
        expected = signature_of(account.secret_key, metadata.get(DATE_TIME_KEY, ""))
        if signature is None or not hmac.compare_digest(expected, signature):
            raise GrpcStatusError(Code.UNAUTHORIZED, f"Check signature failed for accessKey={access_key}")
        return account

    @staticmethod
    def authorize(account: Account | None, needed: dict[str, int]) -> None:
        """``GrpcStatusError`` FORBIDDEN unless ``account`` may touch every resource ``needed``."""
        if account is None:
            return
        try:
            check_resources(account, needed)
        except DeniedError as denied:
            raise GrpcStatusError(Code.FORBIDDEN, str(denied)) from None


def _group(needed: dict[str, int], group: definition.Resource) -> None:
    needed[RETRY_PREFIX + group.name] = SUB


def required(request: Any) -> dict[str, int]:
    """Resource (topic, or ``%RETRY%group``) -> permission one gRPC request needs."""
    needed: dict[str, int] = {}
    if isinstance(request, service.QueryRouteRequest):
        needed[request.topic.name] = ANY
    elif isinstance(request, service.SendMessageRequest):
        if not request.messages:
            raise GrpcStatusError(Code.FORBIDDEN, "SendMessageRequest, messageCount is zero")
        topic = request.messages[0].topic
        if any(m.topic != topic for m in request.messages):
            raise GrpcStatusError(Code.FORBIDDEN, "SendMessageRequest, messages' topic is not consistent")
        needed[topic.name] = PUB
    elif isinstance(request, service.EndTransactionRequest):
        needed[request.topic.name] = PUB
    elif isinstance(request, service.HeartbeatRequest):
        if request.client_type in (ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER):
            if not request.HasField("group"):
                raise GrpcStatusError(Code.FORBIDDEN, "Consumer heartbeat doesn't have group")
            _group(needed, request.group)
    elif isinstance(request, service.ReceiveMessageRequest):
        _group(needed, request.group)
        needed[request.message_queue.topic.name] = SUB
    elif isinstance(
        request,
        service.AckMessageRequest
        | service.ForwardMessageToDeadLetterQueueRequest
        | service.ChangeInvisibleDurationRequest
        | service.QueryAssignmentRequest,
    ):
        _group(needed, request.group)
        needed[request.topic.name] = SUB
    elif isinstance(request, service.NotifyClientTerminationRequest):
        if request.group.name:
            _group(needed, request.group)
    elif isinstance(request, service.UpdateOffsetRequest):
        _group(needed, request.group)
        needed[request.message_queue.topic.name] = SUB
    return needed


def settings_required(settings: definition.Settings) -> dict[str, int]:
    """What a Telemetry stream's Settings need (its publishing or subscription)."""
    needed: dict[str, int] = {}
    if settings.HasField("publishing"):
        for topic in settings.publishing.topics:
            needed[topic.name] = PUB
    if settings.HasField("subscription"):
        _group(needed, settings.subscription.group)
        for entry in settings.subscription.subscriptions:
            needed[entry.topic.name] = SUB
    return needed
