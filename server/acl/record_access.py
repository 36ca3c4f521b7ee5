"""The permission a request needs on the topic of a record it reaches by CommitLog offset.

VIEW_MESSAGE_BY_ID answers the record at an offset, and CONSUMER_SEND_MSG_BACK copies the record at
an offset into the caller's ``%RETRY%`` or ``%DLQ%`` topic, which the caller may then pull. Neither
request names the record's topic (a VIEW may name one, but nothing ties it to the offset), so the
check before the processor (``server.acl.validator``) cannot see it, and 4.9.7 checks only the
signature (VIEW) or the caller's own group (send-back): any account could read any topic's records.
Here, deliberately tighter than 4.9.7 (README's ACL section, RELIABILITY.md), the processor asks,
once it has read the record, whether the account may consume that topic: SUB (or GET, for a VIEW)
on the record's topic and, for a record parked in a system topic on its way somewhere else (a
delayed or half message: ``REAL_TOPIC``), on that topic too. Refused: NO_PERMISSION with the
broker's "No default permission for topic:<t>" and nothing answered or stored.

The dispatcher sets ``RECORD_ACCESS`` to the account's check around the processor call of each
code in ``RECORD_CHECKED_CODES`` once the request passed; unset (access control off, or a peer the
whitelists let through) means nothing more to check.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar

from protocol.codes import RequestCode
from protocol.message import raw_properties, read_index_fields
from protocol.message_properties import find_properties
from server.acl.config import Account
from server.acl.validator import DeniedError, check_resources

#: ``MessageConst.PROPERTY_REAL_TOPIC``: where a delayed or half message is bound.
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
_REAL_TOPIC = (PROPERTY_REAL_TOPIC.encode(),)

#: The request codes whose processor checks the topic of the record it reads.
RECORD_CHECKED_CODES = frozenset({RequestCode.VIEW_MESSAGE_BY_ID, RequestCode.CONSUMER_SEND_MSG_BACK})


class RecordAccess:
    """One request's account, to check the topics of the record its processor reads."""

    __slots__ = ("account",)

    def __init__(self, account: Account) -> None:
        self.account = account

    def denial(self, topics: Iterable[str | None], perm: int) -> str | None:
        """None when the account holds ``perm`` on every topic given (None ones skipped), else the
        NO_PERMISSION remark."""
        needed = {topic: perm for topic in topics if topic}
        try:
            check_resources(self.account, needed)
        except DeniedError as exc:
            return str(exc)
        return None


#: Set by the dispatcher around a ``RECORD_CHECKED_CODES`` processor; None: nothing to check.
RECORD_ACCESS: ContextVar[RecordAccess | None] = ContextVar("rmq_record_access", default=None)


def record_topics(record: bytes | bytearray | memoryview) -> tuple[str, str | None]:
    """A stored record's topic and its ``REAL_TOPIC`` property (None when absent), read without
    decoding the body."""
    topic = read_index_fields(record).topic
    props = raw_properties(record)
    real = find_properties(props, _REAL_TOPIC)[0] if props else None
    return topic, real
