"""Mutated legacy files: the migration succeeds consistently or fails with our error (issue 4).

"Hypothesis: mutated (bit-flipped, truncated) copies of the fixtures only ever raise our
error type or succeed; never another exception, a hang, or a partial store."

Each example copies ``small-counter.db``, flips bits and/or truncates it, and migrates it
into a fresh data dir. Flips land anywhere in the file, inside the pages in use, in page
headers and element arrays (where the structure lives), or in value bytes only (the tree
stays readable, so the converter sees changed rows, reverse ids, pro pairs, counters and
JSON). Then either

- the migration succeeded: the marker exists, ``identity_to_vuin`` and ``vuin_to_identity``
  are exact inverses, every alias target holds identities, no alias number also holds
  identities, every number and the counter lie inside 1..MAX_VUIN with the counter above
  every number in use, and the tables hold what the report says was written; or
- it raised an :class:`IdmapError` subclass: no marker, and openid-map.db is completely
  empty (no identities, vUIN sets, aliases, last_seen, config, UserInfo, counter).

Never another exception type, never a hang (each example runs under a SIGALRM limit), and
the legacy copy is never changed. Hypothesis examples share no pytest fixture: every
example makes and removes its own temporary directory.

Below the property test, one test per bug class found while writing it, each on a legacy
file whose structure the reader accepts. They are separate tests (not explicit examples of
the property test) so that a known bug does not stop the random examples from running.
"""

from __future__ import annotations

import hashlib
import struct
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import NamedTuple

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gensokyo_idmap.errors import IdmapError
from gensokyo_idmap.identity import MAX_VUIN
from gensokyo_idmap.idmap import allocate_vuin
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from migrate.bbolt import BoltFile
from migrate.legacy import MARKER, MigrationReport, migrate_legacy

from ..conftest import time_limit as _time_limit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "legacy"
APP = "102076543"  # settings.appid of the fixtures
SMALL = (FIXTURES / "small-counter.db").read_bytes()
EXAMPLE_TIMEOUT = 20.0  # s for one migration: far more than the ~0.1 s it takes

_PAGE_HEADER = struct.Struct("<QHHI")  # id, flags, count, overflow
_LEAF_ELEM = struct.Struct("<IIII")  # flags, pos, ksize, vsize
_BRANCH_ELEM = struct.Struct("<IIQ")  # pos, ksize, child page


class LeafEntry(NamedTuple):
    """Where one key/value of the fixture lies (file offsets)."""

    page: int
    element: int
    key: bytes
    ksize_at: int
    value_at: int
    vsize: int


def _leaf_entries(bucket: bytes) -> list[LeafEntry]:
    """Every entry of a top-level bucket of the (trusted) fixture, with its offsets."""
    with BoltFile(FIXTURES / "small-counter.db") as bolt:
        found = bolt.bucket((bucket,))
        assert found is not None and not found.is_inline
        stack = [found.root]
        page_size = bolt.page_size
    entries: list[LeafEntry] = []
    while stack:
        page = stack.pop()
        base = page * page_size
        _pid, flags, count, _overflow = _PAGE_HEADER.unpack_from(SMALL, base)
        for i in range(count):
            elem = base + 16 + 16 * i
            if flags == 0x01:
                stack.append(_BRANCH_ELEM.unpack_from(SMALL, elem)[2])
            else:
                _f, pos, ksize, vsize = _LEAF_ELEM.unpack_from(SMALL, elem)
                key = SMALL[elem + pos:elem + pos + ksize]
                entries.append(LeafEntry(page, i, key, elem + 8, elem + pos + ksize, vsize))
    return sorted(entries, key=lambda e: e.key)


with BoltFile(FIXTURES / "small-counter.db") as _bolt:
    PS = _bolt.page_size
    USED_PAGES = _bolt.high_water  # pages past this are free space
ENTRIES = {name: _leaf_entries(name) for name in (b"ids", b"cache", b"config", b"UserInfo")}
VALUE_BYTES = [
    offset for entries in ENTRIES.values() for e in entries
    for offset in range(e.value_at, e.value_at + e.vsize)
]
IDS_CURRENT_ROW = next(e for e in ENTRIES[b"ids"] if e.key == b"currentRow")


def time_limit(seconds: float) -> AbstractContextManager[None]:
    """A hang guard for the migration (see conftest.time_limit)."""
    return _time_limit(seconds, "migration")


