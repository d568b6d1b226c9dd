"""The ``gensokyo-idmap identity …`` commands on a real openid-map.db under tmp_path.

click 8.2+ keeps stderr apart in CliRunner results (``result.stdout`` / ``result.stderr``);
the installed click is 8.5. ``main`` configures structlog for stderr, so every test resets
structlog afterwards: a logger must not keep a CliRunner stream that is closed.
"""

from __future__ import annotations

import json
import subprocess
import time
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest
import structlog
from click.testing import CliRunner, Result

from gensokyo_idmap.cli import main
from gensokyo_idmap.identity import OpenId, RUin
from gensokyo_idmap.store.base import TableCounts
from gensokyo_idmap.store.lmdb.identity import SCHEMA_VERSION, LmdbIdentityStore

APP = "102"
OPENID_A = "9F3A0C55E1B24D7A8C6E0F1D2B3A4C5D"
OPENID_B = "0A1B2C3D4E5F60718293A4B5C6D7E8F9"
QQ = "2870338968"
QQ_B32 = "GI4DOMBTGM4DSNRY"
SCRIPT = Path(sys.executable).parent / "gensokyo-idmap"

Cli = Callable[..., Result]


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def cli(data_dir: Path) -> Cli:
    runner = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None})

    def run(*args: str, app_id: str | None = APP, as_json: bool = False) -> Result:
        head = ["--data-dir", str(data_dir)]
        if app_id is not None:
            head += ["--app-id", app_id]
        if as_json:
            head.append("--json")
        return runner.invoke(main, [*head, *args], catch_exceptions=False)

    return run


def db_file(data_dir: Path) -> Path:
    return data_dir / "openid-map.db"


def counts(data_dir: Path) -> TableCounts:
    with LmdbIdentityStore(db_file(data_dir)) as store, store.read() as view:
        return view.counts()


def vuin_of(data_dir: Path, key: str) -> int | None:
    with LmdbIdentityStore(db_file(data_dir)) as store, store.read() as view:
        return view.vuin_of(key)


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert result.stderr == ""
    return result.stdout


# --------------------------------------------------------------------------- resolve


def test_resolve_new_then_same(cli: Cli, data_dir: Path) -> None:
    assert ok(cli("identity", "resolve", OPENID_A)) == "1 (new)\n"
    assert ok(cli("identity", "resolve", OPENID_A)) == "1\n"
    assert ok(cli("identity", "resolve", OPENID_B)) == "2 (new)\n"
    assert ok(cli("identity", "resolve", OPENID_A)) == "1\n"
    assert vuin_of(data_dir, f"openid:QQ:{APP}:{OPENID_A}") == 1
    assert vuin_of(data_dir, f"openid:QQ:{APP}:{OPENID_B}") == 2


def test_resolve_json(cli: Cli) -> None:
    new = json.loads(ok(cli("identity", "resolve", OPENID_A, as_json=True)))
    assert new == {"vuin": 1, "created": True, "added": [f"openid:QQ:{APP}:{OPENID_A}"],
                   "conflicts": []}
    again = json.loads(ok(cli("identity", "resolve", OPENID_A, as_json=True)))
    assert again == {"vuin": 1, "created": False, "added": [], "conflicts": []}


def test_resolve_several_keys_together(cli: Cli, data_dir: Path) -> None:
    out = json.loads(ok(cli("identity", "resolve", OPENID_A, f"rUIN-QQ-0-{QQ}",
                            "union:QQ:U1", as_json=True)))
    assert out["vuin"] == 1
    assert out["created"] is True
    assert out["added"] == [f"openid:QQ:{APP}:{OPENID_A}", f"ruin:QQ:0:{QQ}", "union:QQ:U1"]
    assert vuin_of(data_dir, RUin("QQ", 0, QQ).key) == 1
    # the Base32 rUIN text names the same rUIN
    assert ok(cli("identity", "resolve", f"rUIN-QQ-0-{QQ_B32}")) == "1\n"


