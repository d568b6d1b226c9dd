"""The Go daemon's idmap function names, routed to the identity graph.

Gensokyo code (and its ``/getid`` API) speaks in rows: ``StoreIDv2(id) -> row``. Here a row
is a vUIN and a bare id is an OpenID of the configured AppID. The "Pro" variants once kept
composite ``<group>:<user>`` keys behind an ``idmap_pro`` switch; in the identity graph a
group and a member are simply two identities, so the wrappers need no setting at all.

Where the old daemon's algorithm cannot carry over, the new model keeps what a caller relies
on: ``SimplifiedStoreID`` returns the id's vUIN (not an md5-derived number, which could name
someone else), ``UpdateVirtualValuePro`` rebinds the group and the member vUINs (a pair is
two identities here), ``FindSubKeysById`` lists the members last seen in the group. Config
keys are ``<section>:<key>`` in the ``config`` table, byte for byte as the old bucket held
them (migration copies that bucket).
"""

from __future__ import annotations

from gensokyo_idmap.errors import BadInputError, NotFoundError, StoreError
from gensokyo_idmap.identity import (
    MAX_KEY_BYTES,
    IdentityKey,
    OpenId,
    RawId,
    RUin,
    chat_scene,
    is_platform_openid,
    openid_prefix,
    parse_key,
    parse_ruin_text,
    parse_vuin,
)
from gensokyo_idmap.idmap import ANY_IDENTITY, IdentityGraph, openid_of_app
from gensokyo_idmap.runtime.msgid import MessageIds, MsgContext, check_virtual_id
from gensokyo_idmap.store.base import LegacyTables, LegacyWriter

__all__ = ["LegacyIdmap"]

_KEY_PREFIXES = ("openid:", "union:", "ruin:", "raw:")
_MAX_MEMBERS = 10_000


def _config_key(section: str, key: str) -> bytes:
    """``<section>:<key>`` as the old config bucket spelled it."""
    try:
        raw = f"{section}:{key}".encode()
    except UnicodeEncodeError:
        raise BadInputError("id", section, "config section and key must be Unicode text") from None
    if len(raw) > MAX_KEY_BYTES:
        raise BadInputError("id", section, f"section:key is longer than {MAX_KEY_BYTES} bytes")
    return raw


