"""Legacy migration over the real fixtures: every manifest mapping lands, noise is reported."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gensokyo_idmap.errors import BadInputError, ConflictError, LegacyDbError
from gensokyo_idmap.identity import OpenId, RawId
from gensokyo_idmap.idmap import IdentityGraph, follow_alias
from gensokyo_idmap.runtime.blocks import MSG_RESERVED
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from migrate.legacy import MARKER, MigrationReport, migrate_legacy

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "legacy"
APP = "102076543"  # settings.appid of the fixtures


def manifest(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / f"{name}.manifest.json").read_text())
    return loaded


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Stores:
    """The two new stores (conftest's real LMDB files) and the migration into them."""

    def __init__(self, identity: LmdbIdentityStore, msgid: LmdbMsgIdStore) -> None:
        self.identity = identity
        self.msgid = msgid

    def migrate(self, legacy: Path, **kw: Any) -> MigrationReport:
        return migrate_legacy(legacy, self.identity, self.msgid, APP, **kw)


@pytest.fixture
def stores(identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> Stores:
    return Stores(identity_store, msgid_store)


@pytest.fixture
def legacy_copy(tmp_path: Path) -> Any:
    def copy(name: str) -> Path:
        target = tmp_path / "legacy" / f"{name}.db"
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(FIXTURES / f"{name}.db", target)
        return target

    return copy


def key_of(legacy_id: str) -> str:
    if len(legacy_id) == 32 and all(c in "0123456789ABCDEFabcdef" for c in legacy_id):
        return OpenId(APP, legacy_id).key
    return RawId(legacy_id).key


def reported_keys(report: MigrationReport) -> set[str]:
    lists = (report.normalised, report.filled_from_reverse, report.reverse_rebuilt,
             report.aliases, report.conflicts, report.reissued, report.dropped, report.notes)
    return {entry.key for entries in lists for entry in entries}


def assert_manifest_landed(view: Any, expected: dict[str, Any], conflicted: set[str]) -> Any:
    """Every mapping of a fixture's manifest is in the migrated graph ``view`` (any backend),
    except those the report lists as conflicts; returns the migration marker."""
    # forward keys keep their number
    for legacy_id, row in expected["ids"]["forward"].items():
        if legacy_id in conflicted:
            continue
        assert view.vuin_of(key_of(legacy_id)) == row, legacy_id
    # every reverse number still resolves to the person it named
    for row_text, legacy_id in expected["ids"]["reverse"].items():
        if f"row-{row_text}" in conflicted:
            continue
        vuin = view.vuin_of(key_of(legacy_id))
        assert vuin is not None, legacy_id
        assert follow_alias(view, int(row_text)) == vuin, (row_text, legacy_id)
    # pro pairs: both ids resolve, and the pro numbers name the same people
    for pair in expected["ids"]["pro_pairs"]:
        rows = [int(p) for p in pair["value"].split(":")]
        for legacy_id, row in zip((pair["group"], pair["user"]), rows, strict=True):
            vuin = view.vuin_of(key_of(legacy_id))
            assert vuin is not None
            where = f"{pair['group']}:{pair['user']}"
            if where not in conflicted:
                assert follow_alias(view, row) == vuin, (where, row)
    # rebinds: the id is on its new row
    for rebind in expected["ids"]["rebinds"]:
        assert view.vuin_of(key_of(rebind["id"])) == rebind["new_row"]
    # config and UserInfo byte for byte, noise entries included
    for bucket, table, copied in (("config", "config", view.iter_config()),
                                  ("UserInfo", "userinfo", view.iter_user_info())):
        want = {k.encode(): v.encode() for k, v in expected[table].items()}
        want.update({bytes.fromhex(n["key_hex"]): bytes.fromhex(n["value_hex"])
                     for n in expected["noise"] if n["bucket"] == bucket})
        assert dict(copied) == want
    # the counter is above every number in use
    highest = max([v for _, v in view.iter_identities()] + [a for a, _ in view.iter_aliases()])
    assert view.vuin_counter() >= highest
    assert view.vuin_counter() >= (expected["ids"]["current_row"] or 0)
    marker = view.get_meta(MARKER)
    # identity_to_vuin and vuin_to_identity are exact inverses
    assert set(view.iter_identities()) == {(k, v) for v, k in view.iter_vuin_sets()}
    return marker


@pytest.mark.parametrize("name", ["small-counter", "small-hash"])
def test_every_manifest_mapping_lands(stores: Stores, legacy_copy: Any, name: str) -> None:
    expected = manifest(name)
    legacy = legacy_copy(name)
    before = sha(legacy)
    report = stores.migrate(legacy)
    assert report.status == "migrated"
    assert sha(legacy) == before  # read-only, never changed
    conflicted = {e.key for e in report.conflicts} | {e.key for e in report.reissued}
    with stores.identity.read() as view:
        marker = assert_manifest_landed(view, expected, conflicted)
    assert marker is not None and marker["legacy_sha256"] == before
    with stores.msgid.read() as view:
        if expected["cache"]["current_row"] is not None:
            assert view.msg_counter() == expected["cache"]["current_row"]
        else:  # hash mode keeps no counter: start above every old message row
            rows = [int(r) for r in expected["cache"]["reverse"]]
            assert view.msg_counter() >= max(r for r in rows if r <= 2**31 - 1)
        carried = view.msg_counter()
    with stores.identity.read() as view:  # and the high-water mark goes on above it too
        assert view.get_meta(MSG_RESERVED) == carried > 0
    if expected["ids"]["current_row"] is not None:  # hash mode: only a stale one (noise)
        assert report.counters["legacy_current_row"] == expected["ids"]["current_row"]


@pytest.mark.parametrize("name", ["small-counter", "small-hash"])
def test_noise_is_reported(stores: Stores, legacy_copy: Any, name: str) -> None:
    report = stores.migrate(legacy_copy(name))
    seen = reported_keys(report)
    for noise in manifest(name)["noise"]:
        if noise["bucket"] == "cache":
            continue  # cache entries are not copied at all
        key = noise.get("key")
        if key is None:  # the non-UTF-8 key: shown as hex
            key = "0x" + noise["key_hex"]
        if noise["kind"] == "reverse_of_non_32_char_id":
            continue  # agrees with its (normalised) forward key: nothing to say
        assert key in seen, (noise["kind"], key)
    dropped = {e.key: e.detail for e in report.dropped}
    assert "leading zeros" in dropped["row-007"]
    assert "not a number" in dropped["row-abc"]
    assert "without a number" in dropped["row-"]


def test_vuins_never_name_two_people(stores: Stores, legacy_copy: Any) -> None:
    stores.migrate(legacy_copy("small-hash"))
    with stores.identity.read() as view:
        holders: dict[int, set[str]] = {}
        for vuin, key in view.iter_vuin_sets():
            holders.setdefault(vuin, set()).add(key)
        for alias, target in view.iter_aliases():
            assert alias not in holders, f"alias {alias} also names {holders.get(alias)}"
            assert target in holders


def test_empty_file_gives_an_empty_store_with_a_marker(stores: Stores, legacy_copy: Any) -> None:
    report = stores.migrate(legacy_copy("empty"))
    assert report.status == "migrated"
    with stores.identity.read() as view:
        assert view.counts().identities == 0
        assert view.get_meta(MARKER) is not None


@pytest.mark.parametrize("name", ["corrupt", "truncated"])
def test_damaged_files_fail_and_leave_no_marker(stores: Stores, legacy_copy: Any,
                                                name: str) -> None:
    legacy = legacy_copy(name)
    before = sha(legacy)
    with pytest.raises(LegacyDbError):
        stores.migrate(legacy)
    with stores.identity.read() as view:
        assert view.get_meta(MARKER) is None
        assert view.counts().identities == 0
    assert sha(legacy) == before


def test_second_start_does_nothing(stores: Stores, legacy_copy: Any) -> None:
    legacy = legacy_copy("small-counter")
    stores.migrate(legacy)
    with stores.identity.read() as view:
        counts = view.counts()
    legacy.write_bytes(b"garbage: the file must not even be read again")
    again = stores.migrate(legacy)
    assert again.status == "already_migrated"
    with stores.identity.read() as view:
        assert view.counts() == counts


def test_store_with_identities_but_no_marker_is_refused(stores: Stores, legacy_copy: Any) -> None:
    graph = IdentityGraph(stores.identity)
    asyncio.run(graph.resolve([OpenId(APP, "A" * 32)]))
    with pytest.raises(ConflictError) as err:
        stores.migrate(legacy_copy("small-counter"))
    assert "no migration marker" in err.value.message and "move openid-map.db aside" in (
        err.value.message)
    with stores.identity.read() as view:
        assert view.counts().identities == 1
        assert view.get_meta(MARKER) is None


def test_dry_run_writes_nothing(stores: Stores, legacy_copy: Any) -> None:
    report = stores.migrate(legacy_copy("small-counter"), dry_run=True)
    assert report.status == "dry_run"
    assert report.written["identity_to_vuin"] > 200
    with stores.identity.read() as view:
        assert view.counts().identities == 0
        assert view.get_meta(MARKER) is None
    with stores.msgid.read() as view:
        assert view.msg_counter() == 0


def test_missing_legacy_file_and_missing_app_id(stores: Stores, tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no such file"):
        stores.migrate(tmp_path / "nope.db")
    with pytest.raises(BadInputError, match="bot.app_id"):
        migrate_legacy(FIXTURES / "empty.db", stores.identity, stores.msgid, "")


def test_report_json_round_trips(stores: Stores, legacy_copy: Any) -> None:
    report = stores.migrate(legacy_copy("small-counter"))
    data = json.loads(json.dumps(report.to_json()))
    assert data["read"]["ids"] == manifest("small-counter")["key_counts"]["ids"]
    assert {d["key"] for d in data["dropped"]} >= {"row-007", "row-abc", "row-"}
    assert all(line for line in report.summary_lines())


# --- start-up and CLI ------------------------------------------------------------------


def test_daemon_start_migrates_before_ready(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    from gensokyo_idmap.app import run_daemon
    from gensokyo_idmap.config import BotConfig, Config, IdmapConfig
    from gensokyo_idmap.testing import until
    from migrate.startup import migrate_if_found

    data = tmp_path / "data"
    data.mkdir()
    shutil.copyfile(FIXTURES / "small-counter.db", data / "idmap.db")
    config = Config(bot=BotConfig(app_id=APP), idmap=IdmapConfig(data_dir=data))

    async def scenario() -> list[dict[str, Any]]:
        stop = asyncio.Event()
        with capture_logs() as logs:
            task = asyncio.create_task(run_daemon(config, stop, prepare=migrate_if_found))
            await until(lambda: any(e["event"] == "[app] ready" for e in logs) or task.done(),
                        10, "[app] ready")
            stop.set()
            await asyncio.wait_for(task, 10)
        return logs

    events = [e["event"] for e in asyncio.run(scenario())]
    assert events.index("[migrate] done") < events.index("[app] ready")
    store = LmdbIdentityStore(data / "openid-map.db")
    try:
        with store.read() as view:
            assert view.get_meta(MARKER) is not None
            assert view.vuin_of(key_of("009FE6955B23D37E6BA5AA56E6A51F57")) == 164
    finally:
        store.close()
    assert (data / "idmap.db").read_bytes() == (FIXTURES / "small-counter.db").read_bytes()


def test_cli_migrate_json_and_refusal(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gensokyo_idmap.cli import main

    shutil.copyfile(FIXTURES / "small-counter.db", tmp_path / "idmap.db")
    runner = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None})
    head = ["--data-dir", str(tmp_path), "--app-id", APP, "--json"]
    result = runner.invoke(main, [*head, "migrate"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "migrated" and data["written"]["identity_to_vuin"] == 224
    again = runner.invoke(main, [*head, "migrate"], catch_exceptions=False)
    assert json.loads(again.stdout)["status"] == "already_migrated"
    broken = tmp_path / "other"
    broken.mkdir()
    shutil.copyfile(FIXTURES / "truncated.db", broken / "idmap.db")
    failed = runner.invoke(main, ["--data-dir", str(broken), "--app-id", APP, "migrate"],
                           catch_exceptions=False)
    assert failed.exit_code == 1
    # stderr is no terminal here: the log's progress lines come first, the error last
    assert failed.stderr.splitlines()[-1].startswith("error: ")


# --- one fused pass vs two passes --------------------------------------------------------


def _rebuilt_fixture(tmp_path: Path, name: str, extra_ids: dict[bytes, bytes]) -> Path:
    """small-counter.db's content rewritten by the test bbolt writer, without its non-UTF-8
    ids key (which makes the converter take two passes) plus ``extra_ids``."""
    from migrate.bbolt import BoltFile

    from .test_bbolt import Builder

    content: dict[bytes, Any] = {}
    with BoltFile(FIXTURES / "small-counter.db") as bolt:
        for bucket in bolt.bucket_names():
            content[bucket] = dict(bolt.items((bucket,)))
    ids = content[b"ids"]
    for key in [k for k in ids if not _utf8(k)]:
        del ids[key]
    ids.update(extra_ids)
    target = tmp_path / name
    target.write_bytes(bytes(Builder(page_size=4096, per_leaf=40, fanout=16).build(content)))
    return target


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _content(store: LmdbIdentityStore) -> tuple[Any, ...]:
    with store.read() as view:
        return (sorted(view.iter_identities()), sorted(view.iter_vuin_sets()),
                sorted(view.iter_aliases()), view.vuin_counter(),
                sorted(view.iter_config()), sorted(view.iter_user_info()))


def test_one_pass_and_two_passes_give_the_same_store(tmp_path: Path) -> None:
    # ids ending in row- keys: the converter fuses its forward and reverse passes
    fused = _rebuilt_fixture(tmp_path, "fused.db", {})
    # a trailing key after the row- keys forces the two-pass path (and is dropped)
    split = _rebuilt_fixture(tmp_path, "split.db", {b"\xfe\xfftail": b"\x00" * 8})
    results = []
    for legacy in (fused, split):
        root = tmp_path / legacy.stem
        root.mkdir()
        store = LmdbIdentityStore(root / "openid-map.db")
        try:
            report = migrate_legacy(legacy, store, None, APP)
            results.append((report, _content(store)))
        finally:
            store.close()
    (fused_report, fused_store), (split_report, split_store) = results
    assert fused_store == split_store
    assert sorted(e.key for e in split_report.dropped) == sorted(
        [e.key for e in fused_report.dropped] + ["0xfeff7461696c"])
    expected = manifest("small-counter")
    assert fused_store[0]  # not empty
    forward = dict(fused_store[0])
    for legacy_id, row in expected["ids"]["forward"].items():
        assert forward[key_of(legacy_id)] == row


def test_cli_migrate_without_a_legacy_file_says_so_and_creates_nothing(tmp_path: Path) -> None:
    """No idmap.db: the error says there is nothing to migrate (not that an idmap.db that
    is not there would not be merged into a store holding identities), and nothing is
    created; --json goes after the command as well."""
    from click.testing import CliRunner

    from gensokyo_idmap.cli import main

    runner = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None})
    data = tmp_path / "data"
    result = runner.invoke(main, ["--data-dir", str(data), "--app-id", APP, "migrate",
                                  "--dry-run"], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert result.stderr == ("error: legacy: no old idmap.db there, so nothing to migrate (put "
                             "the Go daemon's idmap.db there, or give --legacy PATH) "
                             f"(got '{data / 'idmap.db'}')\n")
    assert not data.exists()
    store = LmdbIdentityStore(data / "openid-map.db")  # a store holding identities
    try:
        asyncio.run(IdentityGraph(store).resolve([OpenId(APP, "A" * 32)]))
    finally:
        store.close()
    before = sorted(p.name for p in data.iterdir())
    for args in (["migrate", "--dry-run"], ["migrate"], ["migrate", "--legacy",
                                                         str(tmp_path / "old.db")]):
        result = runner.invoke(main, ["--data-dir", str(data), "--app-id", APP, *args],
                               catch_exceptions=False)
        assert result.exit_code == 2, (args, result.output)
        assert "nothing to migrate" in result.stderr and "merged" not in result.stderr
    assert result.stderr.startswith("error: --legacy: ")
    assert sorted(p.name for p in data.iterdir()) == before


def test_cli_dry_run_into_a_fresh_data_dir_creates_nothing(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gensokyo_idmap.cli import main

    shutil.copyfile(FIXTURES / "small-counter.db", tmp_path / "idmap.db")
    runner = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None})
    result = runner.invoke(main, ["--data-dir", str(tmp_path), "--app-id", APP, "migrate",
                                  "--dry-run", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "dry_run" and data["written"]["identity_to_vuin"] == 224
    assert [p.name for p in tmp_path.iterdir()] == ["idmap.db"]
