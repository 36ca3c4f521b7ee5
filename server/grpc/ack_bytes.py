"""An AckMessageResponse as wire bytes, built directly; sans-IO.

An AckMessage of 32 receipt handles answered with protobuf objects built one ``AckMessageResultEntry``
and one copied ``Status`` per entry, then serialized them: about as long as finding the 32 leases.
The answer is a list of (message id, receipt handle, status) echoing the request, so it is written
here at once (the protobuf wire format, fields in number order, a string left out when empty as
proto3 leaves it out), the OK status's bytes made once.

``ack_response_message`` builds the same answer from protobuf objects, as ``AckMessage`` did: it is
the reference the tests compare these bytes with, and the rule of the answer's status
(``AckMessageActivity``) is written once, in ``overall_status``, for both.
"""

from __future__ import annotations

from collections.abc import Sequence

from server.grpc.message_bytes import delimited, text, varint
from server.grpc.v2 import Code, definition, service

#: The Proxy's status of an ack that has entries with different results.
MULTIPLE_RESULTS_MESSAGE = "ack has multiple results"


#: An acked entry's status (code, message), and the answer's when it is OK.
_OK = (Code.OK, Code.Name(Code.OK))


def overall_status(results: Sequence[str | None]) -> tuple[int, str]:
    """The response's status (``AckMessageActivity``): the entry's when there is one, OK when all are
    OK, else MULTIPLE_RESULTS. ``results``: per entry None (acked) or why it was not."""
    if len(results) == 1:
        return entry_status(results[0])
    if all(result is None for result in results):
        return _OK
    return Code.MULTIPLE_RESULTS, MULTIPLE_RESULTS_MESSAGE


def entry_status(result: str | None) -> tuple[int, str]:
    """An entry's status: OK "OK", or INVALID_RECEIPT_HANDLE with why."""
    if result is None:
        return _OK
    return Code.INVALID_RECEIPT_HANDLE, result


def status_bytes(code: int, message: str) -> bytes:
    """A ``Status``' fields: its code, its message unless empty."""
    return b"\x08" + varint(code) + (text(2, message) if message else b"")


#: The answer's OK status field (AckMessageResponse.status, field 1) and an OK entry's
#: (AckMessageResultEntry.status, field 3): the same bytes for every call.
_OK_STATUS = delimited(1, status_bytes(*_OK))
_OK_ENTRY_STATUS = delimited(3, status_bytes(*_OK))


def ack_response(entries: Sequence[tuple[str, str]], results: Sequence[str | None]) -> bytes:
    """The AckMessageResponse of ``entries`` (message id, receipt handle as the request gave them),
    each entry's ``result`` None when acked, else why not."""
    status = overall_status(results)
    out = [_OK_STATUS if status is _OK else delimited(1, status_bytes(*status))]
    add = out.append
    for (message_id, handle), result in zip(entries, results, strict=True):
        fields = (text(1, message_id) if message_id else b"") + (text(2, handle) if handle else b"")
        if result is None:
            fields += _OK_ENTRY_STATUS
        else:
            fields += delimited(3, status_bytes(*entry_status(result)))
        add(b"\x12" + varint(len(fields)) + fields)
    return b"".join(out)


def ack_response_message(
    entries: Sequence[tuple[str, str]], results: Sequence[str | None]
) -> service.AckMessageResponse:
    """``ack_response``'s answer as protobuf objects (the reference it is compared with)."""
    response = service.AckMessageResponse()
    for (message_id, handle), result in zip(entries, results, strict=True):
        code, message = entry_status(result)
        response.entries.add(
            message_id=message_id,
            receipt_handle=handle,
            status=definition.Status(code=code, message=message),
        )
    code, message = overall_status(results)
    response.status.CopyFrom(definition.Status(code=code, message=message))
    return response