def test_resolve_reports_conflicts(cli: Cli) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    ok(cli("identity", "resolve", OPENID_B))
    out = ok(cli("identity", "resolve", OPENID_A, OPENID_B))
    assert out == f"1\nconflict: openid:QQ:{APP}:{OPENID_B} stays on 2\n"
    data = json.loads(ok(cli("identity", "resolve", OPENID_A, OPENID_B, as_json=True)))
    assert data["conflicts"] == [{"key": f"openid:QQ:{APP}:{OPENID_B}", "vuin": 2}]


def test_resolve_with_scene_records_last_seen(cli: Cli) -> None:
    ok(cli("identity", "resolve", OPENID_A, "--scene", "QQ:102:group:G1"))
    shown = json.loads(ok(cli("identity", "show", "1", as_json=True)))
    assert list(shown["last_seen"]) == ["QQ:102:group:G1"]
    assert shown["last_seen"]["QQ:102:group:G1"]["identity"] == f"openid:QQ:{APP}:{OPENID_A}"


# --------------------------------------------------------------------------- lookup


def test_lookup_found_and_not_found(cli: Cli) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    assert ok(cli("identity", "lookup", OPENID_A)) == "1\n"
    assert ok(cli("identity", "lookup", f"openid:QQ:{APP}:{OPENID_A}", app_id=None)) == "1\n"
    missing = cli("identity", "lookup", OPENID_B)
    assert missing.exit_code == 1
    assert missing.stdout == f"openid:QQ:{APP}:{OPENID_B}: not found\n"


def test_lookup_json(cli: Cli) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    found = json.loads(ok(cli("identity", "lookup", OPENID_A, as_json=True)))
    assert found == {"key": f"openid:QQ:{APP}:{OPENID_A}", "vuin": 1}
    missing = cli("identity", "lookup", OPENID_B, as_json=True)
    assert missing.exit_code == 1
    assert json.loads(missing.stdout) == {"key": f"openid:QQ:{APP}:{OPENID_B}", "vuin": None}


def test_lookup_does_not_write(cli: Cli, data_dir: Path) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    before = counts(data_dir)
    assert cli("identity", "lookup", OPENID_B).exit_code == 1
    assert counts(data_dir) == before
    assert vuin_of(data_dir, f"openid:QQ:{APP}:{OPENID_B}") is None


# --------------------------------------------------------------------------- show


def test_show_identities(cli: Cli) -> None:
    ok(cli("identity", "resolve", OPENID_A, OPENID_B))
    assert ok(cli("identity", "show", "1")) == (
        "vUIN 1\n"
        f"  identity  openid:QQ:{APP}:{OPENID_B}\n"
        f"  identity  openid:QQ:{APP}:{OPENID_A}\n"
    )


def test_show_json(cli: Cli) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    data = json.loads(ok(cli("identity", "show", "1", as_json=True)))
    assert data == {"vuin": 1, "requested": 1, "identities": [f"openid:QQ:{APP}:{OPENID_A}"],
                    "last_seen": {}, "aliases": []}


def test_show_aliases_after_rebind(cli: Cli) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    ok(cli("identity", "resolve", OPENID_B))
    ok(cli("identity", "rebind", "2", "1"))
    assert ok(cli("identity", "show", "1")) == (
        "vUIN 1\n"
        f"  identity  openid:QQ:{APP}:{OPENID_B}\n"
        f"  identity  openid:QQ:{APP}:{OPENID_A}\n"
        "  alias     2\n"
    )
    assert ok(cli("identity", "show", "2")).splitlines()[0] == "vUIN 1 (alias 2 resolves here)"
    data = json.loads(ok(cli("identity", "show", "2", as_json=True)))
    assert data["requested"] == 2
    assert data["vuin"] == 1
    assert data["aliases"] == [2]
    assert sorted(data["identities"]) == sorted([f"openid:QQ:{APP}:{OPENID_A}",
                                                 f"openid:QQ:{APP}:{OPENID_B}"])


