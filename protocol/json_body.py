"""Request bodies in JSON (LOCK_BATCH_MQ, CHECK_CLIENT_CONFIG, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, ...),
decoded with one bound on their nesting.

msgspec decodes recursively and guards itself with the interpreter's recursion limit: a body of a
few thousand ``[`` (or ``{"a":``) stops after about a thousand levels with ``RecursionError``. That
bound keeps the cost of a hostile body to one pass over its first thousand levels, but a
``RecursionError`` is no decoding error to its callers: it escaped the processors and reached the
dispatcher's catch-all, which logs a traceback per request (issue 31 item 8). Here it is one
``JsonBodyError`` with every other way a body fails (malformed, not UTF-8, the wrong shape), so each
processor answers it as the broker answers a body fastjson cannot read (SYSTEM_ERROR with its
remark) and nothing is logged. No real client nests its bodies more than a few levels deep.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from protocol.errors import JsonBodyError

T = TypeVar("T")


def decode_json_body(body: bytes | bytearray | memoryview | None, kind: type[T] | Any = Any) -> T:
    """``body`` decoded as ``kind`` (any JSON value by default); ``JsonBodyError`` when it cannot be."""
    try:
        return msgspec.json.decode(bytes(body or b""), type=kind)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise JsonBodyError(f"the request body is not the JSON expected: {exc}") from None
    except RecursionError:
        raise JsonBodyError("the request body is JSON nested too deeply") from None
