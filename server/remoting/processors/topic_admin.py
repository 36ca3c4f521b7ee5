"""UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21), and the
name server's DELETE_TOPIC_IN_NAMESRV (216), for ``serve --writable``.

``mqadmin updateTopic`` and ``deleteTopic`` (and test suites creating their topics) send these.
The rules are ``server.broker.topic_admin``'s; here the request is read and, as the broker answers
only after its ``persist``, a change is answered once ``config/topics.json`` holds it (written off
the event loop). Refusals are SYSTEM_ERROR with the broker's remarks; answers carry the header the
broker's ``createResponseCommand`` gives them (none, or an empty one for GET_ALL_TOPIC_CONFIG).
"""

from __future__ import annotations

import asyncio
import logging

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import CreateTopicRequestHeader, DeleteTopicRequestHeader
from server.broker.controller import BrokerController
from server.broker.topic_admin import (
    header_check_refusal,
    system_topics,
    topic_config_wrapper_json,
    update_topic,
    update_topic_refusal,
)
from server.broker.topic_validator import admin_topic_refusal
from server.remoting.channel import CURRENT_CHANNEL
from server.remoting.reply import exception_answer, system_error

log = logging.getLogger(__name__)

#: ``createResponseCommand``'s default remark, left on answers whose code alone the broker sets.
NOT_SET_REMARK = "not set any response code"


class TopicAdminProcessor:
    """The topic table's admin requests over the broker's writable store."""

    def __init__(self, broker: BrokerController) -> None:
        self._broker = broker
        self._store = broker.store

    async def _saved(self) -> None:
        """Wait (off the loop) until the topic table's latest change is written."""
        await asyncio.wrap_future(self._store.topics_saved(self._store.topic_changes()))

    async def update_and_create_topic(self, request: RemotingCommand) -> RemotingCommand:
        fields = request.ext_fields or {}
        # Checked before the numbers are read: a request refused for its filter type or its topic
        # is refused so whatever its numbers (the broker decodes them leniently, then checks).
        check = header_check_refusal(fields.get("topicFilterType"), has_fields=bool(fields))
        if check is not None:
            return exception_answer(request, check)
        refusal = update_topic_refusal(self._store, fields.get("topic"))
        if refusal is not None:
            return system_error(request, refusal)
        header = CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        assert header.topic is not None and header.topic_filter_type is not None
        config = update_topic(
            self._store,
            header.topic,
            header.read_queue_nums,
            header.write_queue_nums,
            header.perm,
            header.topic_filter_type,
            header.topic_sys_flag,
            self._broker.clock(),
        )
        self._store.deleted_topics.discard(header.topic)
        channel = CURRENT_CHANNEL.get()
        log.info(
            "topic %s created or updated by %s: %s",
            header.topic,
            channel.client_address if channel is not None else "?",
            config.java_string(),
        )
        await self._saved()
        # The broker sets only the code on its default response, whose remark stays.
        return request.make_response(ResponseCode.SUCCESS, remark=NOT_SET_REMARK)

    async def delete_topic_in_broker(self, request: RemotingCommand) -> RemotingCommand:
        header = DeleteTopicRequestHeader.from_ext_fields(request.ext_fields)
        refusal = admin_topic_refusal(header.topic, system_topics(self._store))
        if refusal is not None:
            return system_error(request, refusal)
        assert header.topic is not None
        if self._store.delete_topic(header.topic) is not None:
            log.info("topic %s deleted", header.topic)
            await self._saved()
        else:
            log.warning("delete topic %s: no such topic", header.topic)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_all_topic_config(self, request: RemotingCommand) -> RemotingCommand:
        # megabytes at tens of thousands of topics: made on a thread, not on the event loop
        body = await asyncio.to_thread(topic_config_wrapper_json, self._store)
        return request.make_response(ResponseCode.SUCCESS, body=body, ext_fields={})

    def delete_topic_in_namesrv(self, request: RemotingCommand) -> RemotingCommand:
        """The name server forgets the topic's routes: here routes follow the topic table, which
        DELETE_TOPIC_IN_BROKER already changed, so this is SUCCESS (as the name server always is)."""
        DeleteTopicRequestHeader.from_ext_fields(request.ext_fields)
        return request.make_response(ResponseCode.SUCCESS)