def _text(field: str, value: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInputError(field, value, "must be Unicode text") from None


class LegacyIdmap:
    """``StoreIDv2`` & co. for one AppID; ``StoreCachev2`` & co. when given the msgid map."""

    def __init__(self, graph: IdentityGraph, app_id: str, msgids: MessageIds | None = None,
                 tables: LegacyTables | None = None) -> None:
        """``tables``: where ``ReadConfig`` & co. read and write; by default the graph's
        store, when it keeps the legacy tables (openid-map.db does)."""
        self.graph = graph
        self.app_id = app_id
        self.msgids = msgids
        self.tables = (tables if tables is not None else
                       graph.store if isinstance(graph.store, LegacyTables) else None)

    def _msgids(self) -> MessageIds:
        if self.msgids is None:
            raise StoreError("no message-id store was given to LegacyIdmap")
        return self.msgids

    def legacy_key(self, value: str, field: str = "id") -> IdentityKey:
        """A legacy id: a typed key or rUIN text as such, a 32-hex id an OpenID of our AppID,
        anything else (a channel, guild or guild user id, a legacy message id) ``raw:`` as
        the old store and the migration kept it (:func:`is_platform_openid`)."""
        text = value.strip() if isinstance(value, str) else value
        if not isinstance(text, str) or not text:
            raise BadInputError(field, value, "id is empty")
        if text[:5].lower() == "ruin-":
            return parse_ruin_text(text, field)
        if text.startswith(_KEY_PREFIXES):
            return parse_key(text, field)
        if is_platform_openid(text):
            return OpenId(app_id=self.app_id, openid=text)
        try:
            return RawId(text)
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

    async def StoreCachev2(self, id: str) -> int:
        """A real message id → its virtual id (the old daemon's ``cache`` bucket)."""
        return await self._msgids().store_real(id, MsgContext(app_id=self.app_id))

    def RetrieveRowByCachev2(self, rowid: str | int) -> str:
        """A virtual message id → the real one, while it lives."""
        return self._msgids().real_id_of(check_virtual_id(rowid, "rowid"))

    # --- the rest of the old /getid surface ---------------------------------------------

    async def SimplifiedStoreID(self, id: str) -> int:
        """A number that reads back to ``id`` (type 2): its vUIN, created if needed."""
        return await self.StoreIDv2(id)

    def RetrieveRealValue(self, virtual: str | int) -> tuple[str, str]:
        """(the vUIN as text, the id it names)."""
        vuin = parse_vuin(virtual, "virtualValue")
        return str(vuin), self.RetrieveRowByIDv2(vuin)

    def RetrieveVirtualValue(self, id: str) -> tuple[str, str]:
        """(the id, its vUIN as text), without creating one."""
        vuin = self.graph.lookup(self.legacy_key(id))
        if vuin is None:
            raise NotFoundError(f"no virtual value found for real value: {id}")
        return id, str(vuin)

    def RetrieveVirtualValuePro(self, id: str, subid: str) -> tuple[str, str]:
        """The vUINs of a group and a member as text, without creating either."""
        group, member = self.legacy_key(id), self.legacy_key(subid, "subid")
        found = self.graph.lookup(group), self.graph.lookup(member)
        if found[0] is None or found[1] is None:
            raise NotFoundError(f"no virtual values found for {id}:{subid}")
        return str(found[0]), str(found[1])

    def RetrieveRealValuesPro(
        self, virtual: str | int, virtual_sub: str | int
    ) -> tuple[str, str]:
        """The ids of a group vUIN and a member vUIN."""
        row, sub = parse_vuin(virtual, "id"), parse_vuin(virtual_sub, "subid")
        return self.RetrieveRowByIDv2(row), self.RetrieveRowByIDv2(sub)

    async def UpdateVirtualValuePro(
        self, old1: str | int, new1: str | int, old2: str | int, new2: str | int
    ) -> None:
        """Rebind the group's vUIN and the member's vUIN (each only if it changes)."""
        pairs = [(parse_vuin(old1, "oldVirtualValue1"), parse_vuin(new1, "newVirtualValue1")),
                 (parse_vuin(old2, "oldVirtualValue2"), parse_vuin(new2, "newVirtualValue2"))]
        for old, _ in pairs:  # both known before anything moves
            if self.graph.canonical(old) is None:
                raise NotFoundError(f"vUIN {old} is not known")
        for old, new in pairs:
            if old != new:
                await self.graph.rebind(old, new)

    def FindSubKeysById(self, id: str) -> list[str]:
        """Members last seen in a group: a group id gives member ids, a group vUIN gives
        member vUINs (as text), as the old ``<group>:<member>`` prefix scan did."""
        text = id.strip() if isinstance(id, str) else id
        if isinstance(text, str) and text.isascii() and text.isdigit():
            group = self.graph.pick_identity(parse_vuin(text, "id"),
                                             usable=openid_of_app(self.app_id))
            as_rows = True
        else:
            group = self.legacy_key(id)
            as_rows = False
        if not isinstance(group, OpenId) or group.app_id != self.app_id:
            return []
        prefix = openid_prefix(self.app_id)
        scene = chat_scene(self.app_id, "group", group.openid)
        members = [(key, vuin) for key, vuin, _ in
                   self.graph.seen_in_scenes(prefix, lambda key: scene, _MAX_MEMBERS)
                   if key != group.key]
        return [str(vuin) if as_rows else key[len(prefix):] for key, vuin in members]

    def _tables(self) -> LegacyTables:
        if self.tables is None:
            raise StoreError("this identity store keeps no legacy config table")
        return self.tables

    def ReadConfig(self, section: str, key: str) -> str:
        with self._tables().read_legacy() as view:
            value = view.get_config(_config_key(section, key))
        if value is None:
            raise NotFoundError(f"key '{key}' in section '{section}' does not exist")
        return value.decode("utf-8", errors="replace")

    async def WriteConfig(self, section: str, key: str, value: str) -> None:
        raw_key, raw_value = _config_key(section, key), _text("value", value)

        def put(view: LegacyWriter) -> None:
            view.put_config(raw_key, raw_value)

        await self._tables().write_legacy(put)

    async def DeleteConfig(self, section: str, key: str) -> None:
        """Deleting a key that is not there succeeds, as in the old daemon."""
        raw_key = _config_key(section, key)

        def delete(view: LegacyWriter) -> None:
            view.delete_config(raw_key)

        await self._tables().write_legacy(delete)
