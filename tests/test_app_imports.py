"""What a running daemon imports follows its configuration (issue 36.2): a default ``serve``
(examples/config.yml) loads none of the optional packages it has no use for, and each one
loads when the part that needs it is configured or first used: Jinja2 at the console's
first page, prometheus-client at the first scrape of ``/metrics``, PyNaCl's signing
(libsodium) with a webhook that has its bot's secret, a backend's client when the config
names that backend.

The daemon runs as it ships (its console script, its own process), with CPython's own
import profiler on in its environment (``PYTHONPROFILEIMPORTTIME``: ``-X importtime``):
each module it imports is a line on its stderr, its log file. Nothing in the daemon knows
about the test.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from gensokyo_idmap.runtime.redis.connection import RedisRuntime
from gensokyo_idmap.testing import free_port, until
from gensokyo_idmap.testing.daemon import NO_PLATFORM_TOKEN_URL, DaemonProcess, write_config

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
_IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$", re.MULTILINE)


def imported(log: Path) -> set[str]:
    """The modules the daemon imported so far, from the import lines of its log."""
    return set(_IMPORT_LINE.findall(log.read_text(errors="replace")))


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


def imports_of_serve(config: dict[str, Any], tmp_path: Path, settle: float = 0.0) -> set[str]:
    """What ``serve`` on ``config`` imported by its ready line and ``settle`` seconds
    after; the daemon then stopped, cleanly."""
    async def scenario() -> set[str]:
        daemon = await serving(config, tmp_path)
        try:
            await asyncio.sleep(settle)
            return imported(daemon.log)
        finally:
            assert await daemon.close() == 0, daemon.tail()

    return run(scenario())


@pytest.fixture(autouse=True)
def _profile_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # read by the daemon's interpreter


def test_a_default_serve_loads_none_of_the_optional_packages(tmp_path: Path) -> None:
    loaded = imports_of_serve(example_config(tmp_path), tmp_path, settle=0.5)
    assert "gensokyo_idmap.app" in loaded  # the profile is there
    assert sorted(name for name in OPTIONAL if name in loaded) == []


def test_the_console_and_metrics_load_their_libraries_at_first_use(tmp_path: Path) -> None:
    """Jinja2 loads with the first console page, prometheus-client with the first scrape,
    and neither with the other."""
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
    assert {"jinja2", "prometheus_client"} & at_start == set()
    assert "jinja2" in after_page and "prometheus_client" not in after_page
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
