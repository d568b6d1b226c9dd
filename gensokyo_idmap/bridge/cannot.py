"""What the QQ bot platform (or the daemon) cannot do, by OneBot action: pure data.

Every OneBot v11 and go-cqhttp action (:mod:`gensokyo_idmap.onebot.action_names`) that the
daemon does not carry out is here with its own reason, and a call of it fails with retcode
103 (:class:`~gensokyo_idmap.errors.UnsupportedError`) saying that reason, never ``ok`` as
if it had been done, and never 1404, which says the name is unknown
(docs/wire-mapping.md, "What the platform cannot do"). A test holds the table to the two
lists: each of their names is answered or here, and nothing here is answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["CANNOT", "refusal"]

_NO_WAY: Final = "the QQ bot platform gives a bot no way to "
_NO_FORWARD: Final = "the QQ bot platform has no merged-forward messages for a bot to send"
_NO_FILES: Final = _NO_WAY + "reach a group's files"
_NO_FILE_SEND: Final = ("the QQ bot platform does not let a bot send files yet (its file type 4 "
                        "is not open)")
_NO_WEB_LOGIN: Final = ("a bot signs in to the QQ bot platform with its AppID and secret: it has "
                        "no QQ web cookies or CSRF token")
_NO_MODEL: Final = "a bot is no QQ client: it has no device model to show"
_NO_NOTICE: Final = _NO_WAY + "read, post or delete group announcements"
_NO_ONE_WAY: Final = "the QQ bot platform has no one-way friends"
_NO_ESSENCE: Final = _NO_WAY + "mark, unmark or list a group's essence messages"
_NO_OCR: Final = "the QQ bot platform offers a bot no OCR"
_NO_WORDS: Final = "the QQ bot platform offers a bot no word segmentation"
_NO_ROLES: Final = "gensokyo-idmap does not manage guild roles"
_NO_GUILD_MEMBERS: Final = "gensokyo-idmap does not ask the platform for a guild's members"


def _media(kind: str, segment: str) -> str:
    return (f"a received {kind} stays at the platform's URL (the {segment} segment's url): "
            f"the QQ bot platform has no file names to fetch by, and gensokyo-idmap keeps no "
            f"copy")


#: action → why it cannot be done (a sentence saying what the platform, or the daemon, lacks)
CANNOT: Final[Mapping[str, str]] = MappingProxyType({
    # --- OneBot v11 ---------------------------------------------------------------------
    "get_forward_msg": "the QQ bot platform has no merged-forward messages: none reaches a "
                       "bot, so there is none to fetch",
    "send_like": _NO_WAY + "like a user's profile",
    "set_group_kick": _NO_WAY + "remove a member from a group",
    "set_group_ban": _NO_WAY + "mute a group member",
    "set_group_anonymous_ban": _NO_WAY + "mute an anonymous group member",
    "set_group_whole_ban": _NO_WAY + "mute a whole group",
    "set_group_admin": _NO_WAY + "make a member a group admin or take it back",
    "set_group_anonymous": _NO_WAY + "switch a group's anonymous chat",
    "set_group_card": _NO_WAY + "set a member's group card (their name in the group)",
    "set_group_name": _NO_WAY + "rename a group",
    "set_group_leave": _NO_WAY + "leave a group: a member of the group removes it",
    "set_group_special_title": _NO_WAY + "give a member a special title",
    "set_friend_add_request": _NO_WAY + "answer a friend request: users add the bot "
                              "themselves, and a friend_add notice tells of it",
    "set_group_add_request": _NO_WAY + "answer a request to join a group: members add the "
                             "bot to their group, and a group_increase notice tells of it",
    "get_group_honor_info": "the QQ bot platform tells a bot nothing of a group's honours",
    "get_cookies": _NO_WEB_LOGIN,
    "get_csrf_token": _NO_WEB_LOGIN,
    "get_credentials": _NO_WEB_LOGIN,
    "get_record": _media("voice message", "record"),
    "get_image": _media("image", "image"),
    "set_restart": "gensokyo-idmap is restarted by its service manager (systemctl restart), "
                   "not at a bot's request",
    "clean_cache": "gensokyo-idmap keeps no media cache to clean: media stay at the "
                   "platform's URLs",
    # --- go-cqhttp: messages ------------------------------------------------------------
    "send_group_forward_msg": _NO_FORWARD,
    "send_private_forward_msg": _NO_FORWARD,
    "send_forward_msg": _NO_FORWARD,
    "get_group_msg_history": "the QQ bot platform gives a bot no message history (get_msg "
                             "answers what gensokyo-idmap kept, for idmap.msgid_ttl_seconds)",
    "mark_msg_as_read": _NO_WAY + "mark a message as read",
    "set_essence_msg": _NO_ESSENCE,
    "delete_essence_msg": _NO_ESSENCE,
    "get_essence_msg_list": _NO_ESSENCE,
    # --- go-cqhttp: groups --------------------------------------------------------------
    "set_group_portrait": _NO_WAY + "change a group's avatar",
    "send_group_sign": _NO_WAY + "check in to a group",
    "get_group_system_msg": "the QQ bot platform shows a bot no join requests or "
                            "invitations: members add it to their group, and a "
                            "group_increase notice tells of it",
    "get_group_at_all_remain": _NO_WAY + "mention everyone (a message cannot carry an at "
                               "of all)",
    "_get_group_notice": _NO_NOTICE,
    "_send_group_notice": _NO_NOTICE,
    "_del_group_notice": _NO_NOTICE,
    # --- go-cqhttp: files ---------------------------------------------------------------
    "upload_group_file": _NO_FILE_SEND,
    "upload_private_file": _NO_FILE_SEND,
    "get_group_file_system_info": _NO_FILES,
    "get_group_root_files": _NO_FILES,
    "get_group_files_by_folder": _NO_FILES,
    "get_group_file_url": _NO_FILES,
    "create_group_file_folder": _NO_FILES,
    "delete_group_folder": _NO_FILES,
    "delete_group_file": _NO_FILES,
    "download_file": "gensokyo-idmap writes no files for a bot: media are sent from "
                     "http(s) URLs or base64 data",
    # --- go-cqhttp: friends and the account ---------------------------------------------
    "delete_friend": _NO_WAY + "remove a user: users remove the bot themselves",
    "delete_unidirectional_friend": _NO_ONE_WAY,
    "get_unidirectional_friend_list": _NO_ONE_WAY,
    "get_online_clients": "the QQ bot platform tells a bot of no other clients of its "
                          "account",
    "set_qq_profile": "a bot's profile is set in the QQ bot platform's console, not through "
                      "its API",
    "qidian_get_account_info": "a QQ bot is no QiDian (enterprise QQ) account",
    "_get_vip_info": "the QQ bot platform tells a bot nothing of a user's VIP status",
    "_get_model_show": _NO_MODEL,
    "_set_model_show": _NO_MODEL,
    "get_model_show": _NO_MODEL,
    "set_model_show": _NO_MODEL,
    # --- go-cqhttp: tools ---------------------------------------------------------------
    "check_url_safely": "the QQ bot platform offers a bot no URL check (the URLs a bot may "
                        "send are registered in its console)",
    ".get_word_slices": _NO_WORDS,
    "get_word_slices": _NO_WORDS,
    "ocr_image": _NO_OCR,
    ".ocr_image": _NO_OCR,
    "reload_event_filter": "gensokyo-idmap has no go-cqhttp event filter file "
                           "(onebot.white_prefixes and onebot.black_prefixes are its config)",
    # --- go-cqhttp: guilds --------------------------------------------------------------
    "get_guild_meta_by_guest": "the QQ bot platform shows a bot only the guilds it is in "
                               "(get_guild_list)",
    "get_guild_member_list": _NO_GUILD_MEMBERS,
    "get_guild_member_profile": _NO_GUILD_MEMBERS,
    "get_guild_msg": "a channel message is fetched with get_msg, by the message_id its "
                     "event carried",
    "get_guild_roles": _NO_ROLES,
    "create_guild_role": _NO_ROLES,
    "delete_guild_role": _NO_ROLES,
    "update_guild_role": _NO_ROLES,
    "set_guild_member_role": _NO_ROLES,
    "get_topic_channel_feeds": "gensokyo-idmap does not read forum channels' posts",
})


def refusal(action: str) -> str:
    """What a call of ``action`` (one of :data:`CANNOT`) answers: the action and its reason."""
    return f"{action}: {CANNOT[action]}"
