"""The bare relay: the ceiling bench/inbound.py measures the daemon against.

Run by bench/inbound.py as a subprocess, beside the daemon. It uses the same transports as
the daemon's inbound path and passes the platform's frames on untouched, with none of the
bridge: no identity store, no msgid map, no event translation, no de-duplication, no saved
gateway session.

- Gateway (``--gateway``): access token from ``--token-url``, ``GET {api-base}/gateway/bot``,
  aiohttp WebSocket client, Hello → Identify, heartbeats; every dispatch (op 0, not READY)
  is forwarded as the raw text frame, one at a time, the next read only once it was written
  to every connected consumer. (The daemon's gateway reads ahead, up to 64 events in
  flight; see bench/inbound.py on why this stays the ceiling.)
- Webhook (``--webhook-listen``): aiohttp server; the Ed25519 check of reference §3.3 on
  every callback (op 13 may come unsigned, as in the daemon), op 13 answered; a dispatch is
  forwarded as the raw body and acknowledged ``{"op":12}`` once written to every consumer
  (the daemon acknowledges after the same point). The check uses ``cryptography``; the
  daemon's uses PyNaCl, about half the CPU: the relay keeps the library it had when the
  webhook target was set against it.
- Forward WebSocket server (``--forward-ws``) at ``/``: a lifecycle frame on connect, then
  each forwarded frame in order through a per-connection queue and writer task.

It stops on SIGTERM or SIGINT. Nothing is logged but errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import deque
from typing import Any

import aiohttp
from _serve import listen, stop_on_signals
from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

DELIVERY_WAIT = 2.0  # as the daemon's pipeline: a stuck consumer delays the ack this much


class Connection:
    """One consumer: frames in order, each with a future set once it was written."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self.frames: deque[tuple[str, asyncio.Future[bool]]] = deque()
        self.wakeup = asyncio.Event()

    def publish(self, frame: str) -> asyncio.Future[bool]:
        written: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.frames.append((frame, written))
        self.wakeup.set()
        return written

    async def writer(self) -> None:
        while not self.ws.closed:
            while self.frames:
                frame, written = self.frames[0]
                await self.ws.send_str(frame)
                self.frames.popleft()
                if not written.done():
                    written.set_result(True)
            self.wakeup.clear()
            await self.wakeup.wait()


class Relay:
    def __init__(self, app_id: str, secret: str) -> None:
        self.app_id = app_id
        self.secret = secret
        raw = secret.encode("utf-8")
        self.key = Ed25519PrivateKey.from_private_bytes((raw * (32 // len(raw) + 1))[:32])
        self.public = self.key.public_key()
        self.connections: set[Connection] = set()

    async def forward(self, frame: str) -> None:
        written = [c.publish(frame) for c in self.connections]
        if written:
            await asyncio.wait(written, timeout=DELIVERY_WAIT)

    # --- forward WS server --------------------------------------------------------------------

    async def consumer(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        await ws.send_str(json.dumps({"time": int(time.time()), "self_id": int(self.app_id),
                                      "post_type": "meta_event", "meta_event_type": "lifecycle",
                                      "sub_type": "connect"}))
        conn = Connection(ws)
        self.connections.add(conn)
        writer = asyncio.create_task(conn.writer())
        try:
            async for _ in ws:  # actions are not answered: this is an inbound ceiling
                pass
        finally:
            self.connections.discard(conn)
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        return ws

    # --- webhook ------------------------------------------------------------------------------

    def verified(self, timestamp: str | None, signature: str | None, body: bytes) -> bool:
        if not timestamp or not signature or not timestamp.isdigit():
            return False
        try:
            raw = bytes.fromhex(signature)
        except ValueError:
            return False
        if len(raw) != 64 or raw[63] & 0xE0:
            return False
        try:
            self.public.verify(raw, timestamp.encode("ascii") + body)
        except InvalidSignature:
            return False
        return True

    async def webhook(self, request: web.Request) -> web.Response:
        body = await request.read()
        signature = request.headers.get("X-Signature-Ed25519")
        timestamp = request.headers.get("X-Signature-Timestamp")
        try:
            frame = json.loads(body)
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            return web.json_response({"error": "bad body"}, status=400)
        op = frame.get("op")
        if (signature is not None or op != 13) and not self.verified(timestamp, signature, body):
            return web.json_response({"error": "bad signature"}, status=401)
        if op == 13:
            d = frame.get("d") or {}
            token, ts = str(d.get("plain_token", "")), str(d.get("event_ts", ""))
            return web.json_response({"plain_token": token,
                                      "signature": self.key.sign((ts + token).encode()).hex()})
        if op == 0:
            await self.forward(body.decode("utf-8"))
        return web.json_response({"op": 12})

    # --- gateway ------------------------------------------------------------------------------

    async def gateway(self, session: aiohttp.ClientSession, api_base: str,
                      token_url: str) -> None:
        async with session.post(token_url, json={"appId": self.app_id,
                                                 "clientSecret": self.secret}) as resp:
            token = "QQBot " + (await resp.json())["access_token"]
        async with session.get(f"{api_base}/gateway/bot",
                               headers={"Authorization": token}) as resp:
            url = (await resp.json())["url"]
        async with session.ws_connect(url, heartbeat=None) as ws:
            hello = await ws.receive_json(timeout=10)
            interval = hello["d"]["heartbeat_interval"] / 1000.0
            await ws.send_json({"op": 2, "d": {"token": token, "intents": 1 << 25,
                                               "shard": [0, 1], "properties": {}}})
            seq: list[Any] = [None]

            async def beats() -> None:
                while not ws.closed:
                    await asyncio.sleep(interval)
                    await ws.send_json({"op": 1, "d": seq[0]})

            beating = asyncio.create_task(beats())
            try:
                async for message in ws:
                    if message.type != aiohttp.WSMsgType.TEXT:
                        continue
                    frame = json.loads(message.data)
                    if frame.get("op") == 0:
                        if frame.get("t") not in ("READY", "RESUMED"):
                            await self.forward(message.data)
                        seq[0] = frame.get("s") or seq[0]
            finally:
                beating.cancel()
                await asyncio.gather(beating, return_exceptions=True)


async def main(args: argparse.Namespace) -> None:
    stop = stop_on_signals()
    relay = Relay(args.app_id, args.secret)
    runners: list[web.AppRunner] = []
    forward_app = web.Application()
    forward_app.router.add_get("/", relay.consumer)
    runners.append(await listen(forward_app, args.forward_ws))
    if args.webhook_listen:
        hook_app = web.Application()
        hook_app.router.add_post(args.webhook_path, relay.webhook)
        runners.append(await listen(hook_app, args.webhook_listen))
    async with aiohttp.ClientSession() as session:
        tasks = [asyncio.create_task(stop.wait())]
        if args.gateway:
            tasks.append(asyncio.create_task(
                relay.gateway(session, args.api_base, args.token_url)))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task.exception() is not None:
                    print(f"bare relay: {task.exception()!r}", file=sys.stderr)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for runner in runners:
                await runner.cleanup()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--app-id", required=True)
    ap.add_argument("--secret", required=True)
    ap.add_argument("--forward-ws", required=True, help="host:port of the consumer server")
    ap.add_argument("--webhook-listen", default="", help="host:port; empty: no webhook")
    ap.add_argument("--webhook-path", default="/qqbot")
    ap.add_argument("--gateway", action="store_true", help="dial the platform's gateway")
    ap.add_argument("--api-base", default="")
    ap.add_argument("--token-url", default="")
    return ap.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