def test_show_unknown_exits_1(cli: Cli) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    result = cli("identity", "show", "99")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == "error: vUIN 99 is not known\n"


# --------------------------------------------------------------------------- bind / rebind


def test_bind_new_then_skipped(cli: Cli, data_dir: Path) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    out = ok(cli("identity", "bind", f"rUIN-QQ-0-{QQ}", "1"))
    assert out == f"moved: ruin:QQ:0:{QQ} (rUIN-QQ-0-{QQ_B32}) → 1 (new identity)\n"
    assert vuin_of(data_dir, f"ruin:QQ:0:{QQ}") == 1
    again = json.loads(ok(cli("identity", "bind", f"rUIN-QQ-0-{QQ_B32}", "1", as_json=True)))
    assert again["outcome"] == "skipped"
    assert again["vuin"] == 1
    assert again["previous"] == 1


def test_bind_moves_and_aliases(cli: Cli, data_dir: Path) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    ok(cli("identity", "resolve", OPENID_B))
    data = json.loads(ok(cli("identity", "bind", OPENID_B, "1", as_json=True)))
    assert data == {"outcome": "moved", "key": f"openid:QQ:{APP}:{OPENID_B}", "vuin": 1,
                    "previous": 2, "reason": "moved from 2", "aliased": 2}
    assert vuin_of(data_dir, f"openid:QQ:{APP}:{OPENID_B}") == 1
    assert json.loads(ok(cli("identity", "show", "1", as_json=True)))["aliases"] == [2]


def test_rebind_moves_the_set(cli: Cli, data_dir: Path) -> None:
    ok(cli("identity", "resolve", OPENID_A, "union:QQ:U1"))
    ok(cli("identity", "resolve", OPENID_B))
    assert ok(cli("identity", "rebind", "1", "2")) == "moved: 1 → 2 (2 identities moved)\n"
    assert vuin_of(data_dir, f"openid:QQ:{APP}:{OPENID_A}") == 2
    assert vuin_of(data_dir, "union:QQ:U1") == 2
    assert ok(cli("identity", "lookup", OPENID_A)) == "2\n"
    again = json.loads(ok(cli("identity", "rebind", "1", "2", as_json=True)))
    assert again["outcome"] == "skipped"
    assert again["moved"] == []


def test_rebind_json(cli: Cli) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    data = json.loads(ok(cli("identity", "rebind", "1", "500", as_json=True)))
    assert data == {"outcome": "moved", "old": 1, "new": 500,
                    "moved": [f"openid:QQ:{APP}:{OPENID_A}"], "reason": "1 identities moved"}
    assert ok(cli("identity", "resolve", OPENID_A)) == "500\n"