def check_consistent(identity: LmdbIdentityStore, report: MigrationReport) -> None:
    with identity.read() as view:
        assert view.get_meta(MARKER) is not None, "migrated, but no marker"
        identities = list(view.iter_identities())
        vuin_sets = list(view.iter_vuin_sets())
        aliases = list(view.iter_aliases())
        counts = view.counts()
        legacy = view.legacy_counts()
        counter = view.vuin_counter()
    forward = {(vuin, key) for key, vuin in identities}
    reverse = set(vuin_sets)
    assert forward == reverse, (
        f"identity_to_vuin and vuin_to_identity differ: only forward "
        f"{sorted(forward - reverse)[:5]}, only reverse {sorted(reverse - forward)[:5]}"
    )
    holders = {vuin for vuin, _ in vuin_sets}
    for number, target in aliases:
        assert target in holders, f"alias {number} → {target}, which holds no identity"
        assert number not in holders, f"alias number {number} also holds identities"
    used = [vuin for _, vuin in identities] + [n for n, _ in aliases]
    outside = [n for n in used if not 0 < n <= MAX_VUIN]
    assert not outside, f"numbers outside 1..{MAX_VUIN} in the store: {outside[:5]}"
    assert max(used, default=0) <= counter <= MAX_VUIN, (
        f"meta.vuin_counter {counter} is not between the highest number in use "
        f"({max(used, default=0)}) and MAX_VUIN {MAX_VUIN}: new vUINs cannot be allocated"
        if counter > MAX_VUIN else f"meta.vuin_counter {counter} is below a number in use")
    assert counts.last_seen == 0
    assert report.written == {
        "identity_to_vuin": counts.identities, "vuins": counts.vuins,
        "vuin_alias": counts.aliases, "config": legacy.config, "UserInfo": legacy.user_info,
    }


def check_empty(identity: LmdbIdentityStore, error: IdmapError) -> None:
    with identity.read() as view:
        marker = view.get_meta(MARKER)
        counts, legacy = view.counts(), view.legacy_counts()
        held = {
            "identities": counts.identities, "vuins": counts.vuins, "aliases": counts.aliases,
            "last_seen": counts.last_seen, "config": legacy.config,
            "user_info": legacy.user_info, "vuin_counter": view.vuin_counter(),
            "identity rows": sum(1 for _ in view.iter_identities()),
            "vuin set rows": sum(1 for _ in view.iter_vuin_sets()),
        }
    assert marker is None, f"{type(error).__name__} ({error}), but the marker was written"
    assert not any(held.values()), (
        f"{type(error).__name__} ({error}), but the store is not empty: {held}")


def migrate_mutant(
    data: bytes, after: Callable[[LmdbIdentityStore], None] | None = None
) -> IdmapError | None:
    """Migrate ``data`` into a fresh store and check the outcome as the module says.

    ``after`` runs on the store after a successful migration. Returns the error, if any.
    """
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        root = Path(tmp)
        legacy = root / "idmap.db"
        legacy.write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        identity = LmdbIdentityStore(root / "openid-map.db")
        try:
            msgid = LmdbMsgIdStore(root / "msgid-map.db")
            try:
                started = time.monotonic()
                report: MigrationReport | None = None
                error: IdmapError | None = None
                with time_limit(EXAMPLE_TIMEOUT):
                    try:
                        report = migrate_legacy(legacy, identity, msgid, APP)
                    except IdmapError as exc:
                        error = exc
                    # anything else (lmdb.Error, RecursionError, KeyError, …) escapes and
                    # fails the example with its own traceback
                assert time.monotonic() - started < EXAMPLE_TIMEOUT
                if error is None:
                    assert report is not None and report.status == "migrated"
                    check_consistent(identity, report)
                    if after is not None:
                        after(identity)
                else:
                    assert str(error)
                    check_empty(identity, error)
            finally:
                msgid.close()
        finally:
            identity.close()
        assert hashlib.sha256(legacy.read_bytes()).hexdigest() == digest, "legacy file changed"
    return error


