"""The console's lists and detail pages through a real socket over real LMDB stores: the
identities newest first with their keys, bot and where they were seen; the chats with their
members, last message and reply budget; the recent messages with their chat's vUIN, author
and text; paging and filters; a message's page naming the chat by its vUIN, not its OpenID;
the console's own 404 page; a bind of a new key saying "bound"."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

from gensokyo_idmap.api.console.status import ConfigRow, SendOutcome
from gensokyo_idmap.identity import OpenId, RawId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgContext, MsgIdMap

from ...conftest import run
from ..conftest import ALICE, APP_ID, BOB, GROUP
from .conftest import Browser, ServeConsole, csrf_of

GROUP_SCENE = f"QQ:{APP_ID}:group:{GROUP}"


class Controls:
    """The daemon's side as the console asks it (tests of the real one: tests/e2e)."""

    def __init__(self) -> None:
        self.used: dict[str, int] = {}
        self.sent: list[tuple[str, str]] = []

    def config_rows(self) -> Sequence[ConfigRow]:
        return [ConfigRow("bot.app_id", APP_ID, "file"), ConfigRow("bot.secret", "***", "file")]

    def bots(self) -> Sequence[str]:
        return [APP_ID]

    def replies_used(self, app_id: str, reference: str) -> int:
        return self.used.get(reference, 0) if app_id == APP_ID else 0

    async def drop_backlog(self, number: int, name: str) -> int:
        return 0

    async def send_test(self, scene: str, text: str) -> SendOutcome:
        self.sent.append((scene, text))
        return SendOutcome(True, 0, "", message_id=77)


def scenario(serve_console: ServeConsole, body: Any, **server: Any) -> None:
    async def main() -> None:
        async with serve_console(**server) as browser:
            await asyncio.wait_for(body(browser), 30)

    run(main())


def text(html: str) -> str:
    """What a reader sees of ``html`` (its tags and their attributes gone)."""
    return re.sub(r"<[^>]*>", "", html)


def rows(page: str, table: str) -> list[str]:
    found = re.search(rf'<table class="list" id="{table}">(.*?)</table>', page, re.S)
    assert found, page[:3000]
    return re.findall(r"<tr>(.*?)</tr>", found.group(1).split("</thead>")[1], re.S)


async def people(graph: IdentityGraph, count: int) -> list[int]:
    """``count`` people seen in the group, the group itself, and one in a channel."""
    vuins = []
    for n in range(count):
        vuins.append((await graph.resolve([OpenId(APP_ID, f"{n:032X}")],
                                          scene=GROUP_SCENE)).vuin)
    await graph.resolve([OpenId(APP_ID, GROUP)], scene=GROUP_SCENE)
    await graph.resolve([RawId("user-in-channel")], scene=f"QQ:{APP_ID}:channel:555")
    await graph.resolve([RawId("555")], scene=f"QQ:{APP_ID}:channel:555")
    return vuins


