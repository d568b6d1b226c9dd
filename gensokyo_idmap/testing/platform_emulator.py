"""An emulated QQ bot platform for tests: token endpoint, WebSocket gateway and the OpenAPI
send endpoints, real wire format, on a free port of 127.0.0.1.

Point a daemon at it with :meth:`EmulatedPlatform.qq_config` (its config's ``qq`` section) and
the bot's ``app_id`` / ``secret`` set to :data:`APP` / :data:`SECRET` (or the ``app_id`` /
``secret`` it was made with: one platform per bot of a daemon serving several, each issuing
tokens of its own ``token_prefix``, which only it accepts); push events with
:meth:`EmulatedPlatform.push`; read what the daemon sent in ``api_calls`` or
:meth:`EmulatedPlatform.api_requests`.

The gateway keeps every dispatch it ever sent with its seq, so a Resume replays exactly what
came after the client's seq; a test can drop connections, send op 9, or close with a code.

Shards: ``EmulatedPlatform(shards=n)`` takes Identify only with ``shard: [i, n]``, 0 <= i < n
(else close 4010, as the platform's "invalid shard"), and keeps one session per shard: its
own session id, seq numbers, dispatches and connection. Each event goes to the session of
its shard (:func:`shard_of`): the platform's rule for guilds, ``(guild_id >> 22) % n``;
for the events without a guild this emulator's own rule, CRC-32 of the group's OpenID
(group events) or else of the user's OpenID (C2C, friend events), ``% n``; an event with
none of them goes to shard 0. The real platform's rule for groups and C2C is not
documented: a daemon must not depend on which shard a chat lands on, only that each event
comes on one.

The OpenAPI side (reference §5) records every request in ``api_calls`` and keeps the
platform's rules: a send needs ``msg_id`` or ``event_id`` (active messages are refused with
40034105), the same ``msg_id`` + ``msg_seq`` twice is refused (40054005), at most 5 replies
per ``msg_id`` (22009), ``msg_type`` 7 needs a ``media.file_info`` this platform issued, and
only the bot's own messages can be recalled, each once: a ``DELETE`` of a message recalled
already, or of one the bot never sent in that chat, is HTTP 404 (code
:data:`RECALL_NOT_FOUND`); ``recalled`` lists what was. ``fail_next`` queues (status, body)
answers and ``delay_next`` a stall, for the error paths.

Guilds (QQ channels): ``guilds`` holds the guilds the bot is in with their channels, served
by ``GET /users/@me/guilds`` (``limit`` / ``after`` pages) and ``GET /guilds/{id}/channels``;
``GET /users/@me`` is the bot's own guild user (:data:`BOT_USER`). Channel and guild DM
sends (``POST /channels/{channel_id}/messages``, ``POST /dms/{guild_id}/messages``) answer a
message object; a ``msg_id`` there follows the group rules (5 replies, one ``msg_seq`` each),
a send without one is an active message, which channels allow. An ``image`` must be an
http(s) URL (the platform fetches it). A ``message_reference`` (``{"message_id": ...,
"ignore_get_message_error": ...}``, botgo's ``MessageReference``) quotes a message of the
same chat: one pushed there (``AT_MESSAGE_CREATE``, ``MESSAGE_CREATE``,
``DIRECT_MESSAGE_CREATE``) or one the bot sent there and has not recalled; the answer's
message object carries it back. Of a message the platform cannot find, the send is refused
(the platform's bot docs: "the message will not be sent"; its code is undocumented, this
emulator answers 40011000) unless ``ignore_get_message_error`` is true, when it goes
without the quote.
``DELETE`` of either recalls the bot's own message.
:func:`channel_message`, :func:`direct_message`, :func:`message_delete` and
:func:`guild_member` build the ``d`` of each guild event the way the platform sends it, for
:meth:`EmulatedPlatform.push` and :meth:`~gensokyo_idmap.testing.WebhookSender.dispatch`
alike.

Names and roles: :func:`group_message` takes the author's ``username`` and
``member_role``, :func:`c2c_message` the ``username``, :func:`channel_message` the
author's ``username``, guild ``nick`` and ``roles``, as the platform sends them;
``GET /users/@me`` answers ``bot_user`` (:data:`BOT_USER` unless a test renames it).

Quotes: :func:`group_message` and :func:`c2c_message` carry a ``msg_idx`` (also as
``message_scene.ext`` text), and :func:`quoting` turns one into a message quoting another
(``message_type`` 103, ``msg_elements``), as the platform sends them; a channel or guild DM
message quotes another by its id (``message_reference``).

Mentions: :func:`mentioning` turns a group message into one that @-mentions other members
(``<@member_openid>`` in the content, ``mentions[]`` entries), everyone or the bot;
:func:`channel_message` takes the guild users it mentions and ``everyone``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession, WSMsgType, web
from aiohttp.test_utils import TestServer

from gensokyo_idmap.qq.openapi import OpenApiClient
from gensokyo_idmap.qq.token import AccessTokenManager

APP = "102000001"
SECRET = "emulator-secret"
#: The bot's own guild user (``GET /users/@me``; ``READY``'s ``user``).
BOT_USER: dict[str, Any] = {"id": "1", "username": "bot", "bot": True,
                            "avatar": "https://thirdqq.qlogo.cn/g?b=oidb&k=bot"}
GUILD = "7000000001"
CHANNEL = "8000000001"
GUILD_USER = "144115218677563300"
#: The guild message events whose messages a later ``message_reference`` can quote.
GUILD_MESSAGE_EVENTS = frozenset({"AT_MESSAGE_CREATE", "MESSAGE_CREATE",
                                  "DIRECT_MESSAGE_CREATE"})
#: The code of a recall's 404: the message was recalled already, or the bot never sent it
#: in that chat.
RECALL_NOT_FOUND = 306004


def shard_of(d: Any, count: int) -> int:
    """The shard (of ``count``) whose session gets an event with body ``d`` (module doc)."""
    if count == 1 or not isinstance(d, Mapping):
        return 0
    message = d.get("message")  # a recall names its guild inside the message
    guild = d.get("guild_id") or (message.get("guild_id") if isinstance(message, Mapping)
                                  else None)
    if isinstance(guild, str) and guild.isdigit():
        return (int(guild) >> 22) % count
    author = d.get("author")
    user = author.get("user_openid") or author.get("id") if isinstance(author, Mapping) else None
    for chat in (d.get("group_openid"), d.get("group_id"), user, d.get("openid")):
        if isinstance(chat, str) and chat:
            return zlib.crc32(chat.encode()) % count
    return 0


def group_on_shard(index: int, count: int) -> str:
    """A group OpenID whose events go to shard ``index`` of ``count`` (:func:`shard_of`)."""
    for n in range(1 << 16):
        group = f"{n:032X}"
        if shard_of({"group_openid": group}, count) == index:
            return group
    raise ValueError(f"no group found for shard {index} of {count}")


@dataclass
class ShardSession:
    """The gateway session of one shard: its id, its dispatches (seq order), its socket."""

    index: int
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    sent: list[dict[str, Any]] = field(default_factory=list)
    socket: web.WebSocketResponse | None = None

    def live(self) -> web.WebSocketResponse | None:
        return self.socket if self.socket is not None and not self.socket.closed else None


class EmulatedPlatform:
    """The platform's token endpoint, gateway and OpenAPI in one aiohttp server.

    Use as ``async with EmulatedPlatform() as platform:`` or call :meth:`start` and
    :meth:`close`. Every list attribute records what happened, for the test to assert on.
    """

    def __init__(self, heartbeat_ms: int = 200, shards: int = 1, *,
                 overlapping_tokens: bool = False, app_id: str = APP, secret: str = SECRET,
                 token_prefix: str = "T") -> None:
        self.heartbeat_ms = heartbeat_ms
        self.app_id = app_id
        self.secret = secret
        self.token_prefix = token_prefix
        # the platform keeps a token valid until it expires, even when a newer one was
        # fetched (several daemons of one bot each fetch their own); off by default, so a
        # test can stand for a token the platform replaced early (tokens_issued += 1)
        self.overlapping_tokens = overlapping_tokens
        self.tokens_issued = 0
        self.shards = [ShardSession(index) for index in range(shards)]
        self.sent: list[dict[str, Any]] = []  # every dispatch of every shard, in send order
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats: list[Any] = []
        self.sockets: list[web.WebSocketResponse] = []
        self.next_close_code: int | None = None
        self.interaction_acks: list[tuple[str, Any, str | None]] = []
        self.reject_next_token: bool = False
        # set: Identify and Resume are answered; cleared by hold_sessions()
        self._sessions_open = asyncio.Event()
        self._sessions_open.set()
        self.server: TestServer | None = None
        self.api_calls: list[tuple[str, str, Any]] = []  # (method, path, JSON body)
        self.fail_next: list[tuple[int, dict[str, Any]]] = []
        self.delay_next: list[float] = []
        self.sent_messages: dict[str, str] = {}  # bot message id → chat path (not recalled)
        self.recalled: list[str] = []  # bot message ids recalled, in order
        #: guild message id pushed → its chat (``/channels/{id}`` or ``/dms/{guild_id}``)
        self.guild_messages: dict[str, str] = {}
        #: the bot's own user, as ``GET /users/@me`` answers it (a test may rename it)
        self.bot_user: dict[str, Any] = dict(BOT_USER)
        self.file_infos: set[str] = set()
        self._replies: dict[str, set[int]] = {}  # msg_id / event_id → msg_seqs used
        #: guild id → the guild object (``channels``: its channel objects)
        self.guilds: dict[str, dict[str, Any]] = {GUILD: {
            "id": GUILD, "name": "Test guild", "icon": "", "owner_id": GUILD_USER,
            "owner": False, "member_count": 3, "max_members": 1000,
            "description": "", "joined_at": "2025-01-01T12:00:00+08:00",
            "channels": [{"id": CHANNEL, "guild_id": GUILD, "name": "general", "type": 0,
                          "sub_type": 0, "position": 1, "parent_id": "0",
                          "owner_id": GUILD_USER, "private_type": 0,
                          "speak_permission": 1}]}}

    # token endpoint
    async def token(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body != {"appId": self.app_id, "clientSecret": self.secret}:
            return web.json_response({"code": 100016, "message": "invalid appid or secret"})
        self.tokens_issued += 1
        return web.json_response({"access_token": f"{self.token_prefix}{self.tokens_issued}",
                                  "expires_in": "7200"})

    def current_token(self) -> str:
        return f"QQBot {self.token_prefix}{self.tokens_issued}"

    def token_valid(self, authorization: object) -> bool:
        """Whether ``authorization`` (``QQBot <token>``) is accepted now: the newest token,
        or with ``overlapping_tokens`` any this platform issued."""
        if not self.overlapping_tokens:
            return authorization == self.current_token()
        return authorization in {f"QQBot {self.token_prefix}{n}"
                                 for n in range(1, self.tokens_issued + 1)}

    @property
    def session_id(self) -> str:
        """The session of shard 0 (the only one when not sharding)."""
        return self.shards[0].session_id

    async def interactions(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization")
        if self.reject_next_token:
            self.reject_next_token = False
            return web.json_response({"code": 11244, "message": "token not exist"}, status=401)
        if not self.token_valid(auth):
            return web.json_response({"code": 11244, "message": "token not exist"}, status=401)
        if request.match_info["id"] == "missing":
            return web.json_response({"code": 11255, "message": "invalid request"}, status=400)
        self.interaction_acks.append((request.match_info["id"], await request.json(), auth))
        return web.Response(status=204)

    # OpenAPI
    async def _api_gate(self, request: web.Request) -> tuple[Any, web.Response | None]:
        """Record the call; answer 401 / an injected failure / after an injected stall."""
        body = await request.json() if request.can_read_body else None
        self.api_calls.append((request.method, request.path, body))
        if not self.token_valid(request.headers.get("Authorization")):
            return body, web.json_response({"code": 11244, "message": "token not exist"},
                                           status=401)
        if self.delay_next:
            await asyncio.sleep(self.delay_next.pop(0))
        if self.fail_next:
            status, error = self.fail_next.pop(0)
            return body, web.json_response(error, status=status)
        return body, None

    def api_requests(self, method: str, suffix: str = "") -> list[tuple[str, Any]]:
        """(path, body) of the recorded calls with this method whose path ends so."""
        return [(path, body) for m, path, body in self.api_calls
                if m == method and path.endswith(suffix)]

    async def send_message(self, request: web.Request) -> web.Response:
        body, refused = await self._api_gate(request)
        if refused is not None:
            return refused
        error = self._check_send(body)
        if error is not None:
            return web.json_response(error, status=400)
        message_id = f"BOT{self._next_message_number():06d}"
        self.sent_messages[message_id] = request.path
        return web.json_response({"id": message_id,
                                  "timestamp": "2025-01-01T12:00:01+08:00"})

    def _check_send(self, body: Any) -> dict[str, Any] | None:
        if not isinstance(body, dict) or not isinstance(body.get("msg_type"), int):
            return {"code": 40011000, "message": "bad request data"}
        if body["msg_type"] == 7:
            media = body.get("media")
            if not isinstance(media, dict) or media.get("file_info") not in self.file_infos:
                return {"code": 40034002, "message": "unsupported media"}
        reference = body.get("msg_id") or body.get("event_id")
        if reference is None:
            return {"code": 40034105, "message": "主动消息失败, 无权限"}
        seqs = self._replies.setdefault(reference, set())
        seq = body.get("msg_seq", 1)
        if seq in seqs:
            return {"code": 40054005, "message": "消息被去重，请检查请求msgseq"}
        if len(seqs) >= 5:
            return {"code": 22009, "message": "msg limit exceed"}
        seqs.add(seq)
        return None

    def _next_message_number(self) -> int:
        """The number of the next message the bot sends (recalled ones count: ids are never
        given twice)."""
        return len(self.sent_messages) + len(self.recalled) + 1

    async def send_guild_message(self, request: web.Request) -> web.Response:
        """``/channels/{channel_id}/messages`` and ``/dms/{guild_id}/messages``."""
        body, refused = await self._api_gate(request)
        if refused is not None:
            return refused
        if not isinstance(body, dict) or not (body.get("content") or body.get("image")
                                              or body.get("markdown") or body.get("ark")
                                              or body.get("embed")):
            return web.json_response({"code": 50006, "message": "cannot send empty message"},
                                     status=400)
        image = body.get("image")
        if image is not None and not (isinstance(image, str)
                                      and image.startswith(("http://", "https://"))):
            return web.json_response({"code": 40011000, "message": "bad request data"},
                                     status=400)
        chat = request.path.removesuffix("/messages")
        quoted, error = self._reference(body.get("message_reference"), chat)
        if error is not None:
            return web.json_response(error, status=400)
        if body.get("msg_id") or body.get("event_id"):
            error = self._check_send({"msg_type": 0, **body})
            if error is not None:
                return web.json_response(error, status=400)
        message_id = f"08BOTGUILD{self._next_message_number():06d}"
        self.sent_messages[message_id] = request.path
        where = request.match_info
        answer = {"id": message_id, "channel_id": where.get("channel_id", ""),
                  "guild_id": where.get("guild_id", ""), "content": body.get("content", ""),
                  "timestamp": "2025-01-01T12:00:01+08:00", "author": BOT_USER,
                  "direct_message": "guild_id" in where}
        if quoted is not None:
            answer["message_reference"] = {"message_id": quoted}
        return web.json_response(answer)

    def _reference(self, reference: Any, chat: str
                   ) -> tuple[str | None, dict[str, Any] | None]:
        """What a guild send's ``message_reference`` quotes (None: nothing) or the refusal:
        the quoted message must be one of this chat, unless ``ignore_get_message_error``."""
        if reference is None:
            return None, None
        quoted = reference.get("message_id") if isinstance(reference, dict) else None
        if not isinstance(quoted, str) or not quoted:
            return None, {"code": 40011000, "message": "bad request data"}
        known = (self.guild_messages.get(quoted) == chat
                 or self.sent_messages.get(quoted) == f"{chat}/messages")
        if known:
            return quoted, None
        if reference.get("ignore_get_message_error") is True:
            return None, None
        return None, {"code": 40011000, "message": "get message_reference message failed"}

    async def me(self, request: web.Request) -> web.Response:
        _, refused = await self._api_gate(request)
        return refused or web.json_response(self.bot_user)

    async def me_guilds(self, request: web.Request) -> web.Response:
        _, refused = await self._api_gate(request)
        if refused is not None:
            return refused
        limit = int(request.query.get("limit", "100"))
        after = request.query.get("after", "")
        ordered = sorted(self.guilds)
        start = ordered.index(after) + 1 if after in ordered else 0
        return web.json_response([{k: v for k, v in self.guilds[g].items() if k != "channels"}
                                  for g in ordered[start:start + limit]])

    async def guild_channels(self, request: web.Request) -> web.Response:
        _, refused = await self._api_gate(request)
        if refused is not None:
            return refused
        guild = self.guilds.get(request.match_info["guild_id"])
        if guild is None:
            return web.json_response({"code": 11281, "message": "guild not found"},
                                     status=404)
        return web.json_response(guild["channels"])

    async def upload_file(self, request: web.Request) -> web.Response:
        body, refused = await self._api_gate(request)
        if refused is not None:
            return refused
        if not isinstance(body, dict) or body.get("file_type") not in (1, 2, 3, 4) or not (
                body.get("url") or body.get("file_data")):
            return web.json_response({"code": 40011000, "message": "bad request data"},
                                     status=400)
        info = f"FILEINFO{len(self.file_infos) + 1}"
        self.file_infos.add(info)
        return web.json_response({"file_uuid": info.lower(), "file_info": info, "ttl": 3600})

    async def recall_message(self, request: web.Request) -> web.Response:
        _, refused = await self._api_gate(request)
        if refused is not None:
            return refused
        message_id = request.match_info["message_id"]
        chat_path = request.path.rsplit("/", 1)[0]
        if self.sent_messages.get(message_id) != chat_path:
            # recalled already, or never sent by the bot in this chat: not found, as the
            # platform answers a second DELETE of one message
            return web.json_response({"code": RECALL_NOT_FOUND, "message": "message not found"},
                                     status=404)
        del self.sent_messages[message_id]
        self.recalled.append(message_id)
        return web.Response(status=200)

    async def gateway_bot(self, request: web.Request) -> web.Response:
        if not self.token_valid(request.headers.get("Authorization")):
            return web.json_response({"code": 11244, "message": "token not exist"}, status=401)
        return web.json_response({"url": self.ws_url(), "shards": len(self.shards),
                                  "session_start_limit": {"total": 1000, "remaining": 999,
                                                          "reset_after": 86400000,
                                                          "max_concurrency": 1}})

    # gateway
    def hold_sessions(self) -> None:
        """From now on a connection gets its Hello, but its Identify or Resume waits
        unanswered until :meth:`release_sessions`: a platform slow to establish sessions
        (the daemon is connected to a socket, not yet to a session)."""
        self._sessions_open.clear()

    def release_sessions(self) -> None:
        self._sessions_open.set()

    async def gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.sockets.append(ws)
        await ws.send_json({"op": 10, "d": {"heartbeat_interval": self.heartbeat_ms}})
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            frame = json.loads(message.data)
            op, d = frame.get("op"), frame.get("d")
            if op in (2, 6):
                await self._sessions_open.wait()
            if op == 1:
                self.heartbeats.append(d)
                await ws.send_json({"op": 11})
            elif op == 2:
                shard = self._identified_shard(d)
                self.identifies.append(d)
                if not self.token_valid(d.get("token")):
                    await ws.close(code=4004)
                    break
                if shard is None:
                    await ws.close(code=4010)  # invalid shard
                    break
                shard.session_id = str(uuid.uuid4())
                await self._establish(shard, ws, "READY", {
                    "version": 1, "session_id": shard.session_id,
                    "user": {k: BOT_USER[k] for k in ("id", "username", "bot")},
                    "shard": [shard.index, len(self.shards)]})
            elif op == 6:
                self.resumes.append(d)
                shard = next((shard for shard in self.shards
                              if shard.session_id == d.get("session_id")), None)
                if shard is None:
                    await ws.send_json({"op": 9, "d": False})
                    continue
                # the replay reads the shard's dispatches to their end: what is pushed
                # while it runs is recorded only (the session is not established yet)
                for event in shard.sent:
                    if event["s"] > d.get("seq", 0) and event["t"] not in ("READY", "RESUMED"):
                        await ws.send_json(event)
                await self._establish(shard, ws, "RESUMED", "")
        return ws

    def _identified_shard(self, d: Any) -> ShardSession | None:
        """The shard an Identify names, None if it names none of ours."""
        named = d.get("shard", [0, 1]) if isinstance(d, dict) else None
        if (isinstance(named, list) and len(named) == 2
                and all(isinstance(n, int) for n in named)
                and named[1] == len(self.shards) and 0 <= named[0] < named[1]):
            return self.shards[named[0]]
        return None

    async def _establish(self, shard: ShardSession, ws: web.WebSocketResponse, t: str,
                         d: Any) -> None:
        """READY or RESUMED on ``ws``: from now on the shard's dispatches go there (the
        platform's rule: only to a connection whose session is established)."""
        shard.socket = ws  # before the await: no push can come in between
        await self._dispatch(shard, t, d)

    async def _dispatch(self, shard: ShardSession, t: str, d: Any, *, send: bool = True,
                        event_id: str | None = None) -> dict[str, Any]:
        """Record a dispatch of ``shard``'s session and send it on its live socket, if any
        (and ``send``)."""
        seq = len(shard.sent) + 1
        event = {"op": 0, "s": seq, "t": t, "id": event_id or f"{t}:{seq}", "d": d}
        if t in GUILD_MESSAGE_EVENTS and isinstance(d, dict) and isinstance(d.get("id"), str):
            where = (f"/dms/{d.get('guild_id')}" if t == "DIRECT_MESSAGE_CREATE"
                     else f"/channels/{d.get('channel_id')}")
            self.guild_messages[d["id"]] = where  # a later message_reference may quote it
        shard.sent.append(event)
        self.sent.append(event)
        live = shard.live()
        if send and live is not None:
            try:
                await live.send_json(event)
            except ConnectionResetError:
                pass  # the client died (kill -9) before the socket says so: a Resume replays it
        return event

    def shard_for(self, d: Any) -> ShardSession:
        """The session an event with body ``d`` goes to (:func:`shard_of`)."""
        return self.shards[shard_of(d, len(self.shards))]

    async def push(self, t: str, d: Any) -> dict[str, Any]:
        """Send a dispatch to the established connection of its shard (or only record it,
        if that has none open: the next Resume replays it)."""
        return await self._dispatch(self.shard_for(d), t, d)

    async def push_bytes(self, t: str, d: Any, wire: Callable[[bytes], bytes]) -> dict[str, Any]:
        """:meth:`push`, but the live socket gets ``wire`` of the frame's bytes as a text
        frame (bytes that are not UTF-8, say); a Resume replays it as :meth:`push` would."""
        shard = self.shard_for(d)
        live = shard.live()
        assert live is not None, f"shard {shard.index} has no live connection"
        event = await self._dispatch(shard, t, d, send=False)
        await live.send_frame(wire(json.dumps(event).encode()), WSMsgType.TEXT)
        return event

    async def send_raw(self, text: str) -> None:
        """Put any text on the live gateway socket (bad JSON, unknown ops …)."""
        live = next(ws for ws in reversed(self.sockets) if not ws.closed)
        await live.send_str(text)

    async def drop(self, code: int = 4009) -> None:
        for ws in self.sockets:
            if not ws.closed:
                await ws.close(code=code)

    async def start(self) -> TestServer:
        app = web.Application()
        app.router.add_post("/app/getAppAccessToken", self.token)
        app.router.add_get("/websocket", self.gateway)
        app.router.add_get("/gateway/bot", self.gateway_bot)
        app.router.add_put("/interactions/{id}", self.interactions)
        app.router.add_get("/users/@me", self.me)
        app.router.add_get("/users/@me/guilds", self.me_guilds)
        app.router.add_get("/guilds/{guild_id}/channels", self.guild_channels)
        for where in ("/channels/{channel_id}", "/dms/{guild_id}"):
            app.router.add_post(f"{where}/messages", self.send_guild_message)
            app.router.add_delete(f"{where}/messages/{{message_id}}", self.recall_message)
        for chat in ("groups", "users"):
            app.router.add_post(f"/v2/{chat}/{{openid}}/messages", self.send_message)
            app.router.add_post(f"/v2/{chat}/{{openid}}/files", self.upload_file)
            app.router.add_delete(f"/v2/{chat}/{{openid}}/messages/{{message_id}}",
                                  self.recall_message)
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()
        return self.server

    async def close(self) -> None:
        """Stop serving (open gateway sockets are closed with the server)."""
        if self.server is not None:
            await self.server.close()
            self.server = None

    async def __aenter__(self) -> EmulatedPlatform:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def token_manager(self, session: ClientSession) -> AccessTokenManager:
        """Our token manager, pointed at this platform's token endpoint."""
        return AccessTokenManager(self.app_id, self.secret, session,
                                  token_url=self.url("/app/getAppAccessToken"))

    def openapi(self, session: ClientSession, **options: Any) -> OpenApiClient:
        """Our OpenAPI client for this platform (``options``: retries and timeouts)."""
        return OpenApiClient(self.url("/").rstrip("/"), self.token_manager(session), session,
                             **options)

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` on this platform (after :meth:`start`)."""
        if self.server is None:
            raise RuntimeError("the emulated platform is not serving: call start() first")
        return str(self.server.make_url(path))

    def ws_url(self) -> str:
        return self.url("/websocket").replace("http://", "ws://")

    def qq_config(self) -> dict[str, Any]:
        """A daemon config's ``qq`` section: the gateway on, token and API from here."""
        return {"gateway": True, "api_base": self.url("/").rstrip("/"),
                "token_url": self.url("/app/getAppAccessToken")}

    def bot_entry(self, **keys: Any) -> dict[str, Any]:
        """An entry of a daemon config's ``bots`` for the bot of this platform: its AppID
        and secret, its ``qq`` keys from here (:meth:`qq_config`), and ``keys`` (its
        ``self_id``, its ``onebot`` connections)."""
        return {"app_id": self.app_id, "secret": self.secret, "qq": self.qq_config(), **keys}


def group_message(n: int, group: str = "A1B2C3D4E5F60718293A4B5C6D7E8F90",
                  user: str = "0F1E2D3C4B5A69788796A5B4C3D2E1F0",
                  union: str | None = None, *, username: str | None = None,
                  role: str | None = None) -> dict[str, Any]:
    """The ``d`` of a group message; ``union``: the author's ``union_openid``;
    ``username`` and ``role`` (``member`` / ``admin`` / ``owner``): the author's
    ``username`` and ``member_role``, as newer platform payloads carry them (with
    ``author.bot``)."""
    author: dict[str, Any] = {"id": user, "member_openid": user}
    if union is not None:
        author["union_openid"] = union
    if username is not None or role is not None:
        author["bot"] = False
    if username is not None:
        author["username"] = username
    if role is not None:
        author["member_role"] = role
    return {"id": f"ROBOT1.0_gw{n}", "content": f"m{n}", "timestamp": "2025-01-01T12:00:00+08:00",
            "group_openid": group, "author": author, **_indexed(f"REFIDX_gw{n}")}


def c2c_message(n: int, user: str = "0F1E2D3C4B5A69788796A5B4C3D2E1F0",
                content: str = "ping", *, username: str | None = None) -> dict[str, Any]:
    """The ``d`` of a ``C2C_MESSAGE_CREATE``; ``username``: the author's, where the
    platform sends it."""
    author: dict[str, Any] = {"id": user, "user_openid": user}
    if username is not None:
        author["username"] = username
    return {"id": f"ROBOT1.0_c2c{n}", "content": content,
            "timestamp": "2025-01-01T12:00:00+08:00",
            "author": author, **_indexed(f"REFIDX_c2c{n}")}


def _indexed(msg_idx: str) -> dict[str, Any]:
    """What names a group or C2C message for a later quote: ``msg_idx``, also as
    ``message_scene.ext`` text, with ``message_type`` 0 (a plain message)."""
    return {"msg_idx": msg_idx, "message_type": 0,
            "message_scene": {"source": "default", "ext": [f"msg_idx={msg_idx}"]}}


def quoting(d: Mapping[str, Any], quoted: Mapping[str, Any]) -> dict[str, Any]:
    """``d`` (a message's ``d``) as a message that quotes ``quoted`` (another one's ``d``),
    the way the platform sends a quote. In a group or C2C: ``message_type`` 103 with the
    quoted message as ``msg_elements[0]`` (its content, attachments, message_type, msg_idx
    and author), and ``ref_msg_idx=`` beside ``msg_idx=`` in ``message_scene.ext``. In a
    channel or guild DM (``d`` has a ``channel_id``): ``message_reference`` naming the
    quoted message's id (botgo's ``dto.Message.MessageReference``)."""
    if "channel_id" in d:
        return {**d, "message_reference": {"message_id": quoted["id"]}}
    quoted_idx = quoted["msg_idx"]
    element = {"content": quoted.get("content", ""),
               "attachments": list(quoted.get("attachments", [])),
               "message_type": quoted.get("message_type", 0), "msg_idx": quoted_idx,
               "author": {"bot": bool(quoted.get("author", {}).get("bot", False)),
                          "username": quoted.get("author", {}).get("username", "")}}
    ext = [item for item in d.get("message_scene", {}).get("ext", [])
           if not item.startswith("ref_msg_idx=")]
    return {**d, "message_type": 103, "msg_elements": [element],
            "message_scene": {"source": "default", "ext": [*ext, f"ref_msg_idx={quoted_idx}"]}}


#: The bot's own member OpenID in the groups of this platform (its ``is_you`` mention).
BOT_MEMBER = "B07B07B07B07B07B07B07B07B07B07B0"


def mentioning(d: Mapping[str, Any], *members: str, everyone: bool = False,
               at_bot: bool = False) -> dict[str, Any]:
    """``d`` (a group message's ``d``) as a message that @-mentions ``members`` (member
    OpenIDs) after its text, the way the platform sends it: ``<@member_openid>`` in the
    content and one ``mentions[]`` entry each (``scope: single``, ``id`` and
    ``member_openid`` the OpenID, ``username``, ``bot: false``, ``is_you: false``);
    ``everyone``: an @everyone too (``<qqbot-at-everyone />`` in the content, an entry
    ``{"scope": "all", "is_you": true, "username"}``); ``at_bot``: the bot is mentioned as
    well (an ``is_you`` entry of :data:`BOT_MEMBER`; the content keeps no markup of it, as
    the platform strips the @bot). Push it as ``GROUP_MESSAGE_CREATE`` (every message) or
    ``GROUP_AT_MESSAGE_CREATE``."""
    entries = list(d.get("mentions", []))
    if at_bot:
        entries.append({"scope": "single", "id": BOT_MEMBER, "member_openid": BOT_MEMBER,
                        "username": "bot", "bot": True, "is_you": True})
    entries += [{"scope": "single", "id": member, "member_openid": member,
                 "username": f"member{member[-4:]}", "bot": False, "is_you": False}
                for member in members]
    content = d.get("content", "") + "".join(f" <@{member}>" for member in members)
    if everyone:
        entries.append({"scope": "all", "is_you": True, "username": "全体成员"})
        content += " <qqbot-at-everyone />"
    return {**d, "content": content, "mentions": entries}


def _guild_author(user: str, username: str) -> dict[str, Any]:
    return {"id": user, "username": username, "bot": False,
            "avatar": f"https://thirdqq.qlogo.cn/g?b=oidb&k={user}"}


def channel_message(n: int, content: str = "ping", *, channel: str = CHANNEL,
                    guild: str = GUILD, user: str = GUILD_USER, at_bot: bool = True,
                    mentions: tuple[str, ...] = (), everyone: bool = False,
                    username: str = "alice", nick: str = "Alice",
                    roles: tuple[str, ...] = ("1",)) -> dict[str, Any]:
    """The ``d`` of ``AT_MESSAGE_CREATE`` (``at_bot``: content starts ``<@!bot>``, as the
    platform sends it to public bots) or ``MESSAGE_CREATE``; ``mentions``: other guild
    users @-mentioned after the content; ``everyone``: an @everyone after them
    (``@everyone`` in the content, ``mention_everyone: true``); ``username`` the author's,
    ``nick`` and ``roles`` their guild nick and role ids (``member``: ``1`` everyone, ``2``
    guild admin, ``4`` the owner, ``5`` channel admin)."""
    mentioned = [{"id": BOT_USER["id"], "username": BOT_USER["username"], "bot": True}] \
        if at_bot else []
    mentioned += [{"id": m, "username": f"user{m[-4:]}", "bot": False} for m in mentions]
    prefix = f"<@!{BOT_USER['id']}> " if at_bot else ""
    extra: dict[str, Any] = {"mention_everyone": True} if everyone else {}
    return {"id": f"08f1guild{n:06d}", "channel_id": channel, "guild_id": guild, **extra,
            "content": prefix + content + "".join(f" <@!{m}>" for m in mentions)
            + (" @everyone" if everyone else ""),
            "timestamp": "2025-01-01T12:00:00+08:00",
            "author": _guild_author(user, username),
            "member": {"nick": nick, "roles": list(roles),
                       "joined_at": "2024-01-01T12:00:00+08:00"},
            "mentions": mentioned, "seq": n, "seq_in_channel": str(n)}


def direct_message(n: int, content: str = "ping", *, dm_guild: str = "7000000099",
                   dm_channel: str = "8000000099", source_guild: str = GUILD,
                   user: str = GUILD_USER) -> dict[str, Any]:
    """The ``d`` of ``DIRECT_MESSAGE_CREATE``: ``guild_id`` / ``channel_id`` are the DM
    session's own, ``src_guild_id`` the guild it was opened from."""
    return {"id": f"08f1dm{n:06d}", "channel_id": dm_channel, "guild_id": dm_guild,
            "src_guild_id": source_guild, "direct_message": True, "content": content,
            "timestamp": "2025-01-01T12:00:00+08:00", "author": _guild_author(user, "alice"),
            "member": {"joined_at": "2024-01-01T12:00:00+08:00"}, "seq": n,
            "seq_in_channel": str(n)}


def message_delete(message: dict[str, Any], operator: str | None = None) -> dict[str, Any]:
    """The ``d`` of ``PUBLIC_MESSAGE_DELETE`` / ``MESSAGE_DELETE`` /
    ``DIRECT_MESSAGE_DELETE`` for a message built above (``operator``: who recalled it,
    the author by default)."""
    author = message["author"]
    deleted = {"id": message["id"], "channel_id": message["channel_id"],
               "guild_id": message["guild_id"],
               "author": {"id": author["id"], "username": author["username"],
                          "bot": author.get("bot", False)}}
    if message.get("direct_message"):
        deleted["direct_message"] = True
    return {"message": deleted, "op_user": {"id": operator or author["id"]}}


def guild_member(user: str = GUILD_USER, *, guild: str = GUILD,
                 operator: str | None = None) -> dict[str, Any]:
    """The ``d`` of ``GUILD_MEMBER_ADD`` / ``GUILD_MEMBER_REMOVE`` (``op_user_id``: who
    added or removed them; the member themselves when they joined or left)."""
    return {"guild_id": guild, "joined_at": "2025-01-01T12:00:00+08:00", "nick": "",
            "roles": ["1"], "user": _guild_author(user, "alice"),
            "op_user_id": operator or user}
