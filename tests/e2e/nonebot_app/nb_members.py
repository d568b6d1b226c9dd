"""NoneBot plugin of the end-to-end test app: members, roles and the bot's name.

- Every group message that passes NoneBot's ``GROUP_ADMIN`` permission is recorded as
  ``{"group_admin": <message_id>}``, every one that passes ``GROUP_OWNER`` as
  ``{"group_owner": <message_id>}`` (the permission reads ``sender.role``).
- A group message whose plain text is exactly ``whoami`` makes the plugin ask the daemon
  ``get_group_member_info`` of its author in that group and ``get_login_info``; the
  answers are recorded as ``{"whoami": {"message_id", "member", "login"}}`` (or
  ``{"whoami_error": "..."}``).
"""

from __future__ import annotations

from nonebot import on_message
from nonebot.adapters.onebot.v11 import Bot, GroupMessageEvent
from nonebot.adapters.onebot.v11.permission import GROUP_ADMIN, GROUP_OWNER

from record_file import record

admins = on_message(permission=GROUP_ADMIN, priority=1, block=False)
owners = on_message(permission=GROUP_OWNER, priority=1, block=False)
whoami = on_message(priority=1, block=False)


@admins.handle()
async def record_admin(event: GroupMessageEvent) -> None:
    record({"group_admin": event.message_id})


@owners.handle()
async def record_owner(event: GroupMessageEvent) -> None:
    record({"group_owner": event.message_id})


@whoami.handle()
async def answer_whoami(bot: Bot, event: GroupMessageEvent) -> None:
    if event.get_plaintext().strip() != "whoami":
        return
    try:
        member = await bot.get_group_member_info(group_id=event.group_id,
                                                 user_id=event.user_id)
        login = await bot.get_login_info()
    except Exception as exc:  # noqa: BLE001 - recorded for the test to read
        record({"whoami_error": f"{type(exc).__name__}: {exc}"})
    else:
        record({"whoami": {"message_id": event.message_id, "member": member, "login": login}})
