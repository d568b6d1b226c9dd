"""The console's lists and detail pages on every backend: the graph on LMDB and on
PostgreSQL, the message ids on LMDB and on Redis (each skipped, saying why, where its server
does not answer): the same pages from the same store interfaces."""

from __future__ import annotations

from typing import Any

import pytest

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MessageIds, MsgContext

from ...conftest import MSGID_BACKENDS, msgid_map
from ...store_backends import identity_store, open_store  # noqa: F401 - fixtures
from ..conftest import APP_ID, GROUP
from .conftest import Browser, ServeConsole
from .test_browse import GROUP_SCENE, people, rows, scenario, text


@pytest.fixture(params=MSGID_BACKENDS)
def msgids(request: pytest.FixtureRequest, clock: Any) -> MessageIds:
    return msgid_map(request.param, request, clock, 3600)


def test_the_lists_on_each_backend(serve_console: ServeConsole, graph: IdentityGraph,
                                   msgids: MessageIds) -> None:
    async def body(browser: Browser) -> None:
        vuins = await people(graph, 12)
        group_vuin = graph.lookup(OpenId(APP_ID, GROUP))
        chat = MsgContext(APP_ID, "group", GROUP)
        ids = [await msgids.store_real(f"M{n}", chat.about(vuins[n], f"line {n}"))
               for n in range(12)]
        status, page, _ = await browser.get("/ui/identities")
        assert status == 200 and len(rows(page, "identity-list")) == 15
        status, page, _ = await browser.get("/ui/identities?below=5")
        assert [text(r).split()[0] for r in rows(page, "identity-list")] == [
            "4", "3", "2", "1"]
        status, page, _ = await browser.get("/ui/chats")
        group = next(r for r in rows(page, "chat-list") if GROUP in r)
        assert f'/ui/messages/{ids[-1]}"' in group and 'members seen">12<' in group
        status, page, _ = await browser.get(f"/ui/chats/{GROUP_SCENE}")
        assert status == 200 and 'id="member-count">12<' in page and "line 11" in page
        status, page, _ = await browser.get("/ui/messages", params={"f": "line 1"})
        assert len(rows(page, "message-list")) == 3  # line 1, 10, 11
        status, page, _ = await browser.get(f"/ui/messages/{ids[4]}")
        assert f'id="chat-vuin">{group_vuin}<' in page and "line 4" in page

    scenario(serve_console, body)
