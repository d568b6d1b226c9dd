"""An emulated QQ bot platform for tests: token endpoint, WebSocket gateway and the OpenAPI
send endpoints, real wire format, on a free port of 127.0.0.1.

Point a daemon at it with :meth:`EmulatedPlatform.qq_config` (its config's ``qq`` section) and
the bot's ``app_id`` / ``secret`` set to :data:`APP` / :data:`SECRET`; push events with
:meth:`EmulatedPlatform.push`; read what the daemon sent in ``api_calls`` or
:meth:`EmulatedPlatform.api_requests`.

The gateway keeps every dispatch it ever sent with its seq, so a Resume replays exactly what
came after the client's seq; a test can drop connections, send op 9, or close with a code.

The OpenAPI side (reference §5) records every request in ``api_calls`` and keeps the
platform's rules: a send needs ``msg_id`` or ``event_id`` (active messages are refused with
40034105), the same ``msg_id`` + ``msg_seq`` twice is refused (40054005), at most 5 replies
per ``msg_id`` (22009), ``msg_type`` 7 needs a ``media.file_info`` this platform issued, and
only the bot's own messages can be recalled. ``fail_next`` queues (status, body) answers and
``delay_next`` a stall, for the error paths.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

from aiohttp import ClientSession, WSMsgType, web
from aiohttp.test_utils import TestServer

from gensokyo_idmap.qq.openapi import OpenApiClient
from gensokyo_idmap.qq.token import AccessTokenManager

APP = "102000001"
SECRET = "emulator-secret"


class EmulatedPlatform:
    """The platform's token endpoint, gateway and OpenAPI in one aiohttp server.

    Use as ``async with EmulatedPlatform() as platform:`` or call :meth:`start` and
    :meth:`close`. Every list attribute records what happened, for the test to assert on.
    """

    def __init__(self, heartbeat_ms: int = 200) -> None:
        self.heartbeat_ms = heartbeat_ms
        self.tokens_issued = 0
        self.session_id = str(uuid.uuid4())
        self.sent: list[dict[str, Any]] = []  # every dispatch, in seq order
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats: list[Any] = []
        self.sockets: list[web.WebSocketResponse] = []
        self.next_close_code: int | None = None
        self.interaction_acks: list[tuple[str, Any, str | None]] = []
        self.reject_next_token: bool = False
        self.server: TestServer | None = None
        self.api_calls: list[tuple[str, str, Any]] = []  # (method, path, JSON body)
        self.fail_next: list[tuple[int, dict[str, Any]]] = []
        self.delay_next: list[float] = []
        self.sent_messages: dict[str, str] = {}  # bot message id → chat path
        self.file_infos: set[str] = set()
        self._replies: dict[str, set[int]] = {}  # msg_id / event_id → msg_seqs used

    # token endpoint
    async def token(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body != {"appId": APP, "clientSecret": SECRET}:
            return web.json_response({"code": 100016, "message": "invalid appid or secret"})
        self.tokens_issued += 1
        return web.json_response({"access_token": f"T{self.tokens_issued}", "expires_in": "7200"})

    def current_token(self) -> str:
        return f"QQBot T{self.tokens_issued}"

    async def interactions(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization")
        if self.reject_next_token:
            self.reject_next_token = False
            return web.json_response({"code": 11244, "message": "token not exist"}, status=401)
        if auth != self.current_token():
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
        if request.headers.get("Authorization") != self.current_token():
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
        message_id = f"BOT{len(self.sent_messages) + 1:06d}"
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
            return web.json_response({"code": 306004, "message": "message not found"},
                                     status=400)
        del self.sent_messages[message_id]
        return web.Response(status=200)

    async def gateway_bot(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != self.current_token():
            return web.json_response({"code": 11244, "message": "token not exist"}, status=401)
        return web.json_response({"url": self.ws_url(), "shards": 1,
                                  "session_start_limit": {"total": 1000, "remaining": 999,
                                                          "reset_after": 86400000,
                                                          "max_concurrency": 1}})

    # gateway
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
            if op == 1:
                self.heartbeats.append(d)
                await ws.send_json({"op": 11})
            elif op == 2:
                self.identifies.append(d)
                if d.get("token") != self.current_token():
                    await ws.close(code=4004)
                    break
                self.session_id = str(uuid.uuid4())
                await self._dispatch(ws, "READY", {"version": 1, "session_id": self.session_id,
                                                   "user": {"id": "1", "username": "bot",
                                                            "bot": True}, "shard": [0, 1]})
            elif op == 6:
                self.resumes.append(d)
                if d.get("session_id") != self.session_id:
                    await ws.send_json({"op": 9, "d": False})
                    continue
                for event in self.sent:
                    if event["s"] > d.get("seq", 0) and event["t"] not in ("READY", "RESUMED"):
                        await ws.send_json(event)
                await self._dispatch(ws, "RESUMED", "")
        return ws

    async def _dispatch(self, ws: web.WebSocketResponse | None, t: str, d: Any,
                        event_id: str | None = None) -> dict[str, Any]:
        seq = len(self.sent) + 1
        event = {"op": 0, "s": seq, "t": t, "id": event_id or f"{t}:{seq}", "d": d}
        self.sent.append(event)
        if ws is not None and not ws.closed:
            await ws.send_json(event)
        return event

    async def push(self, t: str, d: Any) -> dict[str, Any]:
        """Send a dispatch to the live connection (or only record it, if none is open)."""
        live = next((ws for ws in reversed(self.sockets) if not ws.closed), None)
        return await self._dispatch(live, t, d)

    async def push_bytes(self, t: str, d: Any, wire: Callable[[bytes], bytes]) -> dict[str, Any]:
        """:meth:`push`, but the live socket gets ``wire`` of the frame's bytes as a text
        frame (bytes that are not UTF-8, say); a Resume replays it as :meth:`push` would."""
        live = next(ws for ws in reversed(self.sockets) if not ws.closed)
        event = await self._dispatch(None, t, d)
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
        return AccessTokenManager(APP, SECRET, session,
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


def group_message(n: int, group: str = "A1B2C3D4E5F60718293A4B5C6D7E8F90",
                  user: str = "0F1E2D3C4B5A69788796A5B4C3D2E1F0",
                  union: str | None = None) -> dict[str, Any]:
    """The ``d`` of a group message; ``union``: the author's ``union_openid``."""
    author: dict[str, Any] = {"id": user, "member_openid": user}
    if union is not None:
        author["union_openid"] = union
    return {"id": f"ROBOT1.0_gw{n}", "content": f"m{n}", "timestamp": "2025-01-01T12:00:00+08:00",
            "group_openid": group, "author": author}


def c2c_message(n: int, user: str = "0F1E2D3C4B5A69788796A5B4C3D2E1F0",
                content: str = "ping") -> dict[str, Any]:
    """The ``d`` of a ``C2C_MESSAGE_CREATE``."""
    return {"id": f"ROBOT1.0_c2c{n}", "content": content,
            "timestamp": "2025-01-01T12:00:00+08:00",
            "author": {"id": user, "user_openid": user}}
