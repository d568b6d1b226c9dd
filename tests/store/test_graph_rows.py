"""What a copy cannot carry (pure): each row's own limits, and the two directions of the
graph pairing up, every record named once with its reason."""

from __future__ import annotations

from gensokyo_idmap.store.base import LastSeen
from gensokyo_idmap.store.graph_rows import GraphRows, Uncarried, uncarriable

A = "openid:QQ:102000001:A11CE"
B = "openid:QQ:102000001:B0B"


def sound() -> GraphRows:
    return GraphRows(meta={"schema_version": 1, "vuin_counter": 2},
                     identities=[(A, 1), (B, 2)], sets=[(1, A), (2, B)],
                     last_seen=[(1, "QQ:102000001:c2c", LastSeen(A, 1.0))],
                     aliases=[(3, 1)], config=[(b"12:type", b"group")])


def test_a_sound_graph_carries_whole() -> None:
    assert uncarriable(sound()) == []
    assert sound().graph_meta() == {"vuin_counter": 2}  # the file's own schema stays behind


def test_each_row_that_a_target_cannot_hold_is_named() -> None:
    rows = sound()
    rows.meta["binary"] = b"\x00"
    rows.identities.append(("raw:nul\x00", 4))
    rows.sets.append((4, "raw:nul\x00"))
    rows.last_seen.append((1, "x" * 401, LastSeen(A, 2.0)))
    rows.aliases.append((5, 5))
    rows.user_info.append((b"", b"{}"))
    assert [(u.table, u.reason) for u in uncarriable(rows)] == [
        ("meta", "the value is not JSON (PostgreSQL keeps meta as jsonb)"),
        ("identity_to_vuin", "the key holds a NUL character, which PostgreSQL text cannot"),
        ("vuin_to_identity", "the key holds a NUL character, which PostgreSQL text cannot"),
        ("last_seen", "the scene is 401 bytes; 1 to 400 fit"),
        ("vuin_alias", "an alias of itself"),
        ("user_info", "the key is 0 bytes; 1 to 511 fit"),
    ]


def test_the_two_directions_must_be_exact_inverses() -> None:
    rows = sound()
    rows.identities.append(("raw:lonely", 7))  # vUIN 7's set does not list it
    rows.sets.append((2, A))  # A points at 1, not 2
    assert uncarriable(rows) == [
        Uncarried("identity_to_vuin", "'raw:lonely' → 7", "vUIN 7's set does not list it"),
        Uncarried("vuin_to_identity", f"2 ∋ {A!r}", "the key points at vUIN 1"),
    ]


def test_what_the_reader_could_not_decode_is_never_carried() -> None:
    rows = sound()
    rows.unreadable.append(Uncarried("last_seen", "0x01", "not vUIN+scene → [identity, since]"))
    assert uncarriable(rows) == rows.unreadable
