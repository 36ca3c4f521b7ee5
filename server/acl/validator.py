"""Access control compatible with RocketMQ's plain ACL: who may ask this server what.

Off unless ``serve --acl plain_acl.yml``. When on, every request the broker role serves is checked in
the order of ``PlainPermissionManager.validate`` before its processor runs:

1. a peer matching ``globalWhiteRemoteAddresses`` passes;
2. no ``AccessKey`` → "No accessKey is configured"; an unknown one → "No acl config for <ak>";
3. a peer matching the account's ``whiteRemoteAddress`` passes;
4. ``Signature`` must be ``AclClientRPCHook``'s HMAC-SHA1 (``protocol.acl_signature``); both forms are
   accepted, with ``_UNIQUE_KEY_QUERY`` signed (clients >= 4.9.4) or left out (what a 4.9.x broker
   verifies), else "Check signature failed for accessKey=<ak>";
5. each resource the request touches needs its permission: the account's entry for it when it has
   one (that entry alone decides: ``TopicA=DENY`` refuses TopicA whatever the default), else its
   default topic/group permission; an admin account without any entries may do anything. Otherwise
   "No default permission for topic:<t>" (or ``group:<g>``).

Resources, as 4.9.7's ``PlainAccessValidator.parse`` derives them: SEND_MESSAGE needs PUB on
``topic``, SEND_MESSAGE_V2 PUB on ``b`` (its abbreviated topic); a send to a ``%RETRY%`` topic needs
SUB on the group instead (``group``, which 4.9.7 clients never fill, so nothing; V2's ``a``);
SEND_BATCH_MESSAGE as SEND_MESSAGE_V2 (its header is V2's; a batch is one topic), deliberately tighter
than 4.9.7, which has no case for it and checks only the signature (5.x added the case);
CONSUMER_SEND_MSG_BACK SUB on ``%RETRY%<group>``, and (tighter than 4.9.7) SUB on the topic of the
record it copies, checked by its processor once it read it (``server.acl.record_access``);
UPDATE_CONSUMER_OFFSET SUB on ``%RETRY%<consumerGroup>`` and on ``topic``;
QUERY_MESSAGE needs SUB (or GET, see ``server.acl.config``) on ``topic``; VIEW_MESSAGE_BY_ID needs
the same on ``topic`` when the request names one (5.x; a 4.9.x broker checks only the signature, and
mqadmin 4.9's by-offset view sends no topic) and, tighter than 4.9.7, on the topic of the record it
answers (``server.acl.record_access``); HEART_BEAT needs SUB on each consumer group's retry
topic and each subscribed topic in its body (decoded within ``protocol.heartbeat``'s bounds);
UNREGISTER_CLIENT SUB on ``%RETRY%<consumerGroup>``; PULL_MESSAGE SUB on ``topic`` and on
``%RETRY%<consumerGroup>``; GET_CONSUMER_LIST_BY_GROUP SUB on ``%RETRY%<consumerGroup>``;
QUERY_TOPIC_CONSUME_BY_WHO, the offset reads (GET_MIN/MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME, QUERY_CONSUMER_OFFSET), GET_TOPIC_STATS_INFO and GET_BROKER_RUNTIME_INFO
only the signature. Two rules of ``PlainPermissionManager`` come before the resources: a request
needing exactly PUB on ``RMQ_SYS_TRACE_TOPIC`` passes (message traces), and the admin codes
(``ADMIN_CODES``) need an ``admin: true`` account ("Need admin permission for request code=<c>, but
accessKey=<ak> is not"). Every verdict for SENDs, retry topics, the trace topic, an admin code and
an unknown code was checked against the real 4.9.7 broker (``tests/server/acl/test_acl_send.py``).

A denial is answered NO_PERMISSION (16) with Java's message as the remark (the 5.x broker's code; a
4.9.x broker answers SYSTEM_ERROR with ``AclException: <message>, <first stack frame>``). Every
other code, unknown ones included, is checked before its processor is looked up, as the broker's ACL
hook runs before its default processor answers REQUEST_CODE_NOT_SUPPORTED. The name-server
codes (GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER) are never
checked: RocketMQ's name server has no plain ACL, so clients reach it unsigned, and routes reveal
only topic names and this address.
"""

