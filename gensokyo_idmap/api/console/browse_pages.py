"""The console's browsing pages: the identities, chats and messages lists, a chat's page and
a message's page, and the test message sent from a chat's page (an I/O adapter over
:mod:`.browse`, which does the reading).

Lists read in a worker thread (on PostgreSQL or Redis each read is a round trip); every
parameter of a page (where it starts, its filter) comes from its query and is checked: a
value that cannot be read is shown on the page, and nothing is read for it.
"""

from __future__ import annotations

import asyncio
import gettext
import time
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from gensokyo_idmap.api.console.browse import (
    CHAT_KINDS,
    chat_key,
    chat_page,
    chat_row,
    identity_page,
    message_page,
    message_row,
)
from gensokyo_idmap.api.console.error_text import error_text
from gensokyo_idmap.errors import BadInputError, IdmapError, NotFoundError
from gensokyo_idmap.identity import MAX_SCENE_BYTES, parse_scene, parse_vuin
from gensokyo_idmap.runtime.base import MsgContent, MsgRecord
from gensokyo_idmap.runtime.msgid import MAX_CONTENT_BYTES, check_virtual_id
from gensokyo_idmap.store.base import LastSeen

if TYPE_CHECKING:
    from gensokyo_idmap.api.console.page_host import PageHost
    from gensokyo_idmap.api.console.services import ApiServices

__all__ = ["BrowsePages", "parse_position"]

#: The longest filter a list takes (characters).
MAX_FILTER: Final = 200
#: Members a chat's page shows at once.
MEMBERS_SHOWN: Final = 100
#: The newest messages a chat's page shows.
CHAT_MESSAGES: Final = 20


def parse_position(text: str, field: str, t: gettext.NullTranslations) -> tuple[int, int]:
    """A position in the messages list, ``<created ms>-<virtual id>`` (``t``: the page's
    translations, for the error)."""
    created, _, vid = text.partition("-")
    if not (created.isascii() and created.isdigit() and len(created) <= 16):
        raise BadInputError(field, text, t.gettext("a position is <created ms>-<virtual id>"))
    return int(created), check_virtual_id(vid, field)


def _filter(request: web.Request, t: gettext.NullTranslations) -> str:
    text = request.query.get("f", "")
    if len(text) > MAX_FILTER:
        raise BadInputError("f", text[:40], t.gettext(
            "a filter is at most %(most)s characters") % {"most": MAX_FILTER})
    return text


def _scene(text: str, t: gettext.NullTranslations) -> str:
    if not text or len(text.encode("utf-8")) > MAX_SCENE_BYTES:
        raise BadInputError("scene", text[:80], t.gettext(
            "a scene is 1 to %(most)s bytes") % {"most": MAX_SCENE_BYTES})
    _, _, kind, _ = parse_scene(text)
    if kind not in CHAT_KINDS:
        raise BadInputError("scene", text, t.gettext(
            "the chat kind %(kind)s is not one of %(kinds)s") % {
            "kind": repr(kind), "kinds": ", ".join(CHAT_KINDS)})
    return text


