"""The graph's pages (store/base.py: ``vuins_below``, ``scenes_after``, ``seen_in``) on every
backend: each page is what a walk of the whole graph would give, cut where the page says,
whatever writes came before (binds and rebinds moving last_seen entries included)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gensokyo_idmap.errors import IdmapError
from gensokyo_idmap.identity import RawId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.store.base import IdentityReader, LastSeen

from .. import store_backends

open_store = store_backends.open_store
identity_store = store_backends.identity_store


def everything(view: IdentityReader) -> tuple[list[int], dict[str, dict[int, LastSeen]]]:
    """(every vUIN with a set, highest first; scene → vUIN → last_seen) by full walks."""
    vuins = sorted({vuin for vuin, _ in view.iter_vuin_sets()}, reverse=True)
    scenes: dict[str, dict[int, LastSeen]] = {}
    for vuin in vuins:
        for scene, seen in view.last_seen_all(vuin):
            scenes.setdefault(scene, {})[vuin] = seen
    return vuins, dict(sorted(scenes.items()))


def paged_vuins(view: IdentityReader, size: int) -> list[int]:
    found: list[int] = []
    below: int | None = None
    while True:
        page = view.vuins_below(below, size)
        assert len(page) <= size
        found += page
        if len(page) < size:
            return found
        below = page[-1]


def paged_scenes(view: IdentityReader, prefix: str, size: int) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    after: str | None = None
    while True:
        page = view.scenes_after(prefix, after, size)
        found += page
        if len(page) < size:
            return found
        after = page[-1][0]


def paged_members(view: IdentityReader, scene: str, size: int) -> list[tuple[int, LastSeen]]:
    found: list[tuple[int, LastSeen]] = []
    above: int | None = None
    while True:
        page = view.seen_in(scene, above, size)
        found += page
        if len(page) < size:
            return found
        above = page[-1][0]


def check_pages(view: IdentityReader, size: int) -> None:
    vuins, scenes = everything(view)
    assert paged_vuins(view, size) == vuins
    assert paged_scenes(view, "", size) == [(scene, len(by)) for scene, by in scenes.items()]
    for prefix in ("QQ:1:", "QQ:1:group:", "QQ:2:c2c:", "nothing:"):
        assert paged_scenes(view, prefix, size) == [
            (scene, len(by)) for scene, by in scenes.items() if scene.startswith(prefix)]
    for scene, by in scenes.items():
        assert paged_members(view, scene, size) == sorted(by.items())


def test_pages_on_a_small_graph(identity_store: Any) -> None:
    graph = IdentityGraph(identity_store, clock=lambda: 1000.0)

    async def fill() -> None:
        for n in range(1, 8):
            await graph.resolve([RawId(f"user{n}")], scene=f"QQ:1:group:G{n % 3}")
            await graph.resolve([RawId(f"user{n}")], scene=f"QQ:2:c2c:U{n}")
        await graph.resolve([RawId("group0")], scene="QQ:1:group:G0")

    asyncio.run(fill())
    with identity_store.read() as view:
        assert view.vuins_below(None, 3) == [8, 7, 6]
        assert view.vuins_below(7, 2) == [6, 5]
        assert view.vuins_below(100, 1) == [8]
        assert view.vuins_below(1, 5) == []
        assert view.scenes_after("QQ:1:group:", None, 10) == [
            ("QQ:1:group:G0", 3), ("QQ:1:group:G1", 3), ("QQ:1:group:G2", 2)]
        assert view.scenes_after("QQ:1:group:", "QQ:1:group:G0", 1) == [("QQ:1:group:G1", 3)]
        assert view.scenes_after("QQ:1:", "QQ:0", 1) == [("QQ:1:group:G0", 3)]
        assert view.scenes_after("QQ:1:group:", "QQ:1:group:G2", 5) == []
        assert [v for v, _ in view.seen_in("QQ:1:group:G0", None, 10)] == [3, 6, 8]
        assert view.seen_in("QQ:1:group:G0", 3, 1) == [(6, LastSeen("raw:user6", 1000.0))]
        assert view.seen_in("QQ:9:group:none", None, 10) == []
        check_pages(view, 2)


OPS = st.lists(st.one_of(
    st.tuples(st.just("see"), st.integers(0, 12), st.sampled_from(
        ["QQ:1:group:A", "QQ:1:group:B", "QQ:1:c2c:X", "QQ:2:group:A", "QQ:2:c2c:Y"])),
    st.tuples(st.just("bind"), st.integers(0, 12), st.integers(1, 14)),
    st.tuples(st.just("rebind"), st.integers(1, 14), st.integers(1, 14)),
), max_size=30)


@pytest.mark.parametrize("backend", store_backends.BACKENDS)
@settings(max_examples=15, deadline=None)
@given(ops=OPS, size=st.integers(1, 4))
def test_pages_agree_with_a_walk_after_any_writes(backend: str, ops: list[tuple[Any, ...]],
                                                  size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, \
            store_backends.store_factory(backend, Path(tmp)) as open_store:
        store = open_store()
        try:
            graph = IdentityGraph(store, clock=lambda: 5.0)

            async def play() -> None:
                for op in ops:
                    try:
                        if op[0] == "see":
                            await graph.resolve([RawId(f"p{op[1]}")], scene=op[2])
                        elif op[0] == "bind":
                            await graph.bind(RawId(f"p{op[1]}"), op[2])
                        else:
                            await graph.rebind(op[1], op[2])
                    except IdmapError:
                        pass  # refused (an unknown vUIN): nothing written

            asyncio.run(play())
            with store.read() as view:
                check_pages(view, size)
        finally:
            store.close()
