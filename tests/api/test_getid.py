"""/getid types 1-17 as a lotus client calls them (plain GET), with bad input on each."""

from __future__ import annotations

from typing import Any

from gensokyo_idmap.identity import OpenId

from .conftest import ALICE, APP_ID, BOB, GROUP, ServeApi, scenario


def legacy_error(answer: tuple[int, Any]) -> tuple[int, str]:
    status, body = answer
    assert isinstance(body, dict) and set(body) == {"error"}, body
    if isinstance(body["error"], dict):  # a /v1 error
        return status, body["error"]["code"]
    assert isinstance(body["error"], str)
    return status, body["error"]


def test_store_and_retrieve_ids(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        g = c.get
        status, stored = await g("/getid", type="1", id=ALICE)
        assert status == 200 and set(stored) == {"row"} and type(stored["row"]) is int
        row = stored["row"]
        assert await g("/getid", type="1", id=ALICE) == (200, {"row": row})
        assert await g("/getid", type="2", id=str(row)) == (200, {"id": ALICE})
        assert await g("/getid", type="6", virtualValue=str(row)) == (
            200, {"virtual": str(row), "real": ALICE})
        assert await g("/getid", type="7", id=ALICE) == (200, {"virtual": str(row)})
        # 13 (SimplifiedStoreID): a number that reads back to the id
        status, simple = await g("/getid", type="13", id="guild.channel.42")
        assert status == 200 and type(simple["row"]) is int
        assert await g("/getid", type="2", id=str(simple["row"])) == (
            200, {"id": "guild.channel.42"})
        assert legacy_error(await g("/getid", type="2", id="999")) == (404, "ID not found")
        assert legacy_error(await g("/getid", type="6", virtualValue="999"))[0] == 404
        assert legacy_error(await g("/getid", type="7", id=BOB))[0] == 404

    scenario(serve_api, body)


def test_rebind_types_5_and_12(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        g = c.get
        old = (await g("/getid", type="1", id=ALICE))[1]["row"]
        assert await g("/getid", type="5", oldRowValue=str(old), newRowValue="5000") == (
            200, {"status": "success"})
        assert await g("/getid", type="1", id=ALICE) == (200, {"row": 5000})
        assert await g("/getid", type="2", id=str(old)) == (200, {"id": ALICE})  # alias
        status, pair = await g("/getid", type="8", id=GROUP, subid=BOB)
        assert status == 200 and set(pair) == {"row", "subRow"}
        assert all(type(v) is int for v in pair.values())
        assert await g("/getid", type="12", oldVirtualValue1=str(pair["row"]),
                       newVirtualValue1="7000", oldVirtualValue2=str(pair["subRow"]),
                       newVirtualValue2=str(pair["subRow"])) == (
            200, {"message": "Virtual values updated successfully"})
        assert await g("/getid", type="10", id=GROUP, subid=BOB) == (
            200, {"firstValue": "7000", "secondValue": str(pair["subRow"])})
        assert legacy_error(await g("/getid", type="5", oldRowValue="424242",
                                    newRowValue="1"))[0] == 404
        assert legacy_error(await g("/getid", type="12", oldVirtualValue1="424242",
                                    newVirtualValue1="1", oldVirtualValue2="1",
                                    newVirtualValue2="1"))[0] == 404

    scenario(serve_api, body)


def test_pro_types_8_to_11(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        g = c.get
        status, pair = await g("/getid", type="8", id=GROUP, subid=ALICE)
        assert status == 200
        row, sub = pair["row"], pair["subRow"]
        assert await g("/getid", type="8", id=GROUP, subid=ALICE) == (200, pair)
        assert await g("/getid", type="9", id=str(row), subid=str(sub)) == (
            200, {"id": GROUP, "subid": ALICE})
        assert await g("/getid", type="10", id=GROUP, subid=ALICE) == (
            200, {"firstValue": str(row), "secondValue": str(sub)})
        assert await g("/getid", type="11", id=str(row), subid=str(sub)) == (
            200, {"firstRealValue": GROUP, "secondRealValue": ALICE})
        assert legacy_error(await g("/getid", type="10", id=GROUP, subid=BOB))[0] == 404
        assert legacy_error(await g("/getid", type="9", id=str(row), subid="999"))[0] == 404

    scenario(serve_api, body)


def test_config_types_3_4_15(serve_api: ServeApi, identity_store: Any) -> None:
    async def body(c: Any) -> None:
        g = c.get
        assert await g("/getid", type="3", id="12345", subtype="type", value="group") == (
            200, {"status": "success"})
        assert await g("/getid", type="4", id="12345", subtype="type") == (
            200, {"value": "group"})
        with identity_store.read() as view:  # the legacy key, byte for byte
            assert view.get_config(b"12345:type") == b"group"
        assert await g("/getid", type="3", id="12345", subtype="type", value="私聊") == (
            200, {"status": "success"})
        assert await g("/getid", type="4", id="12345", subtype="type") == (200, {"value": "私聊"})
        assert await g("/getid", type="15", id="12345", subtype="type") == (
            200, {"status": "success"})
        assert legacy_error(await g("/getid", type="4", id="12345", subtype="type")) == (
            404, "key 'type' in section '12345' does not exist")
        assert await g("/getid", type="15", id="12345", subtype="type") == (
            200, {"status": "success"})  # deleting what is not there succeeds, as in Go
        assert legacy_error(await g("/getid", type="3", id="x" * 600, subtype="k",
                                    value="v"))[0] == 400

    scenario(serve_api, body)


def test_find_sub_keys_type_14(serve_api: ServeApi, graph: Any) -> None:
    async def body(c: Any) -> None:
        scene = f"QQ:{APP_ID}:group:{GROUP}"
        group = await graph.resolve([OpenId(APP_ID, GROUP)], scene=scene)
        alice = await graph.resolve([OpenId(APP_ID, ALICE)], scene=scene)
        bob = await graph.resolve([OpenId(APP_ID, BOB)], scene=scene)
        status, found = await c.get("/getid", type="14", id=GROUP)
        assert status == 200 and sorted(found["keys"]) == sorted([ALICE, BOB])
        status, rows = await c.get("/getid", type="14", id=str(group.vuin))
        assert status == 200 and sorted(rows["keys"]) == sorted([str(alice.vuin),
                                                                 str(bob.vuin)])
        assert await c.get("/getid", type="14", id=ALICE) == (200, {"keys": []})
        assert legacy_error(await c.get("/getid", type="14"))[0] == 400

    scenario(serve_api, body)


def test_cache_types_16_17(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        status, stored = await c.get("/getid", type="16", id="ROBOT1.0_abc")
        assert status == 200 and type(stored["row"]) is int
        assert await c.get("/getid", type="16", id="ROBOT1.0_abc") == (200, stored)
        assert await c.get("/getid", type="17", id=str(stored["row"])) == (
            200, {"id": "ROBOT1.0_abc"})
        assert legacy_error(await c.get("/getid", type="17", id="77")) == (404, "ID not found")

    scenario(serve_api, body)


def test_bad_input_on_every_type_is_400(serve_api: ServeApi) -> None:
    cases: list[tuple[dict[str, str], str | None]] = [
        ({}, "invalid type"), ({"type": "x"}, "invalid type"), ({"type": "0"}, "invalid type"),
        ({"type": "18"}, "invalid type"), ({"type": "1.5"}, "invalid type"),
        ({"type": "1"}, None), ({"type": "1", "id": "has space"}, None),
        ({"type": "2", "id": "abc"}, "invalid id"), ({"type": "2"}, "invalid id"),
        ({"type": "3", "id": "s" * 600}, None),
        ({"type": "4", "id": "s" * 600}, None),
        ({"type": "5", "oldRowValue": "x", "newRowValue": "1"}, "invalid oldRowValue"),
        ({"type": "5", "oldRowValue": "1"}, "invalid newRowValue"),
        ({"type": "6", "virtualValue": "-3"}, "invalid virtualValue"),
        ({"type": "7"}, "invalid id"),
        ({"type": "8", "id": ALICE}, "subid parameter is required for type 8"),
        ({"type": "8", "id": "", "subid": ALICE}, None),
        ({"type": "9", "id": "1"}, "subid parameter is required for type 9"),
        ({"type": "9", "id": "x", "subid": "1"}, "invalid id"),
        ({"type": "10", "id": GROUP}, "id and subid parameters are required for type 10"),
        ({"type": "11", "id": "1"}, "id and subid parameters are required for type 11"),
        ({"type": "11", "id": "a", "subid": "1"}, "Invalid input values idOrRow"),
        ({"type": "11", "id": "1", "subid": "b"}, "Invalid input values subid"),
        ({"type": "12", "oldVirtualValue1": "1"}, "Invalid input values newVirtualValue1"),
        ({"type": "12"}, "Invalid input values oldVirtualValue1"),
        ({"type": "13"}, None),
        ({"type": "14"}, "invalid id"),
        ({"type": "15", "id": "s" * 600}, None),
        ({"type": "16"}, None), ({"type": "16", "id": "r" * 500}, None),
        ({"type": "17", "id": "0"}, None), ({"type": "17", "id": "abc"}, None),
    ]

    async def body(c: Any) -> None:
        for params, message in cases:
            status, error = legacy_error(await c.get("/getid", **params))
            assert status == 400, (params, error)
            if message is not None:
                assert error == message, params

    scenario(serve_api, body)


def test_getid_needs_no_token_from_loopback(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        assert (await c.get("/getid", type="1", id=ALICE))[0] == 200
        assert legacy_error(await c.get("/v1/stats"))[0] == 401  # /v1 does need it

    scenario(serve_api, body, token="s3cret")
