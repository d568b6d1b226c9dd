"""What a running daemon imports follows its configuration (issue 36.2): a default ``serve``
(examples/config.yml) loads none of the optional packages it has no use for, and each one
loads when the part that needs it is configured or first used: Jinja2 at the console's
first page, prometheus-client at the first scrape of ``/metrics``, PyNaCl's signing
(libsodium) with a webhook that has its bot's secret, a backend's client when the config
names that backend. Our own code follows the same rule: the console's pages load at its
first request, the CLI's other commands when a command line names them; and pydantic's
plugin lookup is skipped unless the operator's environment says otherwise.

The daemon runs as it ships (its console script, its own process), with CPython's own
import profiler on in its environment (``PYTHONPROFILEIMPORTTIME``: ``-X importtime``):
each module it imports is a line on its stderr, its log file. Nothing in the daemon knows
about the test.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from gensokyo_idmap.runtime.redis.connection import RedisRuntime
from gensokyo_idmap.cli.root import ON_FIRST_USE
from gensokyo_idmap.testing import free_port, until
from gensokyo_idmap.testing.daemon import (
    NO_PLATFORM_TOKEN_URL,
    DaemonProcess,
    daemon_command,
    write_config,
)

from .conftest import REDIS_URL, run, test_prefix
from .store_backends import schema_dsn

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 30.0
#: What a default daemon has no use for, each as the module that shows it was loaded.
OPTIONAL = (
    "jinja2", "markupsafe",  # the console's templates: at its first page
    "prometheus_client",  # /metrics: at its first scrape
    "nacl.signing", "nacl.bindings",  # webhook signatures: the example has no secret
    "psycopg", "gensokyo_idmap.store.postgres",  # idmap.backend: lmdb
    "redis", "gensokyo_idmap.runtime.redis",  # idmap.runtime_backend: lmdb
    "migrate.legacy", "migrate.bbolt",  # no old idmap.db in the data dir
    # structlog's extras, when installed: never used (a halted import of the package is a
    # line too, so a module that only its real import brings stands for it)
    "rich.traceback", "pygments", "greenlet._greenlet",
    "cryptography", "hypothesis", "gensokyo_idmap.testing",  # the test kit's
)
#: The console's page code, loaded at its first request (api/console/mount.py).
CONSOLE_PAGES = (
    "gensokyo_idmap.api.console.pages", "gensokyo_idmap.api.console.browse_pages",
    "gensokyo_idmap.api.console.browse", "gensokyo_idmap.api.console.operate_pages",
    "gensokyo_idmap.api.console.chart", "gensokyo_idmap.api.console.translations",
    "gensokyo_idmap.api.console.error_text", "xml.sax.saxutils",
)
#: The modules of the CLI's commands other than ``serve`` and ``demo``.
OTHER_COMMANDS = tuple(sorted({target.partition(":")[0] for target in ON_FIRST_USE.values()}))
#: A pydantic plugin installed beside the daemon (its module: imported only by a lookup).
PROBE_PLUGIN = "gsk_probe_plugin"
_IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$", re.MULTILINE)


def imported(log: Path) -> set[str]:
    """The modules the daemon imported so far, from the import lines of its log."""
    return set(_IMPORT_LINE.findall(log.read_text(errors="replace")))


#: What the probe plugin's module writes when imported (pydantic imports it with
#: ``importlib``, which ``-X importtime`` does not show).
PROBE_LOADED = "gsk probe plugin imported"


def example_config(tmp_path: Path) -> dict[str, Any]:
    """examples/config.yml as shipped, but for its data dir (the test's) and its listeners
    and the framework it dials (free ports on loopback, nothing listening at the latter)."""
    config: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "config.yml").read_text())
    config["idmap"]["data_dir"] = str(tmp_path / "data")
    config["webhook"]["listen"] = f"127.0.0.1:{free_port()}"
    config["api"]["listen"] = f"127.0.0.1:{free_port()}"
    config["onebot"]["forward_ws"] = f"127.0.0.1:{free_port()}"
    config["onebot"]["reverse_ws"] = [f"ws://127.0.0.1:{free_port()}/onebot/v11/ws"]
    return config


async def serving(config: dict[str, Any], tmp_path: Path) -> DaemonProcess:
    """``serve`` on ``config``, profiling its imports, once its ready line is logged."""
    daemon = DaemonProcess(write_config(tmp_path / "config.yml", config), tmp_path)
    await daemon.start()
    try:
        await until(lambda: "[app] ready" in daemon.log.read_text(errors="replace"), TIMEOUT,
                    lambda: f"the ready line; the log ends:\n{daemon.tail()}",
                    alive=daemon.alive)
    except BaseException:
        await daemon.close()
        raise
    return daemon


def log_of_serve(config: dict[str, Any], tmp_path: Path, settle: float = 0.0) -> str:
    """The log of ``serve`` on ``config`` by its ready line and ``settle`` seconds after;
    the daemon then stopped, cleanly."""
    async def scenario() -> str:
        daemon = await serving(config, tmp_path)
        try:
            await asyncio.sleep(settle)
            return daemon.log.read_text(errors="replace")
        finally:
            assert await daemon.close() == 0, daemon.tail()

    return run(scenario())


def imports_of_serve(config: dict[str, Any], tmp_path: Path, settle: float = 0.0) -> set[str]:
    """What ``serve`` on ``config`` imported by its ready line and ``settle`` seconds
    after."""
    return set(_IMPORT_LINE.findall(log_of_serve(config, tmp_path, settle)))


@pytest.fixture(autouse=True)
def _profile_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # read by the daemon's interpreter


def test_a_default_serve_loads_none_of_the_optional_packages(tmp_path: Path) -> None:
    loaded = imports_of_serve(example_config(tmp_path), tmp_path, settle=0.5)
    assert "gensokyo_idmap.app" in loaded  # the profile is there
    assert sorted(name for name in OPTIONAL if name in loaded) == []


def test_a_default_serve_loads_neither_the_console_pages_nor_the_other_commands(
        tmp_path: Path) -> None:
    loaded = imports_of_serve(example_config(tmp_path), tmp_path, settle=0.5)
    assert "gensokyo_idmap.api.console.mount" in loaded  # the console is there
    assert "gensokyo_idmap.cli.daemon" in loaded
    assert sorted(name for name in (*CONSOLE_PAGES, *OTHER_COMMANDS) if name in loaded) == []


def test_the_console_and_metrics_load_their_libraries_at_first_use(tmp_path: Path) -> None:
    """Jinja2 and the console's pages load with the first console page, prometheus-client
    with the first scrape, and neither with the other."""
    config = example_config(tmp_path)
    api = f"http://{config['api']['listen']}"

    async def scenario() -> list[set[str]]:
        daemon = await serving(config, tmp_path)
        seen = [imported(daemon.log)]
        try:
            async with aiohttp.ClientSession() as http:
                for path in ("/ui/login", "/metrics"):
                    async with http.get(f"{api}{path}") as resp:
                        assert resp.status == 200, await resp.text()
                    seen.append(imported(daemon.log))
        finally:
            assert await daemon.close() == 0, daemon.tail()
        return seen

    at_start, after_page, after_scrape = run(scenario())
    assert {"jinja2", "prometheus_client", *CONSOLE_PAGES} & at_start == set()
    assert "jinja2" in after_page and "prometheus_client" not in after_page
    assert set(CONSOLE_PAGES) <= after_page
    assert "prometheus_client" in after_scrape


@pytest.mark.parametrize(("secret", "webhook"), [("s3cret", True), ("s3cret", False),
                                                 ("", True)])
def test_the_signing_library_loads_with_a_webhook_that_has_its_secret(
        tmp_path: Path, secret: str, webhook: bool) -> None:
    config = example_config(tmp_path)
    config["bot"]["secret"] = secret
    config["qq"]["token_url"] = NO_PLATFORM_TOKEN_URL  # a secret: a token is asked for
    if not webhook:
        config["webhook"]["listen"] = ""

    loaded = imports_of_serve(config, tmp_path)
    assert ("nacl.signing" in loaded) is bool(secret and webhook), \
        sorted(name for name in loaded if name.startswith("nacl"))


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_a_backend_client_loads_when_the_config_names_the_backend(
        tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    config = example_config(tmp_path)
    if backend == "postgres":
        schema = request.getfixturevalue("pg_schema")
        config["idmap"].update(backend="postgres", postgres_dsn=schema_dsn(schema))
        expected = "psycopg"
    else:
        prefix = test_prefix()
        config["idmap"].update(runtime_backend="redis", redis_url=REDIS_URL,
                               redis_prefix=prefix)
        runtime = RedisRuntime(REDIS_URL, prefix)
        request.addfinalizer(runtime.sync.close)
        request.addfinalizer(runtime.delete_all)  # the daemon's keys, and only those
        expected = "redis"

    loaded = imports_of_serve(config, tmp_path)
    assert expected in loaded
    assert sorted(name for name in ("jinja2", "prometheus_client") if name in loaded) == []


def imports_of_command(args: list[str], tmp_path: Path) -> set[str]:
    """What the console script imports for ``args`` (a command that ends at once)."""
    command = daemon_command(tmp_path / "unused.yml")[:-3]  # the script, no serve --config
    done = subprocess.run([*command, *args], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return set(_IMPORT_LINE.findall(done.stderr))


def test_a_command_loads_its_own_module_and_the_help_loads_them_all(tmp_path: Path) -> None:
    """``identity --help`` imports the identity commands and no other command's module;
    the root's help lists every command, so it imports them all."""
    identity = imports_of_command(["identity", "--help"], tmp_path)
    assert "gensokyo_idmap.cli.identity" in identity
    assert sorted(name for name in OTHER_COMMANDS
                  if name in identity and name != "gensokyo_idmap.cli.identity") == []
    assert set(OTHER_COMMANDS) <= imports_of_command(["--help"], tmp_path)


@pytest.fixture
def probe_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pydantic plugin installed on the daemon's path (a distribution with a ``pydantic``
    entry point): its module is imported only when pydantic looks its plugins up."""
    site = tmp_path / "site"
    info = site / "gsk_probe_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gsk-probe-plugin\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(f"[pydantic]\nprobe = {PROBE_PLUGIN}:plugin\n")
    (site / f"{PROBE_PLUGIN}.py").write_text(
        f"import sys\nprint({PROBE_LOADED!r}, file=sys.stderr)\n\n"
        "class Plugin:\n"
        "    def new_schema_validator(self, *args, **kwargs):\n"
        "        return None, None, None\n\n"
        "plugin = Plugin()\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)


@pytest.mark.usefixtures("probe_plugin")
def test_serve_skips_pydantic_s_plugin_lookup(tmp_path: Path) -> None:
    assert PROBE_LOADED not in log_of_serve(example_config(tmp_path), tmp_path)


@pytest.mark.usefixtures("probe_plugin")
def test_an_operator_s_pydantic_plugin_setting_is_kept(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``PYDANTIC_DISABLE_PLUGINS`` naming another plugin: pydantic looks its plugins up,
    and loads this one."""
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "another")
    assert PROBE_LOADED in log_of_serve(example_config(tmp_path), tmp_path)
