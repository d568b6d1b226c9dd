"""The console over each identity-store backend: LMDB, and PostgreSQL (skipped, saying why,
where it does not answer). The overview's store figures come from the server there (no
LMDB map), read in a worker thread."""

from __future__ import annotations

import asyncio
import json
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph

from ...conftest import run
from ...store_backends import identity_store, open_store  # noqa: F401 - fixtures
from ..conftest import ALICE, APP_ID, BOB
from .conftest import Browser, ServeConsole, csrf_of


def test_overview_search_and_rebind_on_each_backend(serve_console: ServeConsole,
                                                    graph: IdentityGraph) -> None:
    on_lmdb = type(graph.store).__name__.startswith("Lmdb")

    async def body(browser: Browser) -> None:
        alice = (await graph.resolve([OpenId(APP_ID, ALICE)])).vuin
        bob = (await graph.resolve([OpenId(APP_ID, BOB)])).vuin
        status, data, _ = await browser.get("/ui/overview.json")
        assert status == 200, data
        overview = json.loads(data)
        assert overview["store_error"] is None
        assert overview["stores"]["openid_map"]["identities"] == 2
        assert (overview["stores"]["openid_map"]["map"] is not None) == on_lmdb
        status, _, resp = await browser.get("/ui/identities", params={"q": ALICE},
                                            allow_redirects=False)
        assert resp.headers["Location"] == f"/ui/identities/{alice}"
        status, page, _ = await browser.get(f"/ui/identities/{alice}")
        status, page, _ = await browser.post("/ui/rebind", {
            "csrf": csrf_of(page), "old": str(alice), "new": str(bob), "confirm": "yes"})
        assert status == 200 and 'id="outcome">moved<' in page
        assert graph.lookup(OpenId(APP_ID, ALICE)) == bob

    async def main() -> None:
        # as the daemon says where a graph on PostgreSQL is (no file to measure)
        location = "" if on_lmdb else "postgresql://127.0.0.1:5432/test"
        async with serve_console(identity_location=location) as browser:
            await asyncio.wait_for(body(browser), 30)

    run(main())
