"""Record what a real 4.9.7 broker answers to SENDs and admin codes under plain ACL (run by hand).

    python tests/server/golden/record_acl_send.py acl BROKER_PORT      # broker.conf: aclEnable=true
    python tests/server/golden/record_acl_send.py bodies BROKER_PORT   # broker.conf: aclEnable=false

The broker is ``bin/start-broker.sh STORE PORT 127.0.0.1:1`` of a copy of
``../shared/rocketmq-4.9.7-bin`` (see its README) with ``autoCreateTopicEnable=true`` and, for
``acl``, ``PLAIN_ACL_YML`` as ``home/conf/plain_acl.yml`` of the copy. Each case is one request on a
fresh connection, signed with its account's secret (``clients.acl.AclSigner``) unless it names no
account; the cases and the broker's answers (code, remark) are printed as JSON, which
``acl_send_broker_4.9.7.json`` keeps and ``tests/server/acl/test_acl_send.py`` replays.
"""

from __future__ import annotations

import asyncio
import json
import sys

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from clients.acl import AclSigner
from tests.support.harness import RawClient

SECRET = "secret123"
PLAIN_ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: subonly1
    secretKey: secret123
    admin: false
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
  - accessKey: topicdeny
    secretKey: secret123
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
  - accessKey: denyontopic
    secretKey: secret123
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - TopicA=DENY
  - accessKey: pubonly1
    secretKey: secret123
    admin: false
    defaultTopicPerm: PUB
    defaultGroupPerm: DENY
  - accessKey: admin123
    secretKey: secret123
    admin: true
"""


def v1(topic: str, group: str = "g") -> dict[str, str]:
    """SendMessageRequestHeader as the 4.9.7 client fills it (``producerGroup``, no ``group``)."""
    return {
        "producerGroup": group,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": "1",
        "flag": "0",
        "properties": "",
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
    }


def v2(topic: str, group: str = "g") -> dict[str, str]:
    """SendMessageRequestHeaderV2: ``a`` is the producer group, ``b`` the topic."""
    return {
        "a": group,
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": "1",
        "h": "0",
        "i": "",
        "j": "0",
        "k": "false",
        "m": "false",
    }


CREATE_TOPIC = {
    "topic": "TopicC",
    "defaultTopic": "TBW102",
    "readQueueNums": "1",
    "writeQueueNums": "1",
    "perm": "6",
    "topicFilterType": "SINGLE_TAG",
    "topicSysFlag": "0",
    "order": "false",
}


def acl_cases() -> list[dict]:
    cases = []
    for ak in ("subonly1", "topicdeny", "denyontopic", "pubonly1", "admin123"):
        for name, code, fields in (
            ("SEND_MESSAGE TopicA", 10, v1("TopicA")),
            ("SEND_MESSAGE_V2 TopicA", 310, v2("TopicA")),
            ("SEND_MESSAGE_V2 TopicB", 310, v2("TopicB")),
            ("SEND_MESSAGE_V2 %RETRY%G", 310, v2("%RETRY%G", group="G")),
            ("SEND_MESSAGE %RETRY%G", 10, v1("%RETRY%G", group="G")),
            ("SEND_MESSAGE_V2 RMQ_SYS_TRACE_TOPIC", 310, v2("RMQ_SYS_TRACE_TOPIC")),
            ("UPDATE_AND_CREATE_TOPIC", 17, CREATE_TOPIC),
            ("unknown code 9999", 9999, {"topic": "TopicA"}),
        ):
            body = "78" if code in (10, 310) else None
            cases.append(
                {"case": f"{ak} {name}", "access_key": ak, "code": code, "fields": fields, "body_hex": body}
            )
    cases.append(
        {
            "case": "unsigned unknown code 9999",
            "access_key": None,
            "code": 9999,
            "fields": {"topic": "TopicA"},
            "body_hex": None,
        }
    )
    cases.append(
        {
            "case": "unsigned SEND_MESSAGE_V2",
            "access_key": None,
            "code": 310,
            "fields": v2("TopicA"),
            "body_hex": "78",
        }
    )
    for name, body in (("non-UTF-8 body", b"\xff\xfe{"), ("[{},{}] body", b"[{},{}]"), ("{} body", b"{}")):
        cases.append(
            {
                "case": f"admin123 HEART_BEAT {name}",
                "access_key": "admin123",
                "code": 34,
                "fields": {},
                "body_hex": body.hex(),
            }
        )
    return cases


def body_cases() -> list[dict]:
    raw = [
        ("HEART_BEAT non-UTF-8 bytes", 34, {}, b"\xff\xfe{"),
        ("HEART_BEAT array body", 34, {}, b"[{},{}]"),
        ("HEART_BEAT no body", 34, {}, None),
        ("HEART_BEAT {}", 34, {}, b"{}"),
        ("HEART_BEAT truncated", 34, {}, b'{"clientID":"c'),
        ("UNREGISTER_CLIENT non-UTF-8 body", 35, {"clientID": "c", "consumerGroup": "G"}, b"\xff\xfe{"),
        ("LOCK_BATCH_MQ non-UTF-8 body", 41, {}, b"\xff\xfe{"),
        ("UNLOCK_BATCH_MQ non-UTF-8 body", 42, {}, b"\xff\xfe{"),
        ("CHECK_CLIENT_CONFIG non-UTF-8 body", 46, {}, b"\xff\xfe{"),
        ("GET_CONSUMER_LIST_BY_GROUP non-UTF-8 body", 38, {"consumerGroup": "G"}, b"\xff\xfe{"),
    ]
    return [
        {
            "case": n,
            "access_key": None,
            "code": c,
            "fields": f,
            "body_hex": b.hex() if b is not None else None,
        }
        for n, c, f, b in raw
    ]


async def ask(port: int, cases: list[dict]) -> list[dict]:
    for case in cases:
        client = await RawClient.connect("127.0.0.1", port)
        body = bytes.fromhex(case["body_hex"]) if case["body_hex"] is not None else None
        request = RawClient.request(case["code"], dict(case["fields"]), body)
        if case["access_key"]:
            AclSigner(case["access_key"], SECRET)(request)
        answer = await client.call(request)
        case["broker_code"], case["broker_remark"] = answer.code, answer.remark
        await client.close()
    return cases


if __name__ == "__main__":
    which, port = sys.argv[1], int(sys.argv[2])
    print(json.dumps(asyncio.run(ask(port, acl_cases() if which == "acl" else body_cases())), indent=1))