class BrowsePages:
    """The handlers; pages render through their console (:class:`~.page_host.PageHost`)."""

    def __init__(self, console: PageHost) -> None:
        self.console = console

    def _used(self) -> Any:
        controls = self.console.controls
        return None if controls is None else controls.replies_used

    def _bots(self) -> list[str]:
        controls = self.console.controls
        bots = list(controls.bots()) if controls is not None else []
        own = self.console.api.settings.app_id
        return bots or ([own] if own else [])

    # --- identities ---------------------------------------------------------------------

    async def identities(self, request: web.Request) -> web.Response:
        """An exact vUIN, key, rUIN or OpenID (``q``) goes to its vUIN's page; else the
        list, newest vUIN first, below ``below``, filtered by ``f``."""
        console = self.console
        query = request.query.get("q", "")
        error, status = None, 200
        if query.strip():
            try:
                vuin = _find(console.api, query)
            except IdmapError as err:
                error, status = error_text(err, console._texts()), err.http_status
            else:
                raise web.HTTPSeeOther(f"/ui/identities/{vuin}")
        needle = _filter(request, console._texts())
        below_text = request.query.get("below", "")
        below = parse_vuin(below_text, "below") if below_text else None
        page = await asyncio.to_thread(identity_page, console.api.graph.store, below, needle)
        return console._render("identities.html", request, {
            "page": "identities", "q": query, "error": error, "f": needle,
            "list": page, "below": below,
            "binds": [line.text for line in console.tail.binds()]}, status=status)

    # --- chats --------------------------------------------------------------------------

    async def chats(self, request: web.Request) -> web.Response:
        """The chats seen, in scene order after ``after``: of the kinds ``kind`` (default
        groups and channels) and the bot ``bot`` (default every bot), filtered by ``f``."""
        console = self.console
        kinds = [k for k in request.query.getall("kind", []) if k in CHAT_KINDS] \
            or ["group", "channel"]
        t = console._texts()
        bots = self._bots()
        bot = request.query.get("bot", "")
        if bot and bot not in bots:
            raise BadInputError("bot", bot, t.gettext("not a bot of this daemon (%(bots)s)")
                                % {"bots": ", ".join(bots)})
        after = request.query.get("after") or None
        if after is not None:
            _scene(after, t)
        needle = _filter(request, t)
        page = await asyncio.to_thread(chat_page, console.api.graph.store, console.api.msgids,
                                       after, [bot] if bot else bots, kinds, needle,
                                       self._used())
        return console._render("chats.html", request, {
            "page": "chats", "list": page, "kinds": kinds, "all_kinds": CHAT_KINDS,
            "bots": bots, "bot": bot, "f": needle, "after": after,
            "now_ms": int(time.time() * 1000)})

    async def chat(self, request: web.Request) -> web.Response:
        """One chat: its vUIN, members seen (a page after ``above``), its newest messages,
        its reply budget and the test message form."""
        console = self.console
        scene = _scene(request.match_info["scene"], console._texts())
        above_text = request.query.get("above", "")
        above = parse_vuin(above_text, "above") if above_text else None
        return console._render("chat.html", request, {
            "page": "chats", **await asyncio.to_thread(self._chat_data, scene, above),
            "sent": None, "text": "", "error": None, "now_ms": int(time.time() * 1000)})

    def _chat_data(self, scene: str, above: int | None) -> dict[str, Any]:
        api = self.console.api
        with api.graph.store.read() as view:
            page = view.seen_in(scene, above, MEMBERS_SHOWN + 1)
            counted = view.scenes_after(scene, None, 1)
            members = counted[0][1] if counted and counted[0][0] == scene else 0
            row = chat_row(view, api.msgids, scene, members, self._used())
        messages: list[tuple[MsgRecord, MsgContent | None]] = []
        with api.msgids.inbound_walk(row.app_id, row.kind, row.target, 24 * 3600.0) as below:
            at: tuple[int, int] | None = None
            while len(messages) < CHAT_MESSAGES:
                record = below(at)
                if record is None:
                    break
                found = api.msgids.lookup_content(record.virtual_id)
                messages.append((record, None if found is None else found[1]))
                at = (record.created_ms, record.virtual_id)
        shown: list[tuple[int, LastSeen]] = [m for m in page[:MEMBERS_SHOWN] if m[0] != row.vuin]
        return {"chat": row, "members": shown,
                "more_above": page[MEMBERS_SHOWN - 1][0] if len(page) > MEMBERS_SHOWN else None,
                "messages": messages,
                "can_send": self.console.controls is not None}

    async def send(self, request: web.Request) -> web.Response:
        """The test message of a chat's page (its CSRF token checked by the guard): sent as
        a framework's send goes, the outcome shown on the chat's page."""
        console = self.console
        form = await request.post()
        scene = _scene(str(form.get("scene", "")), console._texts())
        text = str(form.get("text", ""))
        data = await asyncio.to_thread(self._chat_data, scene, None)
        error, sent, status = None, None, 200
        t = console._texts()
        if console.controls is None:
            error = t.gettext("this console cannot send: it is not part of a running daemon")
            status = 503
        elif not text.strip():
            error, status = t.gettext("the message is empty: nothing was sent"), 400
        elif len(text.encode("utf-8")) > MAX_CONTENT_BYTES:
            error = t.gettext("the message is longer than %(most)s bytes: nothing was sent") % {
                "most": MAX_CONTENT_BYTES}
            status = 400
        else:
            sent = await console.controls.send_test(scene, text)
            if sent.ok:  # the page shows the message it just sent
                data = await asyncio.to_thread(self._chat_data, scene, None)
        return console._render("chat.html", request, {
            "page": "chats", **data, "sent": sent, "text": text, "error": error,
            "now_ms": int(time.time() * 1000)}, status=status)

    # --- messages -----------------------------------------------------------------------

    async def messages(self, request: web.Request) -> web.Response:
        """A virtual or real message id (``q``) goes to its page; else the recent messages,
        newest first, before ``before``, filtered by ``f``."""
        console = self.console
        query = request.query.get("q", "").strip()
        error, status = None, 200
        if query:
            try:
                vid = console._message(query)["virtual_id"]
            except IdmapError as err:
                error, status = error_text(err, console._texts()), err.http_status
            else:
                raise web.HTTPSeeOther(f"/ui/messages/{vid}")
        needle = _filter(request, console._texts())
        before_text = request.query.get("before", "")
        before = parse_position(before_text, "before", console._texts()) \
            if before_text else None
        page = await asyncio.to_thread(message_page, console.api.graph.store,
                                       console.api.msgids, before, needle)
        return console._render("messages.html", request, {
            "page": "messages", "q": query, "error": error, "f": needle, "list": page,
            "before": before, "now_ms": int(time.time() * 1000)}, status=status)

    async def message(self, request: web.Request) -> web.Response:
        """One live message: its chat (by vUIN), author, text and times."""
        console = self.console
        vid = check_virtual_id(request.match_info["vid"], "virtual id")
        found = await asyncio.to_thread(console.api.msgids.lookup_content, vid)
        if found is None:
            raise NotFoundError(f"virtual message id {vid} is unknown or expired")
        record, content = found
        with console.api.graph.store.read() as view:
            row = message_row(view, record, content)
        return console._render("message.html", request, {
            "page": "messages", "m": row, "self_id_note": record.direction == "out",
            "chat_key": chat_key(row.kind, record.target, record.app_id),
            "now_ms": int(time.time() * 1000)})


def _find(api: ApiServices, query: str) -> int:
    """The vUIN ``query`` names; a bare OpenID is looked for as one of each bot served, in
    the config's order (the first found wins), so the search finds a person of any bot. A
    :class:`NotFoundError` when none knows it."""
    served = api.settings.served
    for app_id in served[:-1]:
        try:
            return api.find_vuin(query, app_id)[1]
        except NotFoundError:
            continue
    return api.find_vuin(query, served[-1] if served else None)[1]
