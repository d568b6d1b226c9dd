"""``gensokyo-idmap demo``: the real daemon, fed by an emulated QQ platform on loopback.

The platform is the test kit's (:class:`~gensokyo_idmap.testing.EmulatedPlatform` for the
token endpoint and the OpenAPI the daemon sends through, :class:`~gensokyo_idmap.testing.
WebhookSender` for the signed callbacks), so a newcomer sees the bridge work without QQ
credentials: the script's users (:mod:`gensokyo_idmap.demo.script`) talk through the
daemon's webhook, and whatever a connected bot answers reaches the emulated platform and
is printed. Everything between is the daemon as ``serve`` runs it, with the config's
listeners; only the bot credentials, the platform's addresses and the data dir are the
demo's own (and the stores are always LMDB files there: a demo never writes into an
operator's PostgreSQL or Redis).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import aiohttp
import structlog
from aiohttp import web
from pydantic import SecretStr

from gensokyo_idmap import jsonio
from gensokyo_idmap.app import build_daemon, serve_until_stopped
from gensokyo_idmap.config import Config
from gensokyo_idmap.demo.script import CAST, Step, conversation, event_of, send_line, step_line
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.hostport import parse_host_port
from gensokyo_idmap.ops.config_check import refuse_bad_startup
from gensokyo_idmap.testing import APP, SECRET, EmulatedPlatform, WebhookSender

__all__ = ["DemoOptions", "DemoPlatform", "demo_config", "run_demo"]

log = structlog.get_logger("gensokyo_idmap.demo")

#: The demo's own data dir: never the operator's ``./data`` unless asked.
DEFAULT_DATA_DIR: Final = Path("data-demo")

#: How many OpenAPI calls the platform keeps recorded (a demo may run for days).
KEEP_CALLS: Final = 1000

Write = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class DemoOptions:
    data_dir: Path = DEFAULT_DATA_DIR
    seed: int = 0
    pace: float = 2.0  # mean seconds between two steps of the script


class DemoPlatform(EmulatedPlatform):
    """The emulated platform, telling ``write`` (a line per call) what the bot sent."""

    def __init__(self, write: Write) -> None:
        # a token stays valid until it expires, as on QQ, however often one is fetched
        super().__init__(overlapping_tokens=True)
        self._write = write
        self.names = CAST.names()

    async def send_message(self, request: web.Request) -> web.Response:
        return await self._shown(request, await super().send_message(request))

    async def upload_file(self, request: web.Request) -> web.Response:
        return await self._shown(request, await super().upload_file(request))

    async def recall_message(self, request: web.Request) -> web.Response:
        return await self._shown(request, await super().recall_message(request))

    async def _shown(self, request: web.Request, response: web.Response) -> web.Response:
        raw = await request.read()  # the body the handler read, kept by aiohttp
        body = jsonio.loads(raw) if raw else None
        answer = jsonio.loads(response.text) if response.text else None
        line = send_line(request.method, request.path, body, response.status, answer,
                         self.names, time.time())
        if line is not None:
            self._write(line)
        if len(self.api_calls) > KEEP_CALLS:
            del self.api_calls[:KEEP_CALLS // 2]
        return response


def demo_config(config: Config, platform: EmulatedPlatform, data_dir: Path) -> Config:
    """``config`` with the demo's bot, platform and data dir: the emulated platform's
    AppID and secret, its token and API URLs, LMDB stores in ``data_dir``; every
    listener stays as configured."""
    if not config.webhook.listen:
        raise BadInputError("webhook.listen", "", "the demo platform posts its events to the "
                            "webhook: give it an address (the config `gensokyo-idmap init` "
                            "writes has one)")
    api_base = platform.url("/").rstrip("/")
    idmap = config.idmap.model_copy(update={
        "data_dir": data_dir, "backend": "lmdb", "runtime_backend": "lmdb", "legacy_db": None})
    return config.model_copy(update={
        "bot": config.bot.model_copy(update={"app_id": APP, "secret": SecretStr(SECRET),
                                             "secret_file": None}),
        "bots": [],  # the demo has one bot: the emulated platform's
        "qq": config.qq.model_copy(update={
            "gateway": False, "api_base": api_base,
            "token_url": platform.url("/app/getAppAccessToken")}),
        "idmap": idmap,
    })


def webhook_url(config: Config) -> str:
    """Where the demo posts its callbacks: the daemon's webhook (an address listening on
    every interface is reached on loopback)."""
    address = parse_host_port(config.webhook.listen, "webhook.listen")
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(address.host,
                                                                      address.host)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{address.port}{config.webhook.path}"


def console_url(config: Config) -> str | None:
    """Where the console is: ``/ui/`` on the identity API's listener (None: API off)."""
    if not config.api.listen:
        return None
    return f"http://{config.api.listen}/ui/"


