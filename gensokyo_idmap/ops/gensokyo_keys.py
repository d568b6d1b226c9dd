"""Why each key of the Go Gensokyo ``config.yml`` has no equivalent here (pure data).

The keys are those of the Go daemon's ``template/config_template.go`` over its history
(Hoshinonyaruko/Gensokyo), besides the ones ``gensokyo_config`` carries over. An operator
converting an old file reads one line per key: what this daemon does instead, or where the
job went, so no switch is left wondering whether it was forgotten. Looked up by the key in
lower case (the template writes ``No_White_Response``, ``AMsgRetryAsPMsg_Count``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["UNKNOWN_KEY", "unmapped_reason"]

#: The reason of a key the Go daemon's template never had (a typo, a fork's own key).
UNKNOWN_KEY: Final = "not a key of the Go daemon's config template: nothing reads it"

_IMAGES: Final = ("the daemon has no image server or object storage: an image, voice or video "
                  "is uploaded to the platform from the segment's URL or base64 data")
_URLS: Final = ("URLs in a message are sent as written: no redirects, no QR codes, no domain "
                "check file (serve that from your web server)")
_TLS: Final = "TLS is left to a reverse proxy: examples/nginx.conf, docs/security.md"
_LOTUS: Final = ("daemons share one identity graph in PostgreSQL instead (idmap.backend: "
                 "postgres; see the note)")
_CONSOLE: Final = "WebUI: the console at /ui/ of api.listen instead, its login is api.token"
_COMMANDS: Final = ("the daemon answers no chat command itself: binds are `identity bind`, "
                    "POST /v1/bind or the bind_identity action")
_MARKDOWN: Final = ("no markdown templating: a framework sends markdown and keyboard "
                    "segments itself")
_GROUP_LIST: Final = ("get_group_list answers from the groups the bot has seen, without a "
                      "platform call: nothing to page")
_DEVELOPER: Final = "a developer switch of the Go daemon: nothing to set here"
_WEBHOOK: Final = ("the converted config uses the gateway; for the webhook set webhook.listen "
                   "and webhook.path (default /qqbot)")
_NO_VIRTUAL: Final = "no virtual prefixes: only onebot.white_prefixes / black_prefixes"
_INTERACTION: Final = "the daemon acknowledges every button press itself, at once"
_MSG_SWITCH: Final = ("a group's message switch is a notice (group_msg_reject / "
                      "group_msg_receive), never a message")
_LOGS: Final = "logs go to stderr: keep and rotate them with the journal or your supervisor"
_ANSWERED: Final = "every action is answered (an <action>_async one at once)"

_WHY: Final[dict[str, str]] = {
    # connection and identity
    "token": "the old bot token; the platform's access tokens now come from bot.secret",
    "use_uin": "read with uin: onebot.self_id is set from uin only when use_uin was true",
    "shard_num": "one gateway shard per daemon (qq.shard): for more, run more daemons",
    "reconnect_times": "reverse WS reconnects forever (onebot.reconnect_interval_seconds)",
    "launch_reconnect_times": "reverse WS reconnects forever, without holding up the start",
    "http_version": "OneBot v11 only, as there",
    "hash_id": "vUIN numbering is kept by migrating idmap.db; no setting needed",
    "idmap_pro": "several identities per vUIN are always possible; no setting needed",
    "auto_bind": _COMMANDS,
    "memory_msgid": "message ids live in msgid-map.db (or Redis: idmap.runtime_backend) for "
                    "idmap.msgid_ttl_seconds",
    "lazy_message_id": "virtual message ids are always exact here",
    "ramdom_seq": "each reply's msg_seq counts from an offset of its own for each start, "
                  "and one the platform calls used is retried with the next",
    # lotus: several Go daemons sharing one's idmaps and image server
    "lotus": _LOTUS,
    "lotus_password": "/getid takes no password, as lotus clients send none: allow their "
                      "networks in api.getid_allow",
    "lotus_without_idmaps": _LOTUS,
    "lotus_without_uploadpic": _IMAGES,
    "lotus_grpc": _LOTUS,
    "lotus_grpc_port": _LOTUS,
    "server_dir": _IMAGES,
    "backup_port": _CONSOLE,
    "frp_port": "the daemon builds no public URLs: no outside port to know",
    # images, voice, object storage
    **dict.fromkeys(("oss_type", "image_sizelimit", "image_limit", "guild_url_image_to_base64",
                     "url_pic_transfer", "uploadpicv2_b64", "global_server_temp_qqguild",
                     "server_temp_qqguild", "server_temp_qqguild_pool", "img_up_api_ntv2",
                     "send_error_pic_as_url", "t_cos_bucketname", "t_cos_region",
                     "t_cos_secretid", "t_cos_secretkey", "t_audit", "b_bos_bucketname",
                     "b_bce_ak", "b_bce_sk", "b_audit", "a_oss_endpoint", "a_oss_bucketname",
                     "a_oss_accesskeyid", "a_oss_accesskeysecret", "a_audit"), _IMAGES),
    "record_samplerate": "voice is uploaded as the record segment gives it: no transcoding",
    "record_bitrate": "voice is uploaded as the record segment gives it: no transcoding",
    # URLs, TLS, the webhook
    **dict.fromkeys(("identify_file", "identify_appids", "transfer_url", "visible_ip",
                     "url_to_qrimage", "qr_size"), _URLS),
    **dict.fromkeys(("crt", "key", "force_ssl", "http_port_after_ssl"), _TLS),
    "webhook_path": _WEBHOOK,
    "webhook_prefix_ip": _WEBHOOK,
    # how events are shown
    "global_channel_to_group": "channels are always shown as groups, as this switch did",
    "global_private_to_channel": "private messages stay private (message_type private)",
    "global_forum_to_channel": "forum posts are not forwarded (logged as not forwarded)",
    "global_interaction_to_message": "a button press is an `interaction` notice, never a "
                                     "message",
    "global_group_msg_rre_to_message": _MSG_SWITCH,
    "global_group_msg_reject_message": _MSG_SWITCH,
    "global_group_msg_receive_message": _MSG_SWITCH,
    "native_ob11": "events are plain OneBot v11 (onebot.extensions adds the Go daemon's "
                   "real_* fields)",
    "string_ob11": "user_id / group_id are numbers, as OneBot v11 has them (onebot."
                   "op_userid_type picks what they carry)",
    "string_action": "actions take user_id / group_id as numbers or digit strings alike",
    "transform_api_ids": "the member and group lists carry vUINs (onebot.op_userid_type)",
    "twoway_echo": "an action's echo comes back unchanged; frameworks need no switch",
    "card_nick": "sender names are empty: the platform names nobody",
    "custom_bot_name": "get_login_info names the bot `QQBot <AppID>`; no setting",
    "master_id": "no admin list: frameworks keep their own superusers",
    "title": "no window title to set",
    # prefixes and the @bot
    "remove_prefix": "the prefix check always ignores one leading '/'; the forwarded text "
                     "keeps it",
    "remove_bot_at_group": "an at of the bot itself is always left out of what it sends",
    "add_at_group": "a group @-message already starts with the @bot (onebot.remove_at drops "
                    "it)",
    "white_bypass": "the prefixes apply to every group and user",
    "white_bypass_reverse": "the prefixes apply to every group and user",
    "white_enable": "the prefixes apply to every kind of chat",
    "no_white_response": "a message held back by the prefixes gets no answer",
    "v_white_prefix_mode": _NO_VIRTUAL,
    "visual_prefixs": _NO_VIRTUAL,
    "visual_prefixs_bypass": _NO_VIRTUAL,
    "alias": "no command rewriting: frameworks get the text as sent",
    "enablechangeword": "no word replacement: text is forwarded and sent as written",
    "defaultchangeword": "no word replacement: text is forwarded and sent as written",
    # sending
    "send_delay": "no fixed delay between sends: each goes out when the platform takes it",
    "amsgretryaspmsg_count": "every send is a passive reply (docs/wire-mapping.md, Replies)",
    "dev_message_id": "every send is a passive reply (docs/wire-mapping.md, Replies)",
    "forward_msg_limit": "a forward segment is refused: the platform cannot carry it",
    "auto_withdraw": "no automatic recall: a framework recalls with delete_msg",
    "auto_withdraw_time": "no automatic recall: a framework recalls with delete_msg",
    "bot_forum_title": "the daemon posts nothing to forums",
    "self_introduce": "no greeting of its own: frameworks get group_increase (invite) when "
                      "the bot is added",
    "downtime_message": "no maintenance answer: the daemon answers only while it runs",
    "threads_ret_msg": _ANSWERED,
    "no_ret_msg": _ANSWERED,
    "disable_error_chan": "events for a framework that is away wait in outbox.db (up to "
                          "100,000 each)",
    "save_error": "a refused send is logged with the platform's reason",
    # markdown, buttons, built-in commands
    **dict.fromkeys(("custom_template_id", "keyboard_id", "native_md", "enters",
                     "enters_except", "enters_as_block"), _MARKDOWN),
    **dict.fromkeys(("auto_put_interaction", "put_interaction_delay",
                     "put_interaction_except"), _INTERACTION),
    **dict.fromkeys(("bind_prefix", "me_prefix", "unlock_prefix", "link_prefix",
                     "music_prefix", "auto_link", "link_bots", "link_text", "link_pic",
                     "link_lines", "link_num"), _COMMANDS),
    **dict.fromkeys(("get_g_list_all_guilds", "get_g_list_delay", "get_g_list_guilds_type",
                     "get_g_list_guilds", "get_g_list_return_guilds"), _GROUP_LIST),
    # developer switches
    **dict.fromkeys(("develop_access_token_dir", "develop_bot_id", "fix_11300",
                     "http_only_bot", "do_not_replace_appid"), _DEVELOPER),
    # logs and the WebUI
    "developer_log": "log.level: debug logs every event and action",
    "save_logs": _LOGS,
    "log_suffix_per_mins": _LOGS,
    **dict.fromkeys(("disable_webui", "server_user_name", "server_user_password"), _CONSOLE),
}


def unmapped_reason(key: str) -> str:
    """Why the old key ``key`` (under ``settings``) has no equivalent."""
    return _WHY.get(key.lower(), UNKNOWN_KEY)