from __future__ import annotations

import hmac

from protocol.acl_signature import ACCESS_KEY, SIGNATURE, UNIQUE_KEY_QUERY, acl_signature
from protocol.codes import RequestCode
from protocol.command import RemotingCommand
from protocol.heartbeat import HeartbeatBodyError, HeartbeatData, decode_heartbeat
from server.acl.config import GET, PUB, RETRY_PREFIX, SUB, Account, AclConfig, check_permission

#: What a message lookup needs on its topic: SUB (plain ACL 1.0) or GET (ACL 2.0), either one.
LOOKUP = SUB | GET

#: Request codes of the name-server role: never access-checked (see the module docstring).
UNCHECKED_CODES = frozenset(
    {
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        RequestCode.GET_BROKER_CLUSTER_INFO,
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    }
)

#: ``Permission.ADMIN_CODE``: codes only an ``admin: true`` account may send, whatever its perms.
ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    }
)

#: ``TopicValidator.RMQ_SYS_TRACE_TOPIC``: a request needing exactly PUB on it skips the resource
#: checks (``PlainPermissionManager.validate``), so message traces reach the default trace topic.
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


#: The SENDs whose topic needs PUB: SEND_BATCH_MESSAGE included, unlike 4.9.7 (see the docstring).
_SEND_CODES = frozenset(
    {RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE}
)


class DeniedError(Exception):
    """The request may not be served; the message is the NO_PERMISSION remark."""