def test_rebind_unknown_old_exits_1(cli: Cli, data_dir: Path) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    before = counts(data_dir)
    result = cli("identity", "rebind", "7", "1")
    assert result.exit_code == 1
    assert "error: vUIN 7 has no identities to move" in result.stderr
    assert counts(data_dir) == before


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("identity", "bind", "bad key", "5"), "KEY: OpenID holds whitespace"),
        (("identity", "bind", OPENID_A, "0"), "VUIN: vUIN must be between 1"),
        (("identity", "bind", OPENID_A, "x"), "VUIN: vUIN must be a positive decimal integer"),
        (("identity", "bind", "123", "1"), "KEY: digits name a vUIN"),
        (("identity", "show", "abc"), "VUIN: vUIN must be a positive decimal integer"),
        (("identity", "show", "1.5"), "VUIN: vUIN must be a positive decimal integer"),
        (("identity", "rebind", "0", "5"), "OLD: vUIN must be between 1"),
        (("identity", "rebind", "1", "abc"), "NEW: vUIN must be a positive decimal integer"),
        (("identity", "resolve", "123"), "KEY: digits name a vUIN"),
        (("identity", "resolve", OPENID_B, "123"), "KEY: digits name a vUIN"),
        (("identity", "resolve", "openid:QQ:x:Y"), "KEY: AppID must be 1 to 20 digits"),
        (("identity", "resolve", "rUIN-QQ-x-1"), "KEY: rUIN index"),
        (("identity", "lookup", "bad key"), "KEY: OpenID holds whitespace"),
        (("identity", "resolve", OPENID_B, "--scene", ""), "scene: scene must be 1 to 400"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(cli: Cli, data_dir: Path,
                                              args: tuple[str, ...], reason: str) -> None:
    ok(cli("identity", "resolve", OPENID_A, "--scene", "QQ:102:c2c"))
    before_counts = counts(data_dir)
    before_bytes = db_file(data_dir).read_bytes()
    result = cli(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert reason in result.stderr
    assert db_file(data_dir).read_bytes() == before_bytes
    assert counts(data_dir) == before_counts


@pytest.mark.parametrize(
    "args",
    [("identity", "bind", "bad key", "5"), ("identity", "show", "abc"),
     ("identity", "rebind", "0", "5"), ("identity", "resolve", "123")],
)
def test_bad_input_on_fresh_dir_creates_no_store(cli: Cli, data_dir: Path,
                                                 args: tuple[str, ...]) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert not db_file(data_dir).exists()


def test_bare_openid_needs_app_id(cli: Cli, data_dir: Path) -> None:
    for args in (("identity", "resolve", OPENID_A), ("identity", "lookup", OPENID_A),
                 ("identity", "bind", OPENID_A, "1")):
        result = cli(*args, app_id=None)
        assert result.exit_code == 2
        assert result.stdout == ""
        assert result.stderr == (f"error: KEY: a bare OpenID needs a serving AppID (--app-id) "
                                 f"(got '{OPENID_A}')\n")
    assert not db_file(data_dir).exists()
    # a typed key needs no AppID
    assert ok(cli("identity", "resolve", f"openid:QQ:{APP}:{OPENID_A}", app_id=None)) \
        == "1 (new)\n"


def test_app_id_from_environment(data_dir: Path) -> None:
    runner = CliRunner(env={"GSK_BOT__APP_ID": "555", "GSK_IDMAP__DATA_DIR": str(data_dir)})
    result = runner.invoke(main, ["identity", "resolve", OPENID_A], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "1 (new)\n"
    assert vuin_of(data_dir, OpenId("555", OPENID_A).key) == 1


def test_missing_argument_is_a_usage_error(cli: Cli) -> None:
    result = cli("identity", "bind", OPENID_A)
    assert result.exit_code == 2
    assert "Missing argument 'VUIN'" in result.stderr


# --------------------------------------------------------------------------- console script


def test_console_script_runs(cli: Cli, data_dir: Path) -> None:
    assert SCRIPT.exists(), SCRIPT
    done = subprocess.run(
        [str(SCRIPT), "--data-dir", str(data_dir), "--app-id", APP, "identity", "resolve",
         OPENID_A],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "1 (new)\n", "")
    # the same store, read back in-process
    assert ok(cli("identity", "lookup", OPENID_A)) == "1\n"


# --------------------------------------------------------------------------- msgid


def test_msgid_store_lookup_and_repeat(cli: Cli) -> None:
    first = ok(cli("msgid", "store", "ROBOT1.0_abc", "--chat-kind", "group", "--target", "G1"))
    again = ok(cli("msgid", "store", "ROBOT1.0_abc"))
    other = ok(cli("msgid", "store", "ROBOT1.0_def"))
    assert (first.strip(), again.strip(), other.strip()) == ("1", "1", "2")
    assert ok(cli("msgid", "lookup", "1")).strip() == "ROBOT1.0_abc"
    data = json.loads(ok(cli("msgid", "lookup", "1", as_json=True)))
    assert (data["real_id"], data["chat_kind"], data["target"], data["app_id"]) == (
        "ROBOT1.0_abc", "group", "G1", APP)


def test_msgid_lookup_unknown_exits_1(cli: Cli) -> None:
    ok(cli("msgid", "store", "ROBOT1.0_abc"))
    result = cli("msgid", "lookup", "42")
    assert result.exit_code == 1
    assert "unknown or expired" in result.stdout


@pytest.mark.parametrize("bad", ["0", "abc", "2147483648", "-3"])
def test_msgid_lookup_bad_id_exits_2(cli: Cli, bad: str) -> None:
    result = cli("msgid", "lookup", "--", bad) if bad.startswith("-") else cli("msgid", "lookup", bad)
    assert result.exit_code == 2
    assert "VIRTUAL_ID" in result.stderr


def test_msgid_sweep_and_stats(cli: Cli, data_dir: Path) -> None:
    ok(cli("msgid", "--ttl-seconds", "0.001", "store", "short-lived"))
    ok(cli("msgid", "store", "long-lived"))
    time.sleep(0.01)  # the CLI runs on the real clock; 1 ms TTL is long past after 10 ms
    assert ok(cli("msgid", "sweep")).strip() == "swept 1"
    stats = json.loads(ok(cli("msgid", "stats", as_json=True)))
    assert stats == {"entries": 1, "counter": 2}
    assert not (data_dir / "openid-map.db").exists()  # msgid commands never touch identities


def test_msgid_store_bad_input_exits_2(cli: Cli) -> None:
    result = cli("msgid", "store", "x" * 401)
    assert result.exit_code == 2
    assert "message_id" in result.stderr


# --------------------------------------------------------------------------- stats


def test_stats_counts_tables_and_files(cli: Cli, data_dir: Path) -> None:
    ok(cli("identity", "resolve", "9F3A", "rUIN-QQ-0-2870338968", "--scene", "QQ:1:c2c"))
    ok(cli("identity", "resolve", "ABCD"))
    ok(cli("identity", "rebind", "2", "77"))
    ok(cli("msgid", "store", "ROBOT1.0_x"))
    data = json.loads(ok(cli("stats", as_json=True)))
    o = data["openid_map"]
    assert (o["identities"], o["vuins"], o["last_seen"], o["aliases"]) == (3, 2, 1, 1)
    assert o["schema_version"] == SCHEMA_VERSION and o["vuin_counter"] == 2
    assert o["migrated_from_legacy"] is None
    assert o["bytes"] == (data_dir / "openid-map.db").stat().st_size
    assert data["msgid_map"]["entries"] == 1 and data["msgid_map"]["counter"] == 1
    assert 0 < data["msgid_map"]["bytes_on_disk"] <= data["msgid_map"]["bytes"]
    assert data["outbox"]["owed"] == {}  # no outbox.db yet: nothing owed, nothing created
    assert not (data_dir / "outbox.db").exists()
    human = ok(cli("stats"))
    assert "identities   3" in human and "migrated     no" in human
    assert "nothing owed" in human


def test_stats_shows_what_frameworks_are_still_owed(cli: Cli, data_dir: Path) -> None:
    import asyncio

    from gensokyo_idmap.bridge.outbox import Outbox
    from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore

    ok(cli("identity", "resolve", "9F3A"))

    async def keep() -> None:
        with LmdbOutboxStore(data_dir / "outbox.db") as store:
            outbox = Outbox(store)
            await outbox.keep([("reverse_ws ws://a/", outbox.allocate(), {"n": 1}, None),
                               ("reverse_ws ws://a/", outbox.allocate(), {"n": 2}, None),
                               ("http_post http://b/", outbox.allocate(), {"n": 3}, None),
                               ("reverse_ws ws://u:pw-Zq9@c/", outbox.allocate(), {"n": 4},
                                None)])

    asyncio.run(keep())
    data = json.loads(ok(cli("stats", as_json=True)))
    assert data["outbox"]["owed"] == {"reverse_ws ws://a/": 2, "http_post http://b/": 1,
                                      "reverse_ws ws://***@c/": 1}  # named without password
    human = ok(cli("stats"))
    assert "2 owed to reverse_ws ws://a/" in human and "pw-Zq9" not in human


# --------------------------------------------------------------------------- read-only commands

#: ``verify`` too is read-only: tests/ops/test_verify.py::test_cli_verify_without_a_store.
READ_ONLY = [("stats",), ("identity", "lookup", "raw:x"), ("identity", "show", "1"),
             ("msgid", "lookup", "1"), ("msgid", "stats")]


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_read_only_commands_on_a_missing_data_dir_create_nothing(
        cli: Cli, tmp_path: Path, data_dir: Path, args: tuple[str, ...]) -> None:
    result = cli(*args)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: no ") and str(data_dir) in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_read_only_commands_without_their_store_create_nothing(
        cli: Cli, data_dir: Path, args: tuple[str, ...]) -> None:
    data_dir.mkdir()
    result = cli(*args)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: no store at ") and str(data_dir) in result.stderr
    assert list(data_dir.iterdir()) == []


def test_read_only_commands_leave_the_stores_as_they_are(cli: Cli, data_dir: Path) -> None:
    """stats on a data dir that has no msgid-map.db yet says so instead of creating one, and
    no read-only command changes a store file."""
    ok(cli("identity", "resolve", OPENID_A))
    data = json.loads(ok(cli("stats", as_json=True)))
    assert data["msgid_map"] == {"path": str(data_dir / "msgid-map.db"), "exists": False}
    assert "msgid-map.db   none yet" in ok(cli("stats"))
    assert sorted(p.name for p in data_dir.iterdir()) == ["openid-map.db", "openid-map.db-lock",
                                                          "stores.json"]
    ok(cli("msgid", "store", "ROBOT1.0_abc"))
    before = {p.name: p.read_bytes() for p in data_dir.glob("*.db")}
    for args in READ_ONLY:
        assert cli(*args).exit_code in (0, 1), args  # raw:x and vUIN 1's id are unknown
    assert {p.name: p.read_bytes() for p in data_dir.glob("*.db")} == before


def test_msgid_read_commands_do_not_move_a_damaged_file_aside(cli: Cli, data_dir: Path) -> None:
    """Moving a damaged msgid-map.db aside is for the daemon and the writing commands; a
    read-only command reports it and leaves it where it is."""
    data_dir.mkdir()
    damaged = data_dir / "msgid-map.db"
    damaged.write_bytes(b"not an lmdb file" * 1024)
    for args in (("msgid", "stats"), ("msgid", "lookup", "1")):
        result = cli(*args)
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith(f"error: {damaged} is not a whole LMDB file: "), \
            result.stderr
    assert [p.name for p in data_dir.iterdir() if "corrupt" in p.name] == []
    assert damaged.read_bytes() == b"not an lmdb file" * 1024


# --------------------------------------------------------------------------- --json


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], click.Command]]:
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


def test_every_command_with_json_output_takes_json_after_it_too() -> None:
    missing = [" ".join(path) for path, command in _commands(main)
               if path not in {("serve",), ("demo",)}
               and not any("--json" in param.opts for param in command.params)]
    assert missing == []


def test_json_after_the_subcommand_is_json_before_it(cli: Cli, data_dir: Path) -> None:
    ok(cli("identity", "resolve", OPENID_A))
    ok(cli("msgid", "store", "ROBOT1.0_abc"))
    for args in (("identity", "show", "1"), ("identity", "lookup", OPENID_A), ("stats",),
                 ("msgid", "lookup", "1"), ("verify",)):
        before = ok(cli(*args, as_json=True))
        assert ok(cli(*args, "--json")) == before, args
        json.loads(before)
    resolved = json.loads(ok(cli("identity", "resolve", OPENID_B, "--json")))
    assert resolved["vuin"] == 2 and resolved["created"] is True