def banner(config: Config, options: DemoOptions) -> list[str]:
    """The lines the demo starts its output with: what runs and where a bot connects."""
    lines = [f"demo: simulated QQ users chat through the daemon (seed {options.seed}, data "
             f"in {options.data_dir}); Ctrl-C stops"]
    lines += [f"  bot:     the daemon dials {url}"
              for url, _ in config.onebot.reverse_ws_targets()]
    if config.onebot.forward_ws:
        lines.append(f"  bot:     or dial ws://{config.onebot.forward_ws}/ (forward WebSocket)")
    if config.onebot.http_api:
        lines.append(f"  bot:     OneBot HTTP API at http://{config.onebot.http_api}/")
    console = console_url(config)
    if console is not None:
        lines.append(f"  console: {console}")
    return lines


async def run_demo(config: Config, options: DemoOptions, write: Write,
                   stop: asyncio.Event | None = None) -> None:
    """Run the demo until SIGINT/SIGTERM (or ``stop`` is set): the emulated platform, the
    daemon on ``config``'s listeners, and the script's users talking through it. ``write``
    gets one line per thing that happened (a user's message, a join or a leave, a call the
    bot made to the platform)."""
    stop = stop or asyncio.Event()
    async with AsyncExitStack() as stack:
        platform = DemoPlatform(write)  # closed last: the daemon's last sends are answered
        await platform.start()
        stack.push_async_callback(platform.close)
        config = demo_config(config, platform, options.data_dir)
        refuse_bad_startup(config)
        log.info("[demo] emulated QQ platform", url=platform.url("/"), app_id=APP,
                 data_dir=str(options.data_dir), seed=options.seed, pace_seconds=options.pace)
        daemon = await build_daemon(config, stop,
                                    await stack.enter_async_context(AsyncExitStack()))
        sender = await stack.enter_async_context(WebhookSender(webhook_url(config), APP, SECRET))
        driver = asyncio.create_task(_drive(conversation(options.seed, options.pace), sender,
                                            write, stop))
        stack.push_async_callback(_finish, driver)  # the users stop first
        driver.add_done_callback(lambda _: stop.set())  # a driver that died ends the demo
        log.info("[demo] ready", console=console_url(config) or "off (api.listen is empty)",
                 bot="connect a OneBot v11 bot to a listener above; Ctrl-C stops")
        for line in banner(config, options):
            write(line)
        await serve_until_stopped(daemon, stop)


async def _finish(driver: asyncio.Task[None]) -> None:
    """Stop the users; a driver that failed (not cancelled) fails the demo."""
    if not driver.done():
        driver.cancel()
    try:
        await driver
    except asyncio.CancelledError:
        pass


async def _drive(script: Iterator[Step], sender: WebhookSender, write: Write,
                 stop: asyncio.Event) -> None:
    """Play ``script`` (Steps) into the daemon's webhook until ``stop``. An event the daemon
    did not take (not 200) is posted again, as the platform retries its callbacks."""
    run = secrets.token_hex(4)  # message ids unique across runs: a restart is no repeat
    for n, step in enumerate(script, 1):
        if await _stopped(stop, step.delay):
            return
        now = time.time()
        t, d = event_of(step.action, f"ROBOT1.0_demo{run}{n}", now)
        prepared = sender.build(t, d, event_id=f"demo-{run}-{n}")
        write(step_line(step.action, now))
        while not stop.is_set():
            try:  # signed anew each time: a retry must not age past webhook.max_age_seconds
                delivery = await sender.post_raw(prepared.body, sender.headers(prepared.body),
                                                  seq=prepared.seq)
            except (aiohttp.ClientError, TimeoutError) as err:
                log.warning("[demo] webhook not reached", reason=type(err).__name__)
            else:
                if delivery.status == 200:
                    break
                log.warning("[demo] webhook refused the event", status=delivery.status,
                            body=delivery.body[:200].decode("utf-8", "replace"))
            sender.deliveries.clear()
            await asyncio.sleep(1.0)
        sender.deliveries.clear()  # recorded for tests; a demo runs for days


async def _stopped(stop: asyncio.Event, delay: float) -> bool:
    """Wait ``delay`` seconds: whether ``stop`` was set meanwhile (or before: a zero delay
    must not miss it)."""
    if stop.is_set():
        return True
    try:
        await asyncio.wait_for(stop.wait(), delay)
    except TimeoutError:
        return False
    return True
