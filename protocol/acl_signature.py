"""The ACL request signature of RocketMQ's ``AclClientRPCHook``, shared by signer and verifier.

The signed content is every extField value, in the order of their keys sorted as Java sorts
``String``s (UTF-16 code units, which differs from Python's code-point order above U+FFFF), with
``Signature`` itself left out, then the raw body; the signature is Base64(HMAC-SHA1(secretKey,
content)). The 4.9.x broker also leaves ``_UNIQUE_KEY_QUERY`` out of what it verifies while clients
since 4.9.4 sign it, so a verifier takes ``exclude`` to compute both forms.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Iterable, Mapping

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"

#: ``MixAll.UNIQUE_MSG_QUERY_FLAG``: signed by newer clients, skipped by the 4.9.x broker's check.
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


def java_string_order(key: str) -> bytes:
    """A sort key that orders strings like Java's ``String.compareTo`` (UTF-16 code units)."""
    return key.encode("utf-16-be", "surrogatepass")


def signed_content(
    ext_fields: Mapping[str, str],
    body: bytes | bytearray | memoryview | None,
    exclude: Iterable[str] = (),
) -> bytes:
    """The bytes ``AclClientRPCHook`` signs: sorted extField values (minus ``Signature`` and
    ``exclude``), UTF-8, then the body."""
    skip = {SIGNATURE, *exclude}
    keys = [k for k in ext_fields if k not in skip]
    # Code-point order equals UTF-16 order below U+E000; ASCII keys (all real ones) skip the re-encode.
    keys.sort(key=None if "".join(keys).isascii() else java_string_order)
    # Java's getBytes(UTF_8) writes an unpaired surrogate as "?", as "replace" does.
    content = "".join(ext_fields[k] for k in keys).encode("utf-8", "replace")
    return content + bytes(body) if body else content


def acl_signature(
    ext_fields: Mapping[str, str],
    body: bytes | bytearray | memoryview | None,
    secret_key: str,
    exclude: Iterable[str] = (),
) -> str:
    """Base64 HMAC-SHA1 of ``signed_content`` under ``secret_key``."""
    # hmac.digest is the one-shot C path: about twice as fast as hmac.new(...).digest() here.
    digest = hmac.digest(secret_key.encode("utf-8"), signed_content(ext_fields, body, exclude), "sha1")
    return base64.b64encode(digest).decode("ascii")
