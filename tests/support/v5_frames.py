"""SEND requests as the 5.3.3 remoting client builds them, made from the 4.9.7 captures.

No 5.x producer could be captured, so these frames follow the 5.3.3 sources instead
(``MQClientAPIImpl.sendMessage``, ``DefaultMQProducerImpl.sendKernelImpl``, ``SendMessageRequestHeaderV2``,
``RemotingCommand``, ``RocketMQSerializable``, ``MessageDecoder``). What differs from a 4.9.7 request
for the same message:

- ``version`` is 479 (``MQVersion.CURRENT_VERSION`` of 5.3.3, as the captured ``v5_*`` frames show);
- ``MessageDecoder.messageProperties2String`` no longer drops the last separator, so the header's
  properties and every batch item's properties end with ``\\x02``;
- under ROCKETMQ serialization the V2 header is a ``FastCodesHeader``: ``a`` .. ``n`` are written in
  that order before the (empty) extFields map; the V1 header (SEND_MESSAGE, sent only when
  ``sendSmartMsg`` is off) goes through ``makeCustomHeaderToNet``'s ``HashMap`` as in JSON;
- the ``RpcRequestHeader``/``TopicRequestHeader`` fields (``ns``, ``nsd``, ``oway``, ``lo``) stay null
  and are left out: ``createSendMessageRequestHeaderV2`` copies only ``a`` .. ``n``, and the V1 header
  only gets ``bname`` (``setBrokerName``), which 4.9.7 already sent.

The request code, flag (oneway bit), opaque, body and the header's other fields are the captured
ones, so the 4.9.7 broker's answers and CommitLog for the captures are the expected values.
"""

from __future__ import annotations

import struct

from protocol.codes import RequestCode, SerializeType
from protocol.command import RemotingCommand

#: ``MQVersion.CURRENT_VERSION`` of the 5.3.3 client (``V5_3_3.ordinal()``).
V5_VERSION = 479
_V2_ORDER = "abcdefghijklmn"
_ITEM_HEAD = struct.Struct(">iiiii")


def v5_properties(text: str) -> str:
    """5.3.3's ``messageProperties2String``: every pair is followed by ``\\x02``, the last one too."""
    return text + "\x02" if text else text


def v5_batch_body(body: bytes) -> bytes:
    """Re-encode a 4.9.7 batch body as 5.3.3's ``encodeMessage`` would: properties end with ``\\x02``."""
    out: list[bytes] = []
    pos = 0
    while pos < len(body):
        _total, _magic, _crc, flag, body_len = _ITEM_HEAD.unpack_from(body, pos)
        start = pos + _ITEM_HEAD.size
        payload = body[start : start + body_len]
        (props_len,) = struct.unpack_from(">h", body, start + body_len)
        props = body[start + body_len + 2 : start + body_len + 2 + props_len]
        pos = start + body_len + 2 + props_len
        if props:
            props += b"\x02"
        total = _ITEM_HEAD.size + len(payload) + 2 + len(props)
        out.append(
            _ITEM_HEAD.pack(total, 0, 0, flag, len(payload)) + payload + struct.pack(">h", len(props)) + props
        )
    return b"".join(out)


def v5_send(request: RemotingCommand, serialize_type: SerializeType) -> RemotingCommand:
    """The 5.3.3 client's form of a captured 4.9.7 SEND request (code 10, 310 or 320)."""
    assert request.ext_fields is not None
    v2 = request.code != RequestCode.SEND_MESSAGE
    prop_key = "i" if v2 else "properties"
    fields = dict(request.ext_fields)
    if prop_key in fields:
        fields[prop_key] = v5_properties(fields[prop_key])
    if v2 and serialize_type == SerializeType.ROCKETMQ:
        fields = {k: fields[k] for k in _V2_ORDER if k in fields}
    body = bytes(request.body) if request.body is not None else None
    if body is not None and request.code == RequestCode.SEND_BATCH_MESSAGE:
        body = v5_batch_body(body)
    return RemotingCommand(
        code=request.code,
        language=request.language,
        version=V5_VERSION,
        opaque=request.opaque,
        flag=request.flag,
        ext_fields=fields,
        body=body,
        serialize_type=serialize_type,
    )
