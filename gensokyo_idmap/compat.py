"""The Go daemon's idmap function names, routed to the identity graph.

Gensokyo code (and its ``/getid`` API) speaks in rows: ``StoreIDv2(id) -> row``. Here a row
is a vUIN and a bare id is an OpenID of the configured AppID. The "Pro" variants once kept
composite ``<group>:<user>`` keys behind an ``idmap_pro`` switch; in the identity graph a
group and a member are simply two identities, so the wrappers need no setting at all.
"""

from __future__ import annotations

from gensokyo_idmap.errors import BadInputError, NotFoundError, StoreError
from gensokyo_idmap.identity import (
    IdentityKey,
    OpenId,
    RawId,
    RUin,
    parse_key,
    parse_ruin_text,
    parse_vuin,
)
from gensokyo_idmap.idmap import ANY_IDENTITY, IdentityGraph, openid_of_app
from gensokyo_idmap.msgid import MsgContext, MsgIdMap, check_virtual_id

__all__ = ["LegacyIdmap"]

_KEY_PREFIXES = ("openid:", "union:", "ruin:", "raw:")


class LegacyIdmap:
    """``StoreIDv2`` & co. for one AppID; ``StoreCachev2`` & co. when given the msgid map."""

    def __init__(self, graph: IdentityGraph, app_id: str, msgids: MsgIdMap | None = None) -> None:
        self.graph = graph
        self.app_id = app_id
        self.msgids = msgids

    def _msgids(self) -> MsgIdMap:
        if self.msgids is None:
            raise StoreError("no message-id store was given to LegacyIdmap")
        return self.msgids

    def legacy_key(self, value: str, field: str = "id") -> IdentityKey:
        """A legacy id: a typed key or rUIN text as such, else an OpenID of our AppID."""
        text = value.strip() if isinstance(value, str) else value
        if not isinstance(text, str) or not text:
            raise BadInputError(field, value, "id is empty")
        if text[:5].lower() == "ruin-":
            return parse_ruin_text(text, field)
        if text.startswith(_KEY_PREFIXES):
            return parse_key(text, field)
        try:
            return OpenId(app_id=self.app_id, openid=text)
        except BadInputError:
            pass
        try:
            return RawId(text)  # not OpenID-shaped (e.g. a guild id with a dot): kept verbatim
        except BadInputError as err:
            raise BadInputError(field, value, err.reason) from None

    def _legacy_id(self, key: IdentityKey) -> str:
        if isinstance(key, OpenId) and key.app_id == self.app_id:
            return key.openid
        if isinstance(key, RawId):
            return key.value
        if isinstance(key, RUin):
            return key.text
        return key.key

    async def StoreIDv2(self, id: str) -> int:
        return (await self.graph.resolve([self.legacy_key(id)])).vuin

    def RetrieveRowByIDv2(self, rowid: str | int) -> str:
        vuin = parse_vuin(rowid, "rowid")
        try:
            key = self.graph.pick_identity(vuin, usable=openid_of_app(self.app_id))
        except NotFoundError as err:
            if type(err) is NotFoundError:
                raise
            key = self.graph.pick_identity(vuin, usable=ANY_IDENTITY)
        return self._legacy_id(key)

    async def UpdateVirtualValuev2(self, old: str | int, new: str | int) -> None:
        await self.graph.rebind(parse_vuin(old, "oldRowValue"), parse_vuin(new, "newRowValue"))

    async def StoreIDv2Pro(self, id: str, subid: str) -> tuple[int, int]:
        group, member = self.legacy_key(id), self.legacy_key(subid, "subid")  # both, before writing
        row = (await self.graph.resolve([group])).vuin
        sub = (await self.graph.resolve([member])).vuin
        return row, sub

    def RetrieveRowByIDv2Pro(
        self, row: str | int, subrow: str | int
    ) -> tuple[str, str]:
        return self.RetrieveRowByIDv2(row), self.RetrieveRowByIDv2(subrow)

    async def StoreCachev2(self, id: str) -> int:  # noqa: N802
        """A real message id → its virtual id (the old daemon's ``cache`` bucket)."""
        return await self._msgids().store_real(id, MsgContext(app_id=self.app_id))

    def RetrieveRowByCachev2(self, rowid: str | int) -> str:  # noqa: N802
        """A virtual message id → the real one, while it lives."""
        return self._msgids().real_id_of(check_virtual_id(rowid, "rowid"))
