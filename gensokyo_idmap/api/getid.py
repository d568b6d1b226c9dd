"""``GET /getid?type=N&…``: the Go daemon's idmap API, answered from the identity graph.

A Gensokyo instance in "lotus" mode sends every idmap call here. Types, parameters and
answers are the Go daemon's (``server.GetIDHandler`` and ``idmap/service.go``): numbers are
JSON numbers where Go sends ``int64`` (``row``, ``subRow``) and strings where Go formats
them (``virtual``, ``firstValue`` …); an error is ``{"error": "<text>"}``, with Go's own text
for bad parameters and ``"ID not found"`` for types 2 and 17.

Where we answer differently, on purpose: a wrong ``type`` (including one outside 1–17, which
Go answers with an empty 200) is 400 ``invalid type``; bad or missing numbers are 400 (Go
let some through to the store); "not found" is 404 and a store failure 503 (Go sent 500 for
every failure); type 14 sends ``[]`` rather than ``null`` when nothing matches (Go's lotus
client rejects ``null``). Errors of ours carry their own message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from gensokyo_idmap.compat import LegacyIdmap
from gensokyo_idmap.errors import BadInputError, IdmapError, NotFoundError
from gensokyo_idmap.identity import MAX_VUIN_DIGITS, parse_vuin

__all__ = ["answer_getid"]

Query = Mapping[str, str]
Answer = tuple[int, dict[str, Any]]


class _LegacyBadInput(Exception):
    """A parameter error worded as the Go daemon words it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _number(query: Query, name: str, message: str | None = None) -> int:
    try:
        return parse_vuin(query.get(name, ""), name)
    except BadInputError:
        raise _LegacyBadInput(message or f"invalid {name}") from None


def _required(query: Query, name: str, message: str) -> str:
    value = query.get(name, "")
    if not value:
        raise _LegacyBadInput(message)
    return value


async def _store_id(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    return {"row": await legacy.StoreIDv2(q.get("id", ""))}


async def _retrieve_row(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    try:
        return {"id": legacy.RetrieveRowByIDv2(_number(q, "id", "invalid id"))}
    except NotFoundError as err:
        if type(err) is NotFoundError:
            raise NotFoundError("ID not found") from None
        raise


async def _write_config(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    await legacy.WriteConfig(q.get("id", ""), q.get("subtype", ""), q.get("value", ""))
    return {"status": "success"}


async def _read_config(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    return {"value": legacy.ReadConfig(q.get("id", ""), q.get("subtype", ""))}


async def _update_virtual(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    old, new = _number(q, "oldRowValue"), _number(q, "newRowValue")
    await legacy.UpdateVirtualValuev2(old, new)
    return {"status": "success"}


async def _real_value(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    virtual, real = legacy.RetrieveRealValue(_number(q, "virtualValue"))
    return {"virtual": virtual, "real": real}


async def _virtual_value(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    _, virtual = legacy.RetrieveVirtualValue(_required(q, "id", "invalid id"))
    return {"virtual": virtual}


async def _store_pro(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    subid = _required(q, "subid", "subid parameter is required for type 8")
    row, sub = await legacy.StoreIDv2Pro(q.get("id", ""), subid)
    return {"row": row, "subRow": sub}


async def _retrieve_pro(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    _required(q, "subid", "subid parameter is required for type 9")
    first, second = legacy.RetrieveRowByIDv2Pro(_number(q, "id", "invalid id"),
                                                _number(q, "subid", "invalid subid"))
    return {"id": first, "subid": second}


async def _virtual_pro(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    if not q.get("id") or not q.get("subid"):
        raise _LegacyBadInput("id and subid parameters are required for type 10")
    first, second = legacy.RetrieveVirtualValuePro(q["id"], q["subid"])
    return {"firstValue": first, "secondValue": second}


async def _real_pro(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    if not q.get("id") or not q.get("subid"):
        raise _LegacyBadInput("id and subid parameters are required for type 11")
    first, second = legacy.RetrieveRealValuesPro(
        _number(q, "id", "Invalid input values idOrRow"),
        _number(q, "subid", "Invalid input values subid"))
    return {"firstRealValue": first, "secondRealValue": second}


async def _update_pro(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    names = ("oldVirtualValue1", "newVirtualValue1", "oldVirtualValue2", "newVirtualValue2")
    old1, new1, old2, new2 = (_number(q, n, f"Invalid input values {n}") for n in names)
    await legacy.UpdateVirtualValuePro(old1, new1, old2, new2)
    return {"message": "Virtual values updated successfully"}


async def _simplified_store(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    return {"row": await legacy.SimplifiedStoreID(q.get("id", ""))}


async def _sub_keys(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    return {"keys": legacy.FindSubKeysById(_required(q, "id", "invalid id"))}


async def _delete_config(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    await legacy.DeleteConfig(q.get("id", ""), q.get("subtype", ""))
    return {"status": "success"}


async def _store_cache(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    return {"row": await legacy.StoreCachev2(q.get("id", ""))}


async def _retrieve_cache(legacy: LegacyIdmap, q: Query) -> dict[str, Any]:
    try:
        return {"id": legacy.RetrieveRowByCachev2(q.get("id", ""))}
    except NotFoundError:
        raise NotFoundError("ID not found") from None


_Handler = Callable[[LegacyIdmap, Query], Awaitable[dict[str, Any]]]

TYPES: Final[dict[str, _Handler]] = {
    "1": _store_id, "2": _retrieve_row, "3": _write_config, "4": _read_config,
    "5": _update_virtual, "6": _real_value, "7": _virtual_value, "8": _store_pro,
    "9": _retrieve_pro, "10": _virtual_pro, "11": _real_pro, "12": _update_pro,
    "13": _simplified_store, "14": _sub_keys, "15": _delete_config, "16": _store_cache,
    "17": _retrieve_cache,
}


def _type_of(raw: str) -> str | None:
    """Go's ``strconv.Atoi``: an optional sign, then digits (``01`` is 1)."""
    text = raw[1:] if raw[:1] in "+-" else raw
    if not text.isascii() or not text.isdigit() or len(text) > MAX_VUIN_DIGITS:
        return None
    return str(int(raw))


async def answer_getid(legacy: LegacyIdmap, query: Query) -> Answer:
    """(HTTP status, JSON body) for one ``/getid`` request."""
    kind = _type_of(query.get("type", ""))
    handler = TYPES.get(kind) if kind is not None else None
    if handler is None:
        return 400, {"error": "invalid type"}
    try:
        return 200, await handler(legacy, query)
    except _LegacyBadInput as err:
        return 400, {"error": err.message}
    except IdmapError as err:
        return err.http_status, {"error": err.message}