def test_identities_newest_first_with_keys_bot_and_where(serve_console: ServeConsole,
                                                          graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        vuins = await people(graph, 60)
        status, page, _ = await browser.get("/ui/identities")
        assert status == 200, page
        listed = rows(page, "identity-list")
        assert len(listed) == 50
        assert f">{vuins[-1] + 3}<" in listed[0]  # the newest (raw:555) first
        alice_row = next(r for r in listed if f"{59:032X}" in r)
        assert APP_ID in alice_row and GROUP_SCENE in alice_row and "<time datetime=" in alice_row
        older = re.search(r'id="older" rel="next"', page) and \
            re.search(r'href="/ui/identities\?below=(\d+)"', page)
        assert older
        status, page2, _ = await browser.get(f"/ui/identities?below={older.group(1)}")
        assert len(rows(page2, "identity-list")) == 13 and 'id="older"' not in page2
        status, filtered, _ = await browser.get("/ui/identities", params={"f": f"{7:032x}"})
        assert [f"{7:032X}" in r for r in rows(filtered, "identity-list")] == [True]
        status, none, _ = await browser.get("/ui/identities", params={"f": "nobody-at-all"})
        assert 'id="none"' in none and "63 looked at" in none.replace("the 63", "63")
        status, bad, _ = await browser.get("/ui/identities?below=x")
        assert status == 400 and "below" in bad

    scenario(serve_console, body)


def test_chats_with_members_last_message_and_replies_left(
        serve_console: ServeConsole, graph: IdentityGraph, msgids: MsgIdMap) -> None:
    controls = Controls()

    async def body(browser: Browser) -> None:
        vuins = await people(graph, 3)
        chat = MsgContext(APP_ID, "group", GROUP)
        first = msgids.store_real_sync("M1", chat.about(vuins[0], "hello"))
        second = msgids.store_real_sync("M2", chat.about(vuins[1], "ping"))
        controls.used["M2"] = 5  # spent: only M1's five are left
        controls.used["M1"] = 1
        status, page, _ = await browser.get("/ui/chats")
        assert status == 200, page
        listed = rows(page, "chat-list")
        assert len(listed) == 2  # the group and the channel (C2C is not asked for)
        group = next(r for r in listed if GROUP in r)
        group_vuin = graph.lookup(OpenId(APP_ID, GROUP))
        assert f">{group_vuin}<" in group
        assert re.search(r'data-label="members seen">3<', group)  # not the group itself
        assert f'/ui/messages/{second}"' in group
        assert re.search(r'data-label="replies left">4 ', group)
        status, c2c, _ = await browser.get("/ui/chats?kind=c2c")
        assert 'id="none"' in c2c  # nobody wrote in private

        status, page, _ = await browser.get(f"/ui/chats/{GROUP_SCENE}")
        assert status == 200, page
        assert f'id="chat-vuin">{group_vuin}<' in page
        assert 'id="member-count">3<' in page
        assert all(f'/ui/identities/{v}"' in page for v in vuins)
        assert "hello" in page and "ping" in page and f'/ui/messages/{first}"' in page
        status, sent, _ = await browser.post("/ui/send", {
            "csrf": csrf_of(page), "scene": GROUP_SCENE, "text": "test from the console"})
        assert status == 200 and 'id="sent"' in sent and "/ui/messages/77" in sent
        assert controls.sent == [(GROUP_SCENE, "test from the console")]
        status, empty, _ = await browser.post("/ui/send", {
            "csrf": csrf_of(page), "scene": GROUP_SCENE, "text": "  "})
        assert status == 400 and "empty" in empty and len(controls.sent) == 1
        status, _, _ = await browser.post("/ui/send", {"scene": GROUP_SCENE, "text": "x"})
        assert status == 403 and len(controls.sent) == 1  # no CSRF token: nothing sent
        status, bad, _ = await browser.get("/ui/chats/QQ:1:room:x")
        assert status == 400 and "room" in bad

    scenario(serve_console, body, controls=controls)


class TwoBots(Controls):
    """Controls of a daemon serving :data:`APP_ID` and :data:`OTHER_BOT`, each bot's
    replies counted apart (one platform message id may be each bot's)."""

    def __init__(self) -> None:
        super().__init__()
        self.used_by: dict[tuple[str, str], int] = {}

    def bots(self) -> Sequence[str]:
        return [APP_ID, OTHER_BOT]

    def replies_used(self, app_id: str, reference: str) -> int:
        return self.used_by.get((app_id, reference), 0)


OTHER_BOT = "102000002"


def test_a_chats_replies_left_are_its_bots(serve_console: ServeConsole, graph: IdentityGraph,
                                           msgids: MsgIdMap) -> None:
    """The same platform message id in a group of each bot: the replies one bot spent on
    it leave the other bot's chat its five."""
    controls = TwoBots()

    async def body(browser: Browser) -> None:
        await people(graph, 1)
        other_group = "B1B2C3D4E5F60718293A4B5C6D7E8F91"
        await graph.resolve([OpenId(OTHER_BOT, other_group)],
                            scene=f"QQ:{OTHER_BOT}:group:{other_group}")
        msgids.store_real_sync("M1", MsgContext(APP_ID, "group", GROUP).about(1, "hello"))
        msgids.store_real_sync("M1", MsgContext(OTHER_BOT, "group", other_group)
                               .about(1, "hello"))
        controls.used_by[(OTHER_BOT, "M1")] = 4
        status, page, _ = await browser.get("/ui/chats")
        assert status == 200, page
        listed = rows(page, "chat-list")
        mine = next(r for r in listed if GROUP in r)
        others = next(r for r in listed if other_group in r)
        assert re.search(r'data-label="replies left">5 ', mine), mine
        assert re.search(r'data-label="replies left">1 ', others), others

    scenario(serve_console, body, controls=controls)


def test_messages_newest_first_and_a_message_names_its_chat_by_vuin(
        serve_console: ServeConsole, graph: IdentityGraph, msgids: MsgIdMap) -> None:
    async def body(browser: Browser) -> None:
        vuins = await people(graph, 2)
        group_vuin = graph.lookup(OpenId(APP_ID, GROUP))
        chat = MsgContext(APP_ID, "group", GROUP)
        ids = [msgids.store_real_sync(f"M{n}", chat.about(vuins[n % 2], f"line {n}"))
               for n in range(55)]
        reply = msgids.store_real_sync("OUT1", MsgContext(APP_ID, "group", GROUP, "out")
                                       .about(1, "pong"))
        status, page, _ = await browser.get("/ui/messages")
        assert status == 200, page
        listed = rows(page, "message-list")
        assert len(listed) == 50
        assert f">{reply}<" in listed[0] and "the bot" in listed[0] and "pong" in listed[0]
        assert f">{ids[-1]}<" in listed[1] and "line 54" in listed[1]
        assert f"group {group_vuin}" in text(listed[1]) and GROUP not in text(listed[1])
        older = re.search(r'href="/ui/messages\?before=(\d+-\d+)"', page)
        assert older
        status, page2, _ = await browser.get(f"/ui/messages?before={older.group(1)}")
        assert [r.count("line ") for r in rows(page2, "message-list")] == [1] * 6
        status, filtered, _ = await browser.get("/ui/messages", params={"f": "LINE 3"})
        assert len(rows(filtered, "message-list")) == 11  # line 3, 30..39

        status, page, _ = await browser.get(f"/ui/messages/{ids[3]}")
        assert status == 200, page
        assert f'id="chat-vuin">{group_vuin}<' in page
        assert f'href="/ui/identities/{vuins[1]}"' in page and "line 3" in page
        assert GROUP not in text(page)  # the chat by its vUIN, not its OpenID
        status, _, resp = await browser.get("/ui/messages", params={"q": "M3"},
                                            allow_redirects=False)
        assert resp.headers["Location"] == f"/ui/messages/{ids[3]}"
        status, gone, _ = await browser.get("/ui/messages/999999")
        assert status == 404 and "Not found" in gone and 'href="/ui/chats"' in gone
        status, bad, _ = await browser.get("/ui/messages?before=yesterday")
        assert status == 400 and "before" in bad

    scenario(serve_console, body)


def test_an_unknown_path_gets_the_consoles_404_with_its_menu(
        serve_console: ServeConsole) -> None:
    async def body(browser: Browser) -> None:
        for path in ("/ui/nothing-here", "/ui/identities/1/2", "/ui/chats/"):
            status, page, resp = await browser.get(path)
            assert status == 404, path
            assert "<h1>Not found</h1>" in page and 'href="/ui/identities"' in page
            assert resp.headers["Content-Security-Policy"]

    scenario(serve_console, body)


def test_binding_a_new_identity_says_bound(serve_console: ServeConsole,
                                           graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice = (await graph.resolve([OpenId(APP_ID, ALICE)])).vuin
        bob = (await graph.resolve([OpenId(APP_ID, BOB)])).vuin
        status, page, _ = await browser.get(f"/ui/identities/{alice}")
        form = {"csrf": csrf_of(page), "vuin": str(alice), "confirm": "yes"}
        status, done, _ = await browser.post("/ui/bind", {**form, "key": "rUIN-QQ-0-12345"})
        assert status == 200 and 'id="outcome">bound<' in done
        status, moved, _ = await browser.post("/ui/bind", {**form,
                                                          "key": f"openid:QQ:{APP_ID}:{BOB}"})
        assert 'id="outcome">moved<' in moved and graph.canonical(bob) == alice

    scenario(serve_console, body)


def test_the_new_pages_keep_the_security_headers_and_nothing_inline(
        serve_console: ServeConsole, graph: IdentityGraph, msgids: MsgIdMap) -> None:
    from gensokyo_idmap.api.console.pages import CSP

    async def body(browser: Browser) -> None:
        vuins = await people(graph, 2)
        vid = msgids.store_real_sync("M1", MsgContext(APP_ID, "group", GROUP).about(
            vuins[0], "<script>alert(1)</script>"))
        for path in ("/ui/chats", f"/ui/chats/{GROUP_SCENE}", "/ui/messages",
                     f"/ui/messages/{vid}", "/ui/system", "/ui/nowhere"):
            status, page, resp = await browser.get(path)
            assert status in (200, 404), (path, page)
            assert resp.headers["Content-Security-Policy"] == CSP
            assert "<script>" not in page and "style=" not in page, path  # text escaped
            assert page.count("<script") == 1 and 'src="/ui/static/console.js"' in page
            for form in re.findall(r'<form method="post".*?</form>', page, re.S):
                assert 'name="csrf"' in form, (path, form)

    scenario(serve_console, body, controls=Controls())
