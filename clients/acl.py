"""ACL request signing, as the Java client's ``AclClientRPCHook`` does it, for brokers with ACL on.

``rmq-query`` pointed at a real ACL-enabled broker must sign like mqadmin: add ``AccessKey`` (and
``SecurityToken``), concatenate every extField value in key order (Java ``String`` order, i.e. UTF-16
code units; ``Signature`` itself excluded), append the raw body, HMAC-SHA1 with the secret key, Base64
into ``Signature``. Real brokers with ACL on check it, and so does ``rmq-query serve --acl``
(``server.acl.validator``); both sides compute it with ``protocol.acl_signature``.
"""

from __future__ import annotations

from protocol.acl_signature import ACCESS_KEY, SIGNATURE, acl_signature
from protocol.acl_signature import SECURITY_TOKEN as SECRET_TOKEN
from protocol.command import RemotingCommand
from protocol.java_hashmap import as_java_hashmap

__all__ = ["ACCESS_KEY", "SECRET_TOKEN", "SIGNATURE", "AclSigner", "signature"]


def signature(
    ext_fields: dict[str, str], body: bytes | bytearray | memoryview | None, secret_key: str
) -> str:
    """The Base64 HMAC-SHA1 of the sorted extField values (``Signature`` excluded) and the body."""
    return acl_signature(ext_fields, body, secret_key)


class AclSigner:
    """An RPC hook that signs every outgoing request with one access key / secret key pair."""

    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        if not access_key or not secret_key:
            raise ValueError("ACL signing needs both an access key and a secret key")
        self.access_key = access_key
        self.secret_key = secret_key
        self.security_token = security_token

    def __call__(self, cmd: RemotingCommand) -> None:
        fields = dict(cmd.ext_fields or {})
        fields[ACCESS_KEY] = self.access_key
        if self.security_token:
            fields[SECRET_TOKEN] = self.security_token
        fields[SIGNATURE] = signature(fields, cmd.body, self.secret_key)
        cmd.ext_fields = as_java_hashmap(fields)  # where Java's HashMap puts the added keys