def required_resources(request: RemotingCommand) -> dict[str, int]:
    """Resource (topic, or ``%RETRY%group``) → permission the request needs."""
    fields = request.ext_fields or {}
    code = request.code
    needed: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource is not None:  # ``addResourceAndPerm`` ignores a null resource
            needed[resource] = perm

    if code in _SEND_CODES:
        # V2 abbreviates the header: ``b`` is the topic, ``a`` the producer group. A send to a retry
        # topic (a consumer sending back) needs SUB on the group instead; SEND_MESSAGE reads the
        # group from ``group``, a field 4.9.7 clients never fill (they send ``producerGroup``), so
        # such a send needs nothing, as on the broker. SEND_BATCH_MESSAGE carries V2's header (the
        # processor reads it so): checked as V2, which 4.9.7 does not do (issue 31).
        v2 = code != RequestCode.SEND_MESSAGE
        topic = fields.get("b" if v2 else "topic")
        if topic is not None and topic.startswith(RETRY_PREFIX):
            add(_retry(fields.get("a" if v2 else "group")), SUB)
        else:
            add(topic, PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add(_retry(fields.get("group")), SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        add(_retry(fields.get("consumerGroup")), SUB)
        add(fields.get("topic"), SUB)
    elif code == RequestCode.QUERY_MESSAGE or code == RequestCode.VIEW_MESSAGE_BY_ID:
        topic = fields.get("topic")
        if topic is not None:
            needed[topic] = LOOKUP
    elif code == RequestCode.HEART_BEAT:
        try:
            heartbeat = decode_heartbeat(request.body, HeartbeatData)
        except HeartbeatBodyError:
            raise DeniedError(
                "HeartbeatData cannot be decoded, so its permissions cannot be checked"
            ) from None
        for consumer in heartbeat.consumerDataSet or ():
            if consumer.groupName is not None:
                needed[RETRY_PREFIX + consumer.groupName] = SUB
            for subscription in consumer.subscriptionDataSet or ():
                if subscription.topic is not None:
                    needed[subscription.topic] = SUB
    elif code == RequestCode.PULL_MESSAGE:
        topic = fields.get("topic")
        if topic is not None:
            needed[topic] = SUB
        group = fields.get("consumerGroup")
        if group is not None:
            needed[RETRY_PREFIX + group] = SUB
    elif code == RequestCode.UNREGISTER_CLIENT or code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        group = fields.get("consumerGroup")
        if group is not None:
            needed[RETRY_PREFIX + group] = SUB
    return needed


def _retry(group: str | None) -> str | None:
    """``PlainAccessResource.getRetryTopic``: null stays null."""
    return None if group is None else RETRY_PREFIX + group


class AccessValidator:
    """Checks requests against one loaded ``plain_acl.yml``."""

    __slots__ = ("config",)

    def __init__(self, config: AclConfig) -> None:
        self.config = config

    def denial(self, request: RemotingCommand, remote_host: str | None) -> str | None:
        """None when ``request`` from ``remote_host`` may be served, else why not (the remark)."""
        try:
            self.validate(request, remote_host)
        except DeniedError as exc:
            return str(exc)
        return None

    def validate(self, request: RemotingCommand, remote_host: str | None) -> Account | None:
        """Raise ``DeniedError`` unless the request may be served; else the account it is served for,
        None when a whitelist let it through (nothing further is checked for it)."""
        if any(pattern.matches(remote_host) for pattern in self.config.global_white):
            return None
        fields = request.ext_fields or {}
        access_key = fields.get(ACCESS_KEY)
        if access_key is None:
            raise DeniedError("No accessKey is configured")
        account = self.config.accounts.get(access_key)
        if account is None:
            raise DeniedError(f"No acl config for {access_key}")
        white = account.white_remote_address
        if white is not None and white.matches(remote_host):
            return None
        if not _signature_matches(request, fields, account.secret_key):
            raise DeniedError(f"Check signature failed for accessKey={access_key}")
        needed = required_resources(request)
        if needed.get(TRACE_TOPIC) == PUB:
            return account
        if request.code in ADMIN_CODES and not account.admin:
            raise DeniedError(
                f"Need admin permission for request code={request.code}, but accessKey={access_key} is not"
            )
        check_resources(account, needed)
        return account


def check_resources(account: Account, needed: dict[str, int]) -> None:
    """Raise ``DeniedError`` unless ``account`` holds each permission ``needed`` (resource -> perm;
    a group as its ``%RETRY%`` topic). Shared by both ports: the gRPC port derives ``needed`` from
    its own requests (``server.grpc.access``)."""
    if needed.get(TRACE_TOPIC) == PUB:
        return
    if not needed or (account.admin and not account.resource_perms):
        return
    for resource, perm in needed.items():
        is_group = resource.startswith(RETRY_PREFIX)
        owned = account.resource_perms.get(resource)
        if owned is None:
            owned = account.default_group_perm if is_group else account.default_topic_perm
        # An entry of its own decides alone, as in Java's checkPerm: "TopicA=DENY" (or "=PUB")
        # refuses TopicA even when the default would grant it.
        if not check_permission(perm, owned):
            what = f"group:{resource[len(RETRY_PREFIX) :]}" if is_group else f"topic:{resource}"
            raise DeniedError(f"No default permission for {what}")


def _signature_matches(request: RemotingCommand, fields: dict[str, str], secret_key: str) -> bool:
    given = fields.get(SIGNATURE)
    if given is None:
        return False
    given_bytes = given.encode("utf-8", "replace")
    # Clients since 4.9.4 sign the flag, so that form is tried first; 4.9.x brokers verify without it.
    forms: tuple[tuple[str, ...], ...] = ((), (UNIQUE_KEY_QUERY,)) if UNIQUE_KEY_QUERY in fields else ((),)
    return any(
        hmac.compare_digest(
            acl_signature(fields, request.body, secret_key, exclude).encode("ascii"), given_bytes
        )
        for exclude in forms
    )
