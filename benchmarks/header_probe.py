"""Replay hand-made requests with empty, missing and huge header fields; print each answer.

Point it at the real 4.9.7 broker (QUERY_MESSAGE, VIEW_MESSAGE_BY_ID, UNREGISTER_CLIENT,
QUERY_TOPIC_CONSUME_BY_WHO), at its name server (GET_ROUTEINFO_BY_TOPIC) and at ``rmq-query serve``
(all of them) to compare, over both serializations (one JSON line per request: serialization, case,
code, remark, body length, extFields). The Java harness (``shared/java-harness``) runs the broker.

    python -m benchmarks.header_probe 127.0.0.1:31211            # broker or serve
    python -m benchmarks.header_probe 127.0.0.1:31220 --only route  # name server
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys

from benchmarks.server_limits import JAVA_LONG_MAX, Peer
from protocol.codes import LanguageCode, RequestCode, SerializeType
from protocol.command import RemotingCommand
from protocol.frame import encode_frame

_opaques = itertools.count(1)


def _query(**changes: str | None) -> dict[str, str]:
    fields: dict[str, str | None] = {
        "topic": "TopicA",
        "key": "k-1",
        "maxNum": "64",
        "beginTimestamp": "0",
        "endTimestamp": JAVA_LONG_MAX,
        **changes,
    }
    return {name: value for name, value in fields.items() if value is not None}


CASES: list[tuple[str, int, dict[str, str]]] = [
    ("query key=''", RequestCode.QUERY_MESSAGE, _query(key="")),
    ("query key absent", RequestCode.QUERY_MESSAGE, _query(key=None)),
    ("query key='null'", RequestCode.QUERY_MESSAGE, _query(key="null")),
    ("query topic=''", RequestCode.QUERY_MESSAGE, _query(topic="")),
    ("query topic absent", RequestCode.QUERY_MESSAGE, _query(topic=None)),
    ("query maxNum=''", RequestCode.QUERY_MESSAGE, _query(maxNum="")),
    ("query maxNum 5000 digits", RequestCode.QUERY_MESSAGE, _query(maxNum="9" * 5000)),
    ("query maxNum 5000 zeros then 5", RequestCode.QUERY_MESSAGE, _query(maxNum="0" * 5000 + "5")),
    ("query maxNum 'many'", RequestCode.QUERY_MESSAGE, _query(maxNum="many")),
    ("query beginTimestamp ''", RequestCode.QUERY_MESSAGE, _query(beginTimestamp="")),
    ("view offset ''", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": ""}),
    ("view offset 5000 digits", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "1" * 5000}),
    ("view offset absent", RequestCode.VIEW_MESSAGE_BY_ID, {"x": "1"}),
    (
        "unregister clientID ''",
        RequestCode.UNREGISTER_CLIENT,
        {"clientID": "", "producerGroup": "", "consumerGroup": ""},
    ),
    ("unregister clientID absent", RequestCode.UNREGISTER_CLIENT, {"x": "1"}),
    ("consume-by-who topic ''", RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": ""}),
    ("consume-by-who topic absent", RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"x": "1"}),
    ("route topic ''", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": ""}),
    ("route topic absent", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"x": "1"}),
]


async def probe(host: str, port: int, only: str | None) -> None:
    for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ):
        for name, code, fields in CASES:
            if only and only not in name:
                continue
            peer = await Peer.open(port, host)
            request = RemotingCommand(
                code=code,
                language=LanguageCode.JAVA,
                version=407,
                opaque=next(_opaques),
                flag=0,
                ext_fields=fields,
                serialize_type=serialize_type,
            )
            try:
                peer.writer.write(encode_frame(request))
                answer = await peer.receive()
                if answer is None:
                    row: list[object] = [serialize_type.name, name, "closed"]
                else:
                    body = answer.body or b""
                    remark = (answer.remark or "")[:160]
                    row = [
                        serialize_type.name,
                        name,
                        answer.code,
                        remark,
                        len(body),
                        dict(answer.ext_fields or {}),
                    ]
            finally:
                peer.close()
            print(json.dumps(row))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address", help="host:port of the broker, name server or serve")
    parser.add_argument("--only", help="only the cases whose name contains this")
    args = parser.parse_args(argv)
    host, _, port = args.address.rpartition(":")
    asyncio.run(probe(host or "127.0.0.1", int(port), args.only))
    return 0


if __name__ == "__main__":
    sys.exit(main())
