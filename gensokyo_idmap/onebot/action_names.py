"""The actions OneBot v11 and go-cqhttp define, by name: pure data, no behaviour.

A framework's action is one of three things (docs/wire-mapping.md, "Actions to platform
calls"): one the daemon carries out; one these lists name that the QQ bot platform (or the
daemon) cannot do, refused with retcode 103 and its reason
(:mod:`gensokyo_idmap.bridge.cannot`); or one nobody has heard of, retcode 1404. These lists
are what "heard of" means, so a framework calling ``set_group_card`` learns why it cannot
work instead of being told the name is unknown. A test holds the bridge to them: every name
here is either answered or refused with a reason.
"""

from __future__ import annotations

from typing import Final

__all__ = ["GO_CQHTTP_ACTIONS", "KNOWN_ACTIONS", "ONEBOT_V11_ACTIONS"]

#: Every action of the OneBot v11 standard (botuniverse/onebot-11: api/public.md, and
#: api/hidden.md's ``.handle_quick_operation``).
ONEBOT_V11_ACTIONS: Final = frozenset({
    "send_private_msg", "send_group_msg", "send_msg", "delete_msg", "get_msg",
    "get_forward_msg", "send_like",
    "set_group_kick", "set_group_ban", "set_group_anonymous_ban", "set_group_whole_ban",
    "set_group_admin", "set_group_anonymous", "set_group_card", "set_group_name",
    "set_group_leave", "set_group_special_title",
    "set_friend_add_request", "set_group_add_request",
    "get_login_info", "get_stranger_info", "get_friend_list", "get_group_info",
    "get_group_list", "get_group_member_info", "get_group_member_list",
    "get_group_honor_info",
    "get_cookies", "get_csrf_token", "get_credentials", "get_record", "get_image",
    "can_send_image", "can_send_record", "get_status", "get_version_info",
    "set_restart", "clean_cache",
    ".handle_quick_operation",
})

#: go-cqhttp's extension actions (its OneBot v11 routes beyond the standard, from
#: ``modules/api/api.go`` of its last release, and ``_get_vip_info`` of earlier ones), with
#: the names other implementations give some of them (``get_word_slices`` without the dot,
#: ``get_model_show`` / ``set_model_show`` without the underscore).
GO_CQHTTP_ACTIONS: Final = frozenset({
    # messages
    "send_group_forward_msg", "send_private_forward_msg", "send_forward_msg",
    "get_group_msg_history", "mark_msg_as_read",
    "set_essence_msg", "delete_essence_msg", "get_essence_msg_list",
    # groups
    "set_group_portrait", "send_group_sign", "get_group_system_msg",
    "get_group_at_all_remain", "_get_group_notice", "_send_group_notice", "_del_group_notice",
    # files
    "upload_group_file", "upload_private_file", "get_group_file_system_info",
    "get_group_root_files", "get_group_files_by_folder", "get_group_file_url",
    "create_group_file_folder", "delete_group_folder", "delete_group_file", "download_file",
    # friends and the account
    "delete_friend", "delete_unidirectional_friend", "get_unidirectional_friend_list",
    "get_online_clients", "set_qq_profile", "qidian_get_account_info", "_get_vip_info",
    "_get_model_show", "_set_model_show", "get_model_show", "set_model_show",
    # tools
    "check_url_safely", ".get_word_slices", "get_word_slices", "ocr_image", ".ocr_image",
    "reload_event_filter", "get_supported_actions",
    # guilds (QQ channels)
    "get_guild_service_profile", "get_guild_list", "get_guild_meta_by_guest",
    "get_guild_channel_list", "get_guild_member_list", "get_guild_member_profile",
    "get_guild_msg", "send_guild_channel_msg", "get_guild_roles", "create_guild_role",
    "delete_guild_role", "update_guild_role", "set_guild_member_role",
    "get_topic_channel_feeds",
})

#: Every action name the daemon has heard of: anything else is an unknown action (1404).
KNOWN_ACTIONS: Final = ONEBOT_V11_ACTIONS | GO_CQHTTP_ACTIONS
