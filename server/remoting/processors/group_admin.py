"""UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) and
DELETE_SUBSCRIPTIONGROUP (207) for ``serve --writable`` (rules: ``server.broker.group_admin``).

``mqadmin updateSubGroup`` / ``deleteSubGroup`` send them; both changes are saved to
``config/subscriptionGroup.json`` before the answer, as the broker persists them. A body the broker
could not decode (none, not JSON, no group name) is SYSTEM_ERROR, as its failed decode is.
"""

from __future__ import annotations

import asyncio
import logging

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from protocol.custom_headers import DeleteSubscriptionGroupRequestHeader
from server.broker.controller import BrokerController
from server.broker.group_admin import BAD_BODY_REMARK, all_groups_json, decode_group_config, delete_group
from server.remoting.reply import exception_answer

log = logging.getLogger(__name__)

NULL_GROUP_REMARK = "the custom field <groupName> is null"


class GroupAdminProcessor:
    """Subscription-group configs created, listed and deleted."""

    def __init__(self, broker: BrokerController) -> None:
        self._broker = broker

    async def update_and_create_subscription_group(self, request: RemotingCommand) -> RemotingCommand:
        config = decode_group_config(request.body)
        if config is None:
            return exception_answer(request, BAD_BODY_REMARK)
        self._broker.groups.put(config)
        log.info("subscription group %s created or updated", config.group_name)
        # Answered once subscriptionGroup.json holds it, as the broker answers after its persist.
        await asyncio.wrap_future(self._broker.groups.saved())
        return request.make_response(ResponseCode.SUCCESS)

    async def get_all_subscription_group_config(self, request: RemotingCommand) -> RemotingCommand:
        # megabytes at tens of thousands of groups: made on a thread, not on the event loop
        body = await asyncio.to_thread(all_groups_json, self._broker)
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def delete_subscription_group(self, request: RemotingCommand) -> RemotingCommand:
        header = DeleteSubscriptionGroupRequestHeader.from_ext_fields(request.ext_fields)
        group = header.group_name
        if group is None:
            # The broker's table refuses a null key (NullPointerException): SYSTEM_ERROR.
            return exception_answer(request, NULL_GROUP_REMARK)
        delete_group(self._broker, group, header.remove_offset)
        log.info("subscription group %s deleted (offsets removed: %s)", group, header.remove_offset)
        await asyncio.wrap_future(self._broker.groups.saved())
        return request.make_response(ResponseCode.SUCCESS)
