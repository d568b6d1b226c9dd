"""go-cqhttp's guild actions: the ones frameworks call on connect, and the channel send.

- ``get_guild_service_profile``: the bot's own guild user (``GET /users/@me``):
  ``nickname``, ``tiny_id``, ``avatar_url``.
- ``get_guild_list``: the guilds the bot is in (``GET /users/@me/guilds``), each
  ``guild_id`` / ``guild_name`` / ``guild_display_id`` as go-cqhttp answers them.
- ``get_guild_channel_list`` (``guild_id``): the guild's channels
  (``GET /guilds/{guild_id}/channels``) in go-cqhttp's shape, plus ``group_id``: the number
  a channel's messages carry, where the daemon has seen the channel (0 otherwise).
- ``send_guild_channel_msg`` (``guild_id``, ``channel_id``, ``message``): ids are the
  platform's own (text, as the channel events carry them), never vUINs.

Without platform access, or when the platform refuses a list, the lists answer what the
daemon has seen (the channels of the legacy config table, kept by
:mod:`gensokyo_idmap.bridge.guilds`), and the refusal is logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import structlog

from gensokyo_idmap.bridge.guilds import GuildDirectory
from gensokyo_idmap.bridge.outbound import OutboundSender, Target
from gensokyo_idmap.errors import BadInputError, PlatformError
from gensokyo_idmap.identity import RawId
from gensokyo_idmap.onebot.message import Segment
from gensokyo_idmap.qq.path_ids import IdForm, path_segment

__all__ = ["GuildActions", "GuildPlatform"]

log = structlog.get_logger("gensokyo_idmap.actions")

Params = Mapping[str, Any]


@runtime_checkable
class GuildPlatform(Protocol):
    """The guild reads of the platform's OpenAPI
    (:class:`~gensokyo_idmap.qq.openapi.OpenApiClient`)."""

    async def me(self) -> dict[str, Any]: ...
    async def me_guilds(self, limit: int = 100) -> list[dict[str, Any]]: ...
    async def guild_channels(self, guild_id: str) -> list[dict[str, Any]]: ...


def _platform_id(params: Params, field: str, *, required: bool = True) -> str | None:
    """A platform id parameter (text or a number, ``raw:`` allowed), checked as a raw id
    and as a guild-side id (digits): it goes into the platform's paths (:mod:`.path_ids`),
    so a framework's ``../..`` is refused here, before anything is looked up or sent."""
    value = params.get(field)
    if value is None or value == "":
        if required:
            raise BadInputError(field, value, "is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise BadInputError(field, value, "must be the platform's id (text or a number)")
    text = str(value)
    text = text[len("raw:"):] if text.startswith("raw:") else text
    try:
        path_segment(IdForm.GUILD_SIDE, field, text)
        return RawId(text).value
    except BadInputError as err:
        raise BadInputError(field, value, err.reason) from None


class GuildActions:
    """The guild actions of one :class:`~gensokyo_idmap.bridge.actions.ActionService`."""

    def __init__(self, sender: OutboundSender) -> None:
        self.sender = sender
        self.guilds: GuildDirectory = sender.guilds

    def handlers(self) -> dict[str, Any]:
        return {"get_guild_service_profile": self.get_guild_service_profile,
                "get_guild_list": self.get_guild_list,
                "get_guild_channel_list": self.get_guild_channel_list}

    def _platform(self) -> GuildPlatform | None:
        openapi = self.sender.openapi
        return openapi if isinstance(openapi, GuildPlatform) else None

    async def get_guild_service_profile(self, params: Params) -> dict[str, Any]:
        platform = self._platform()
        if platform is None:
            raise PlatformError("get_guild_service_profile needs platform access "
                                "(bot.app_id and bot.secret)")
        me = await platform.me()
        return {"nickname": str(me.get("username") or ""), "tiny_id": str(me.get("id") or ""),
                "avatar_url": str(me.get("avatar") or "")}

    async def get_guild_list(self, params: Params) -> list[dict[str, Any]]:
        platform = self._platform()
        if platform is not None:
            try:
                guilds = await platform.me_guilds()
            except PlatformError as err:
                log.warning("[onebot] guild list from what was seen", reason=err.message)
            else:
                return [{"guild_id": g["id"], "guild_name": str(g.get("name") or ""),
                         "guild_display_id": g["id"]} for g in guilds]
        seen = sorted({guild for _, guild in await self.sender.off_loop(
            self.guilds.channels_seen)})
        return [{"guild_id": guild, "guild_name": "", "guild_display_id": guild}
                for guild in seen]

    def _channel_vuin(self, channel_id: str) -> int:
        return self.sender.graph.lookup(RawId(channel_id)) or 0

    async def get_guild_channel_list(self, params: Params) -> list[dict[str, Any]]:
        guild_id = _platform_id(params, "guild_id")
        assert guild_id is not None
        platform = self._platform()
        if platform is not None:
            try:
                channels = await platform.guild_channels(guild_id)
            except PlatformError as err:
                log.warning("[onebot] channel list from what was seen", guild=guild_id,
                            reason=err.message)
            else:
                return [self._channel(guild_id, c) for c in channels]
        graph = self.sender.graph
        found = []
        for vuin, guild in await self.sender.off_loop(self.guilds.channels_seen):
            if guild != guild_id:
                continue
            ids = [key[len("raw:"):] for key in graph.show(vuin).identities
                   if key.startswith("raw:")]
            if ids:
                found.append(self._channel(guild_id, {"id": ids[0]}) | {"group_id": vuin})
        return found

    def _channel(self, guild_id: str, channel: Mapping[str, Any]) -> dict[str, Any]:
        """A channel as go-cqhttp lists it (``slow_modes`` empty: the platform has none)."""
        return {"owner_guild_id": guild_id, "channel_id": channel["id"],
                "channel_type": channel.get("type", 0),
                "channel_name": str(channel.get("name") or ""), "create_time": 0,
                "creator_tiny_id": str(channel.get("owner_id") or ""),
                "talk_permission": channel.get("speak_permission", 0),
                "visible_type": channel.get("private_type", 0), "current_slow_mode": 0,
                "slow_modes": [], "group_id": self._channel_vuin(channel["id"])}

    async def channel_target(self, params: Params) -> Target:
        """Where ``send_guild_channel_msg`` goes (its guild is recorded when given)."""
        channel_id = _platform_id(params, "channel_id")
        assert channel_id is not None
        guild_id = _platform_id(params, "guild_id", required=False)
        vuin = await self.sender.off_loop(self.sender.graph.lookup, RawId(channel_id))
        if guild_id is not None and vuin is not None:
            known = await self.sender.off_loop(self.guilds.guild_of_channel, channel_id, vuin)
            if known is not None and known != guild_id:
                raise BadInputError("guild_id", params.get("guild_id"),
                                    f"channel {channel_id} is in guild {known}")
        return Target("channel", channel_id, vuin)

    async def send_guild_channel_msg(self, params: Params,
                                     segments: list[Segment]) -> dict[str, int]:
        target = await self.channel_target(params)
        return {"message_id": await self.sender.send(target, segments)}
