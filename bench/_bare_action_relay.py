"""The bare action relay: the floor of bench/outbound.py's daemon path, with none of the daemon.

Run by bench/outbound.py as a subprocess. It speaks the same transports as the daemon's
outbound path and nothing else: an aiohttp forward-WebSocket server takes ``send_group_msg``
action frames, and for each one (in a task of its own, as the daemon runs actions) POSTs
``/v2/groups/{group_openid}/messages`` to the platform with aiohttp, then answers
``{status, retcode, data: {message_id}, echo}`` with the platform's id. The frame names the
group OpenID, ``msg_id`` and ``msg_seq`` itself: no identity lookup, no reply choice, no
msgid map, no log line. What the daemon adds to a send shows against this; what this costs
beyond calling the platform directly is the price of the hops (client → relay → platform →
relay → client) that any bridge pays.

It prints ``ready`` once listening and stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

import aiohttp
from _serve import listen, stop_on_signals
from aiohttp import web


class Relay:
    def __init__(self, session: aiohttp.ClientSession, api_base: str, authorization: str,
                 app_id: str) -> None:
        self.session = session
        self.api_base = api_base.rstrip("/")
        self.headers = {"Authorization": authorization, "X-Union-Appid": app_id}

    async def send(self, params: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.api_base}/v2/groups/{params['group_openid']}/messages"
        body = {"msg_type": 0, "content": params["message"], "msg_id": params["msg_id"],
                "msg_seq": params["msg_seq"]}
        async with self.session.post(url, json=body, headers=self.headers) as resp:
            answer = await resp.json()
            if resp.status != 200:
                return {"status": "failed", "retcode": 100, "data": None,
                        "message": str(answer)}
        return {"status": "ok", "retcode": 0, "data": {"message_id": answer.get("id")}}

    async def answer(self, ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        response = await self.send(frame.get("params") or {})
        response["echo"] = frame.get("echo")
        await ws.send_str(json.dumps(response))

    async def consumer(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        running: set[asyncio.Task[None]] = set()
        async for message in ws:
            if message.type == aiohttp.WSMsgType.TEXT:
                task = asyncio.create_task(self.answer(ws, json.loads(message.data)))
                running.add(task)
                task.add_done_callback(running.discard)
        for task in running:
            task.cancel()
        return ws


async def main(args: argparse.Namespace) -> None:
    stop = stop_on_signals()
    async with aiohttp.ClientSession() as session:
        # the platform's current token (the daemon's: fetching one of its own would end the
        # daemon's), from the environment rather than the command line
        relay = Relay(session, args.api_base, os.environ["RELAY_AUTHORIZATION"], args.app_id)
        app = web.Application()
        app.router.add_get("/", relay.consumer)
        runner = await listen(app, args.forward_ws)
        print("ready", flush=True)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--app-id", required=True)
    ap.add_argument("--forward-ws", required=True, help="host:port of the client server")
    ap.add_argument("--api-base", required=True)
    return ap.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
