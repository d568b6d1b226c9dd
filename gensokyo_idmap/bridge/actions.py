"""OneBot v11 actions: one handler table for every transport (reverse WS, forward WS, HTTP).

A transport passes the decoded frame to :class:`ActionService` and sends back the dict it
returns; the service never raises for a client's mistake. Sends go through
:class:`~gensokyo_idmap.bridge.outbound.OutboundSender`; the information actions answer from what
the identity graph and ``last_seen`` know (the platform has no member or friend lists), a
member's name and role from their latest message (:mod:`.members`; other names are empty
rather than invented), the bot's name from the platform (:mod:`.bot_name`).

An action is one the service carries out, one OneBot v11 or go-cqhttp defines that the
platform cannot do (:mod:`~gensokyo_idmap.bridge.cannot`: retcode 103 with its reason), or
an unknown one (1404).

``_async`` calls are answered ``async`` at once and run in the background (kept referenced
until done; their failures are logged).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import structlog

from gensokyo_idmap import __version__, counters
from gensokyo_idmap.bridge.bot_name import BotName
from gensokyo_idmap.bridge.cannot import CANNOT, refusal
from gensokyo_idmap.bridge.chat import GROUP_CHAT_KINDS, Chat, ChatKind
from gensokyo_idmap.bridge.guild_actions import GuildActions, GuildPlatform
from gensokyo_idmap.bridge.members import profiles_of
from gensokyo_idmap.bridge.outbound import OutboundSender, Target, failure_detail
from gensokyo_idmap.errors import (
    BadInputError,
    IdmapError,
    NotFoundError,
    PlatformError,
    UnsupportedError,
)
from gensokyo_idmap.identity import OpenId, RawId, RUin, VUin, openid_prefix, parse_key
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.onebot.actions import (
    ActionRequest,
    async_accepted,
    bool_param,
    failed,
    failed_from,
    int_param,
    ok,
    parse_action,
    str_param,
    unknown_action,
)
from gensokyo_idmap.onebot.message import (
    Segment,
    normalize_message,
    parse_cq,
    segments_to_cq,
    segments_to_json,
)
from gensokyo_idmap.onebot.status import StatusSource, unknown
from gensokyo_idmap.runtime.msgid import MessageIds, check_virtual_id

__all__ = ["ActionService"]

log = structlog.get_logger("gensokyo_idmap.actions")

Params = Mapping[str, Any]
Handler = Callable[[Params], Awaitable[Any]]
#: The most entries a list action walks (friend, group and member lists).
LIST_LIMIT: Final = 10_000
_RETCODE_INTERNAL: Final = 102
#: The start of every guild-side (channel, guild user) key.
_RAW_PREFIX: Final = "raw:"
#: Quick-operation fields (reference §1.2) the platform cannot carry out, and what they ask.
_QUICK_CANNOT: Final = {"delete": "recall a member's message", "kick": "kick a member",
                        "ban": "mute a member"}
#: OneBot message_type → (chat kind, the param naming the chat).
_CHATS: Final[dict[str, tuple[ChatKind, str]]] = {"group": ("group", "group_id"),
                                                   "private": ("c2c", "user_id")}


class ActionService:
    def __init__(self, sender: OutboundSender, clock: Callable[[], float] = time.time, *,
                 list_channels_as_groups: bool = True,
                 status: StatusSource = unknown) -> None:
        """``status``: its bot's, which ``get_status`` answers (the daemon hands the one
        its heartbeats say: :mod:`gensokyo_idmap.onebot.status`; without one: not known)."""
        self.sender = sender
        self.status = status
        #: ``onebot.list_channels_as_groups``: ``get_group_list`` lists the channels seen
        self.list_channels_as_groups = list_channels_as_groups
        self.members = profiles_of(sender.graph)
        self.graph: IdentityGraph = sender.graph
        self.msgids: MessageIds = sender.msgids
        self.app_id = sender.settings.app_id
        self.self_id = sender.settings.self_id
        self._clock = clock
        self._background: set[asyncio.Task[Any]] = set()
        self._timers: dict[str, counters.Durations] = {}
        self.handlers: dict[str, Handler] = {
            "send_msg": self.send_msg,
            "send_group_msg": self.send_group_msg,
            "send_private_msg": self.send_private_msg,
            "delete_msg": self.delete_msg,
            "get_msg": self.get_msg,
            "get_login_info": self.get_login_info,
            "get_stranger_info": self.get_stranger_info,
            "get_friend_list": self.get_friend_list,
            "get_group_info": self.get_group_info,
            "get_group_list": self.get_group_list,
            "get_group_member_info": self.get_group_member_info,
            "get_group_member_list": self.get_group_member_list,
            "get_status": self.get_status,
            "get_version_info": self.get_version_info,
            "can_send_image": self.can_send,
            "can_send_record": self.can_send,
            ".handle_quick_operation": self.handle_quick_operation,
            "get_supported_actions": self.get_supported_actions,
            "bind_identity": self.bind_identity,
            "get_identity": self.get_identity,
            "send_guild_channel_msg": self.send_guild_channel_msg,
        }
        self.guild = GuildActions(sender)
        self.handlers.update(self.guild.handlers())
        openapi = sender.openapi
        self.bot_name = BotName(openapi if isinstance(openapi, GuildPlatform) else None,
                                self.app_id, clock)
        #: the known actions refused with their reason (retcode 103): what the table says
        #: the platform cannot do, unless a handler above does it (a test keeps them apart)
        self.refused = frozenset(CANNOT.keys() - self.handlers.keys())
        for action in self.refused:
            self.handlers[action] = self._cannot(action)

    # --- dispatch -------------------------------------------------------------------------

    async def __call__(self, frame: dict[str, Any]) -> dict[str, Any]:
        echo = frame.get("echo") if isinstance(frame, dict) else None
        try:
            request = parse_action(frame)
        except BadInputError as err:
            return failed_from(err, echo)
        handler = self.handlers.get(request.action)
        if handler is None:
            log.info("[onebot] unknown action", action=request.action)
            return unknown_action(request.action, echo)
        if request.queued:
            task = asyncio.create_task(self._run(handler, request))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            return async_accepted(echo)
        return await self._run(handler, request)

    async def _run(self, handler: Handler, request: ActionRequest) -> dict[str, Any]:
        timer = self._timers.get(request.action)
        if timer is None:  # one per handler name: no label lookup per action
            timer = self._timers[request.action] = counters.ACTION_SECONDS.labels(
                request.action, self.sender.settings.app_id)
        started = time.perf_counter()
        try:
            return await self._answer(handler, request)
        finally:
            timer.observe(time.perf_counter() - started)

    async def _answer(self, handler: Handler, request: ActionRequest) -> dict[str, Any]:
        try:
            data = await handler(request.params)
        except PlatformError as err:
            detail = failure_detail(err)
            log.warning("[onebot] action failed", action=request.action, reason=err.message)
            return failed(err.retcode, f"{request.action}: {detail}", request.echo)
        except IdmapError as err:
            log.info("[onebot] action refused", action=request.action, reason=err.message)
            return failed_from(err, request.echo)
        except Exception as exc:  # a bug of ours: answer anyway, the client must not hang
            log.exception("[onebot] action crashed", action=request.action)
            return failed(_RETCODE_INTERNAL, f"{request.action}: internal error "
                          f"({type(exc).__name__})", request.echo)
        return ok(data, request.echo)

    async def drain(self) -> None:
        """Wait for queued (``_async``) actions still running."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    # --- sending --------------------------------------------------------------------------

    def _message(self, params: Params) -> list[Segment]:
        if params.get("message") is None:
            raise BadInputError("message", None, "is required")
        return normalize_message(params["message"],
                                 auto_escape=bool_param(params, "auto_escape"))

    async def _chat(self, params: Params, message_type: str | None = None,
                    answering: object = None) -> Target:
        """The chat the params name: ``message_type`` (or which id is there) says the kind,
        ``group_id`` / ``user_id`` whom, an ``openid`` param which identity; ``answering``
        (the virtual id of the message the send answers) which chat it belongs to."""
        kind = message_type or str_param(params, "message_type", required=False)
        if kind is None:
            kind = "group" if params.get("group_id") is not None else "private"
        if kind not in _CHATS:
            raise BadInputError("message_type", kind, "must be group or private")
        chat_kind, field = _CHATS[kind]
        if params.get(field) is None:
            raise BadInputError(field, None, "is required")
        return await self.sender.target_of(chat_kind, params[field], field,
                                           params.get("openid"), answering)

    async def _send(self, params: Params, message_type: str | None = None) -> dict[str, int]:
        segments = self._message(params)
        answering = next((segment.get("id") for segment in segments
                          if segment.type == "reply"), None)
        target = await self._chat(params, message_type, answering)
        return {"message_id": await self.sender.send(target, segments)}

    async def send_msg(self, params: Params) -> dict[str, int]:
        return await self._send(params)

    async def send_group_msg(self, params: Params) -> dict[str, int]:
        return await self._send(params, "group")

    async def send_private_msg(self, params: Params) -> dict[str, int]:
        return await self._send(params, "private")

    async def send_guild_channel_msg(self, params: Params) -> dict[str, int]:
        """go-cqhttp's channel send: ``channel_id`` (and ``guild_id``) are the platform's
        ids, as channel events carry them."""
        return await self.guild.send_guild_channel_msg(params, self._message(params))

    async def delete_msg(self, params: Params) -> None:
        await self.sender.recall(check_virtual_id(params.get("message_id") or ""))

    def _cannot(self, action: str) -> Handler:
        """A known action the platform cannot do: refused, retcode 103, with its reason."""
        async def refuse(params: Params) -> None:
            raise UnsupportedError(refusal(action))

        return refuse

    async def handle_quick_operation(self, params: Params) -> None:
        """A quick operation for the event ``context`` (:meth:`quick_operation`)."""
        context, operation = params.get("context"), params.get("operation")
        if not isinstance(context, Mapping):
            raise BadInputError("context", context, "must be the event (an object)")
        if not isinstance(operation, Mapping):
            raise BadInputError("operation", operation, "must be an object")
        await self.quick_operation(context, operation)

    async def quick_operation(self, context: Mapping[str, Any],
                              operation: Mapping[str, Any]) -> None:
        """Carry out what the platform can of a quick operation: its ``reply`` (with
        ``at_sender``). Moderation (``delete``, ``kick``, ``ban`` set true, ``approve``
        given) has no platform API: an :class:`UnsupportedError` naming it, after the reply
        was sent (a framework that asks for both still gets its answer to the chat)."""
        wanted = [what for field, what in _QUICK_CANNOT.items()
                  if bool_param(operation, field)]
        if operation.get("approve") is not None:
            wanted.append("answer a request")
        sent = await self.quick_reply(context, operation)
        if wanted:
            done = "; the reply was sent" if sent is not None else ""
            raise UnsupportedError(f"the QQ bot platform gives a bot no way to "
                                   f"{' or '.join(wanted)}{done}")

    async def quick_reply(self, context: Mapping[str, Any],
                          operation: Mapping[str, Any]) -> int | None:
        """Carry out a quick operation's ``reply`` for the event ``context``; its message id."""
        if operation.get("reply") is None or context.get("post_type") != "message":
            return None
        segments = normalize_message(operation["reply"],
                                     auto_escape=bool_param(operation, "auto_escape"))
        kind = context.get("message_type")
        target = await self._chat(context, kind if isinstance(kind, str) else None,
                                  context.get("message_id"))
        if target.chat_kind in GROUP_CHAT_KINDS and bool_param(operation, "at_sender",
                                                                    default=True):
            user = context.get("user_id")
            if user is not None:
                segments = [Segment("at", (("qq", str(user)),)), Segment.text(" "), *segments]
        return await self.sender.send(target, segments)

    # --- messages -------------------------------------------------------------------------

    async def get_msg(self, params: Params) -> dict[str, Any]:
        """A message within its message-id TTL as a message event shows it: its content
        (array form, and ``raw_message``), ``sender.user_id`` (the author's vUIN; the bot
        for what it sent), ``group_id`` for a group's, ``time``. A message stored before
        authors and content were kept answers with what is known (C2C: the chat is the
        author); with ``idmap.keep_message_content`` off the content is empty."""
        virtual_id = check_virtual_id(params.get("message_id") or "")
        found = await self.sender.off_loop(self.msgids.lookup_content, virtual_id)
        if found is None:
            raise NotFoundError(f"message_id {virtual_id} is unknown or expired")
        record, content = found
        group = record.chat_kind.startswith("group") or record.chat_kind == "channel"
        author = content.author if content is not None else 0
        if not author:
            author = (self.self_id if record.direction == "out"
                      else 0 if group else self._vuin_of(record.app_id, record.target) or 0)
        segments = _stored_segments(None if content is None else content.message)
        answer: dict[str, Any] = {
            "time": record.created_ms // 1000, "message_type": "group" if group else "private",
            "message_id": virtual_id, "real_id": virtual_id,
            "real_message_id": record.real_id, "direction": record.direction,
            "sender": {"user_id": author, "nickname": ""} if author else {},
            "message": segments_to_json(segments), "raw_message": segments_to_cq(segments),
            "font": 0}
        if author:
            answer["user_id"] = author
        group_vuin = (self._vuin_of(record.app_id, record.target, record.chat_kind)
                      if group else None)
        if group_vuin is not None:
            answer["group_id"] = group_vuin
        return answer

    def _vuin_of(self, app_id: str, openid: str, chat_kind: str = "") -> int | None:
        """The vUIN of a chat's OpenID as a msgid record names it (a channel's: its raw
        channel id; None: unknown)."""
        try:
            if chat_kind == "channel":
                return self.graph.lookup(RawId(openid))
            return self.graph.lookup(OpenId(app_id, openid))
        except BadInputError:  # not an OpenID of this platform: no vUIN to show
            return None

    # --- information ----------------------------------------------------------------------

    async def get_login_info(self, params: Params) -> dict[str, Any]:
        """The bot's vUIN-free id and its name as the platform gives it (:mod:`.bot_name`)."""
        return {"user_id": self.self_id, "nickname": await self.bot_name.get()}

    def _known_vuin(self, params: Params, field: str) -> int:
        value = params.get(field)
        if value is None:
            raise BadInputError(field, None, "is required")
        parsed = self.sender.client_id(value, field)
        if isinstance(parsed, VUin):
            vuin = self.graph.canonical(parsed.value)
        else:
            vuin = self.graph.lookup(parsed)
        if vuin is None:
            raise NotFoundError(f"{field} {value}: no vUIN is known for it")
        return vuin

    async def get_stranger_info(self, params: Params) -> dict[str, Any]:
        vuin = self._known_vuin(params, "user_id")
        return {"user_id": vuin, "nickname": "", "sex": "unknown", "age": 0}

    def _openids_seen(self, scene_of: Callable[[str], str]) -> list[tuple[str, int, float]]:
        return self._seen(openid_prefix(self.app_id), scene_of)

    def _seen(self, prefix: str, scene_of: Callable[[str], str]) -> list[tuple[str, int, float]]:
        """(id after ``prefix``, vUIN, since) of the keys under ``prefix`` last seen in the
        scene ``scene_of(key)`` names, at most :data:`LIST_LIMIT`."""
        return [(key[len(prefix):], vuin, seen.since) for key, vuin, seen
                in self.graph.seen_in_scenes(prefix, scene_of, LIST_LIMIT)]

    def _scene(self, kind: ChatKind, key: str) -> str:
        return Chat(self.app_id, kind, key.rsplit(':', 1)[-1]).scene

    async def get_friend_list(self, params: Params) -> list[dict[str, Any]]:
        """People who talked to the bot in C2C (the platform's "friends" of a bot)."""
        return [{"user_id": vuin, "nickname": "", "remark": ""}
                for _, vuin, _ in self._openids_seen(lambda key: self._scene("c2c", key))]

    async def _group(self, params: Params) -> tuple[Chat, int]:
        """The chat a ``group_id`` names, and its vUIN: a group, or a guild channel shown as
        one (its members are the guild users seen in it)."""
        target = await self._chat(params, "group")
        if target.vuin is None:
            raise NotFoundError(f"group_id {params['group_id']}: no vUIN is known for it")
        kind: ChatKind = "channel" if target.chat_kind == "channel" else "group"
        return Chat(self.app_id, kind, target.openid), target.vuin

    def _key_prefix(self, kind: ChatKind) -> str:
        """The keys of a chat kind's members: OpenIDs of this AppID in groups, the
        platform's own ids (``raw:``) in channels."""
        return _RAW_PREFIX if kind == "channel" else openid_prefix(self.app_id)

    def _members(self, chat: Chat) -> list[tuple[str, int, float]]:
        """Who was seen in ``chat`` (its own id, last seen there too, left out)."""
        scene = chat.scene
        return [member for member in self._seen(self._key_prefix(chat.kind), lambda key: scene)
                if member[0] != chat.openid]

    def _member_counts(self, kind: ChatKind) -> dict[str, int]:
        """Members seen, by chat scene (groups, or channels): the one count both group
        actions answer, so ``get_group_list`` and ``get_group_info`` agree on every one."""
        return self.graph.seen_counts(self._key_prefix(kind),
                                      Chat.kind_prefix(self.app_id, kind))

    def _group_info(self, vuin: int, members: int) -> dict[str, Any]:
        return {"group_id": vuin, "group_name": "", "member_count": members,
                "max_member_count": 0}

    async def get_group_info(self, params: Params) -> dict[str, Any]:
        chat, vuin = await self._group(params)
        counts = await self.sender.off_loop(self._member_counts, chat.kind)
        return self._group_info(vuin, counts.get(chat.scene, 0))

    async def get_group_list(self, params: Params) -> list[dict[str, Any]]:
        """Groups the bot has seen (each group's own OpenID is last seen in its own chat),
        then, with ``onebot.list_channels_as_groups``, the guild channels it has seen (each
        channel's own id likewise), at most :data:`LIST_LIMIT` in all."""
        kinds: tuple[ChatKind, ...] = (("group", "channel") if self.list_channels_as_groups
                                       else ("group",))

        def listed() -> list[dict[str, Any]]:
            return [info for kind in kinds for info in self._chats_seen(kind)][:LIST_LIMIT]

        return await self.sender.off_loop(listed)

    def _chats_seen(self, kind: ChatKind) -> list[dict[str, Any]]:
        """The group info of each chat of ``kind`` seen (its own id last seen in it)."""
        counts = self._member_counts(kind)
        scenes, keys = Chat.kind_prefix(self.app_id, kind), self._key_prefix(kind)
        return [self._group_info(vuin, counts.get(scenes + chat, 0)) for chat, vuin, _
                in self._seen(keys, lambda key: scenes + key[len(keys):])]

    def _member_info(self, group_vuin: int, vuin: int, since: float) -> dict[str, Any]:
        """A member as v11 shows one: the name and role their latest message carried
        (:mod:`.members`: kept in memory; unknown ones empty and ``member``)."""
        profile = self.members.get(group_vuin, vuin)
        return {"group_id": group_vuin, "user_id": vuin, "nickname": profile.nickname,
                "card": profile.card, "sex": "unknown", "age": 0, "area": "", "join_time": 0,
                "last_sent_time": int(since), "level": "", "role": profile.role,
                "unfriendly": False, "title": "", "title_expire_time": 0,
                "card_changeable": False}

    async def get_group_member_info(self, params: Params) -> dict[str, Any]:
        """One member: someone last seen in the chat (one read of their ``last_seen``, not
        a walk of the members)."""
        chat, group_vuin = await self._group(params)
        user = self._known_vuin(params, "user_id")

        def since() -> float | None:
            seen = dict(self.graph.show(user).last_seen).get(chat.scene)
            return None if seen is None else seen.since

        seen = None if user == group_vuin else await self.sender.off_loop(since)
        if seen is None:
            raise NotFoundError(f"user_id {params['user_id']} was not seen in group "
                                f"{params['group_id']}")
        return self._member_info(group_vuin, user, seen)

    async def get_group_member_list(self, params: Params) -> list[dict[str, Any]]:
        chat, group_vuin = await self._group(params)
        return [self._member_info(group_vuin, vuin, since)
                for _, vuin, since in await self.sender.off_loop(self._members, chat)]

    async def get_status(self, params: Params) -> dict[str, Any]:
        """What each heartbeat says: whether the bot is online on its platform (its link
        can do its job now, ``/readyz``'s rule) and good (its stores work too)."""
        return self.status().data()

    async def get_version_info(self, params: Params) -> dict[str, Any]:
        return {"app_name": "gensokyo-idmap", "app_version": __version__,
                "protocol_version": "v11"}

    async def can_send(self, params: Params) -> dict[str, bool]:
        return {"yes": True}

    async def get_supported_actions(self, params: Params) -> list[str]:
        """go-cqhttp's list of what can be called: the actions that do something (those
        the platform cannot do answer 103, so they are left out)."""
        return sorted(self.handlers.keys() - self.refused)

    # --- identity extensions --------------------------------------------------------------

    async def bind_identity(self, params: Params) -> dict[str, Any]:
        """Extension: bind an identity (``key``: typed key, ``rUIN-…`` or OpenID) to a vUIN."""
        key = self.sender.client_id(str_param(params, "key"), "key")
        if isinstance(key, VUin):
            raise BadInputError("key", params.get("key"), "must name an identity, not a vUIN")
        vuin = int_param(params, "vuin")
        assert vuin is not None
        result = await self.graph.bind(key, vuin)
        return {"key": result.key, "vuin": result.vuin, "outcome": result.outcome,
                "previous": result.previous}

    async def get_identity(self, params: Params) -> dict[str, Any]:
        """Extension: the vUIN of ``key``, or the identities of ``vuin`` (rUINs as text)."""
        if params.get("vuin") is not None:
            vuin_param = int_param(params, "vuin")
            assert vuin_param is not None
            shown = self.graph.show(vuin_param)
            return {"vuin": shown.vuin, "identities": [_external(key)
                                                       for key in shown.identities],
                    "aliases": list(shown.aliases)}
        key = self.sender.client_id(str_param(params, "key"), "key")
        if isinstance(key, VUin):
            raise BadInputError("key", params.get("key"), "must name an identity, not a vUIN")
        found = self.graph.lookup(key)
        if found is None:
            raise NotFoundError(f"{key.key} has no vUIN")
        return {"key": key.key, "vuin": found}


def _stored_segments(message: str | None) -> list[Segment]:
    """The segments of content kept as CQ text (none when none was kept); text that does
    not parse (it never should: the map keeps whole codes) is shown as text."""
    if not message:
        return []
    try:
        return parse_cq(message)
    except BadInputError:
        return [Segment.text(message)]


def _external(key: str) -> str:
    """A stored key as a client reads it: rUINs in their ``rUIN-…`` text form."""
    parsed = parse_key(key)
    return parsed.text if isinstance(parsed, RUin) else key

