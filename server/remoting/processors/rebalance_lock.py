"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): orderly consumers' queue locks.

The bodies are the broker's ``LockBatchRequestBody`` / ``UnlockBatchRequestBody`` (group, client id,
the queues) and the answer to a lock is ``LockBatchResponseBody``: the queues the client holds now.
The rules are ``server.broker.rebalance_locks``'s.
"""

from __future__ import annotations

import msgspec

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import JsonBodyError
from protocol.json_body import decode_json_body
from server.broker.controller import BrokerController
from server.broker.rebalance_locks import QueueId
from server.remoting.reply import exception_answer


class MessageQueueData(msgspec.Struct):
    """``MessageQueue`` as fastjson writes it (fields sorted)."""

    brokerName: str | None = None
    queueId: int = 0
    topic: str | None = None


class LockBatchBody(msgspec.Struct):
    consumerGroup: str | None = None
    clientId: str | None = None
    mqSet: list[MessageQueueData] | None = None


def _queues(body: LockBatchBody) -> list[QueueId]:
    return [QueueId(mq.topic or "", mq.brokerName or "", mq.queueId) for mq in body.mqSet or ()]


def _decode(request: RemotingCommand) -> LockBatchBody | None:
    try:
        return decode_json_body(request.body, LockBatchBody)
    except JsonBodyError:  # also JSON nested too deeply: answered, never a traceback (issue 31)
        return None


class RebalanceLockProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self._broker = broker

    def lock_batch_mq(self, request: RemotingCommand) -> RemotingCommand:
        body = _decode(request)
        if body is None:
            return exception_answer(request, "LockBatchRequestBody: the request body is not a JSON object")
        locked = self._broker.locks.try_lock(
            body.consumerGroup or "", _queues(body), body.clientId or "", self._broker.clock()
        )
        held = [{"brokerName": q.broker_name, "queueId": q.queue_id, "topic": q.topic} for q in locked]
        answer = {"lockOKMQSet": held}
        return request.make_response(ResponseCode.SUCCESS, body=msgspec.json.encode(answer))

    def unlock_batch_mq(self, request: RemotingCommand) -> RemotingCommand:
        body = _decode(request)
        if body is None:
            return exception_answer(request, "UnlockBatchRequestBody: the request body is not a JSON object")
        self._broker.locks.unlock(body.consumerGroup or "", _queues(body), body.clientId or "")
        return request.make_response(ResponseCode.SUCCESS)