offsets = st.one_of(
    st.integers(0, len(SMALL) - 1),  # anywhere, free pages included
    st.integers(0, USED_PAGES * PS - 1),  # inside the pages in use
    # page headers, element arrays and metas: where the structure lives
    st.builds(lambda page, within: page * PS + within,
              st.integers(0, USED_PAGES - 1), st.integers(0, 255)),
    st.sampled_from(VALUE_BYTES),
)
masks = st.one_of(st.sampled_from([1 << bit for bit in range(8)]), st.integers(1, 255))
flips = st.lists(st.tuples(offsets, masks), min_size=1, max_size=8)
#: Flips in value bytes only: values are unordered and bbolt has no data checksums, so the
#: file stays readable and the converter itself meets changed rows, ids, pairs and counters.
value_flips = st.lists(st.tuples(st.sampled_from(VALUE_BYTES), masks), min_size=1, max_size=8)
cuts = st.one_of(
    st.integers(0, len(SMALL) - 1),
    st.builds(lambda page: page * PS, st.integers(0, len(SMALL) // PS - 1)),  # at a page edge
)
mutations = st.one_of(
    st.tuples(flips, st.none()),
    st.tuples(value_flips, st.none()),
    st.tuples(st.just([]), cuts),
    st.tuples(flips, cuts),
)

Mutation = tuple[list[tuple[int, int]], int | None]


def _first(bucket: bytes) -> LeafEntry:
    return ENTRIES[bucket][0]


#: ksize + 512 in the first config entry: a 519-byte key that still lies inside its page and
#: sorts where it did, so the reader accepts it (bbolt keys may be up to 32 KiB), but LMDB
#: keys may not exceed 511 bytes.
LONG_CONFIG_KEY: Mutation = ([(_first(b"config").ksize_at + 1, 0x02)], None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutation=mutations)
@example(mutation=LONG_CONFIG_KEY)
def test_mutated_legacy_file_migrates_consistently_or_fails_cleanly(mutation: Mutation) -> None:
    changes, cut = mutation
    data = bytearray(SMALL)
    for offset, mask in changes:
        data[offset] ^= mask
    migrate_mutant(bytes(data if cut is None else data[:cut]))


def test_unmutated_copy_migrates() -> None:
    """The baseline the mutations start from succeeds (else every example would fail)."""
    assert migrate_mutant(SMALL) is None


# --------------------------------------------------------------------- found bug classes


def _readable(data: bytes, bucket: bytes) -> list[tuple[bytes, bytes | None]]:
    """The entries of ``bucket`` as our reader returns them: it must accept the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "idmap.db"
        path.write_bytes(data)
        with BoltFile(path) as bolt:
            return list(bolt.items((bucket,)))


def _longer_key(bucket: bytes) -> bytes:
    """small-counter.db with the first key of ``bucket`` made 512 bytes longer."""
    data = bytearray(SMALL)
    entry = _first(bucket)
    (ksize,) = struct.unpack_from("<I", data, entry.ksize_at)
    struct.pack_into("<I", data, entry.ksize_at, ksize + 512)
    key = _readable(bytes(data), bucket)[0][0]
    assert len(key) == ksize + 512 > 511 and key.startswith(entry.key)
    return bytes(data)


def test_config_key_longer_than_lmdb_allows_fails_with_our_error() -> None:
    """bbolt keys may be up to 32 KiB, LMDB keys at most 511 bytes: such a config key must
    be dropped (and reported) or refused with our error, not escape as lmdb.BadValsizeError
    from ``put_config`` (migrate/legacy.py copy_bucket)."""
    migrate_mutant(_longer_key(b"config"))


def test_userinfo_key_longer_than_lmdb_allows_fails_with_our_error() -> None:
    """The same for UserInfo keys (``put_user_info``)."""
    migrate_mutant(_longer_key(b"UserInfo"))


def test_current_row_above_max_vuin_does_not_become_the_counter() -> None:
    """ids/currentRow of 2**63 + 222 (one flipped bit): forward rows outside 1..MAX_VUIN are
    dropped, but this counter was taken as is, so meta.vuin_counter ends above MAX_VUIN and
    the migrated store can never hand out a vUIN again ("vUIN space exhausted")."""
    data = bytearray(SMALL)
    data[IDS_CURRENT_ROW.value_at] ^= 0x80
    rows = dict(_readable(bytes(data), b"ids"))
    assert int.from_bytes(rows[b"currentRow"] or b"", "big") > MAX_VUIN

    def new_vuin_can_be_allocated(identity: LmdbIdentityStore) -> None:
        assert 0 < identity.transact(allocate_vuin) <= MAX_VUIN

    migrate_mutant(bytes(data), after=new_vuin_can_be_allocated)


def _leaf_page(pgid: int, entries: list[tuple[bytes, bytes]]) -> bytes:
    """A bbolt leaf page (header, elements, then the keys and values) of plain values."""
    elements = bytearray()
    body = bytearray()
    at = 16 + 16 * len(entries)
    for i, (key, value) in enumerate(entries):
        elements += _LEAF_ELEM.pack(0, at - (16 + 16 * i), len(key), len(value))
        body += key + value
        at += len(key) + len(value)
    page = _PAGE_HEADER.pack(pgid, 0x02, len(entries), 0) + elements + body
    assert len(page) <= PS
    return page.ljust(PS, b"\0")


def test_deeply_nested_userinfo_json_fails_with_our_error_or_is_copied() -> None:
    """A UserInfo value of 3000 '[' (a well-formed bbolt file, as the old daemon would store
    any string) makes ``json.loads`` in copy_bucket's check raise RecursionError, which is
    neither ValueError nor UnicodeDecodeError: it escapes migrate_legacy. The value must be
    copied as is (noted as not valid JSON) or the file refused with our error."""
    data = bytearray(SMALL)
    kept = ENTRIES[b"UserInfo"][:3]
    page = kept[0].page
    assert all(e.page == page for e in ENTRIES[b"UserInfo"])  # one leaf holds them all
    entries = [(e.key, SMALL[e.value_at:e.value_at + e.vsize]) for e in kept]
    entries[0] = (entries[0][0], b"[" * 3000)
    data[page * PS:(page + 1) * PS] = _leaf_page(page, entries)
    assert _readable(bytes(data), b"UserInfo") == entries
    migrate_mutant(bytes(data))
