"""examples/gensokyo-idmap.service: accepted by systemd, fitting the daemon, and its
``MemoryDenyWriteExecute`` rule lived with by a real daemon.

``systemd-analyze verify`` works offline on a unit file (no running systemd needed) but
refuses a unit whose ExecStart binary is missing: the test verifies a copy whose ExecStart
names this environment's own ``gensokyo-idmap`` (the rest of the file as written). It prints
a bad key or value as a warning and still exits 0, so any output fails the test too.

``MemoryDenyWriteExecute=yes`` refuses mappings both writable and executable (and making
memory executable later): a library that needs one (a JIT, a libffi closure) would kill the
daemon at the first event. Linux ≥ 6.3 has the same rule per process (``prctl(PR_SET_MDWE,
PR_MDWE_REFUSE_EXEC_GAIN)``, which systemd ≥ 256 uses for this setting itself); the daemon
runs under it with every native part it has loaded: LMDB, PyNaCl's signature check (cffi),
psycopg on PostgreSQL, redis-py, aiohttp's client and server, the gateway and the webhook.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import ClientSession

from gensokyo_idmap.app import SHUTDOWN_SECONDS
from gensokyo_idmap.config import load_config
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.testing import (
    APP,
    SECRET,
    EmulatedPlatform,
    WebhookSender,
    daemon_command,
    daemon_config,
    framework_server,
    free_port,
    until,
    until_listening,
    write_config,
    ws_url,
)
from gensokyo_idmap.testing import group_message as gateway_message

from ..redis_server import PrivateRedis
from ..store_backends import fresh_schema, schema_dsn
from .test_inbound import QueueFramework, group_message

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "examples" / "gensokyo-idmap.service"
EXAMPLE_CONFIG = ROOT / "examples" / "config.yml"
INSTALLED = "/opt/gensokyo-idmap/bin/gensokyo-idmap"  # where docs/operations.md installs it
SCRIPT = Path(sys.executable).with_name("gensokyo-idmap")
TEST_SECONDS = 90.0

#: prctl(2): PR_SET_MDWE and its flag (linux/prctl.h)
PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1
#: Run in the child before the daemon: the rule on, checked (a writable and executable map
#: is refused), then the daemon's own command line exec'd; it keeps the rule.
LAUNCHER = f"""
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl({PR_SET_MDWE}, {PR_MDWE_REFUSE_EXEC_GAIN}, 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_MDWE) failed: errno %d" % ctypes.get_errno())
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
except PermissionError:
    pass
else:
    sys.exit("a writable and executable mapping was allowed: the rule is not on")
os.execv(sys.argv[1], sys.argv[1:])
"""


def service() -> dict[str, list[str]]:
    """The unit's [Service] settings, each key with all its values in order (a key may
    be given more than once)."""
    settings: dict[str, list[str]] = {}
    section = ""
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]":
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    assert SCRIPT.exists(), SCRIPT
    text = UNIT.read_text(encoding="utf-8")
    assert f"ExecStart={INSTALLED} serve " in text
    unit = tmp_path / UNIT.name  # the unit's name is its file's
    unit.write_text(text.replace(f"ExecStart={INSTALLED} ", f"ExecStart={SCRIPT} "),
                    encoding="utf-8")
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), (
        done.returncode, done.stdout, done.stderr)


def test_the_units_settings_fit_the_daemon() -> None:
    settings = service()
    state = settings["StateDirectory"][0]
    data_dir = f"/var/lib/{state}"
    environment = dict(line.split("=", 1) for line in settings["Environment"])
    # the data dir is the state dir, whatever the config file says
    config = load_config(EXAMPLE_CONFIG, environment)
    assert str(config.idmap.data_dir) == data_dir
    assert settings["WorkingDirectory"] == [data_dir]
    assert settings["ExecStart"][0].split()[:2] == [INSTALLED, "serve"]
    assert settings["KillSignal"] == ["SIGTERM"] and settings["Restart"] == ["on-failure"]
    # a stop finishes within the listeners' grace (at most four of them, one after the
    # other, each SHUTDOWN_SECONDS) before systemd kills
    assert int(settings["TimeoutStopSec"][0]) >= 4 * SHUTDOWN_SECONDS + 5
    # a config the daemon refuses exits with BadInputError's code: no restart loop
    assert settings["RestartPreventExitStatus"] == [str(BadInputError.exit_code)]
    assert settings["LimitNOFILE"] == ["65536"]  # what docs/security.md tells operators
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices",
                "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
                "MemoryDenyWriteExecute"):
        assert settings[key] == ["yes"], key
    assert settings["ProtectSystem"] == ["strict"]
    assert settings["RestrictAddressFamilies"] == ["AF_INET AF_INET6 AF_UNIX"]


def _mdwe_available() -> bool:
    probe = subprocess.run([sys.executable, "-c", LAUNCHER, sys.executable, "-c", "pass"],
                           capture_output=True, timeout=30, check=False)
    return probe.returncode == 0


def test_the_rule_stops_code_that_needs_writable_executable_memory() -> None:
    """What the daemon test below would catch: a cffi callback made at run time (libffi's
    writable, executable trampoline) fails under the rule, and runs without it."""
    if not _mdwe_available():
        pytest.skip("this kernel has no prctl(PR_SET_MDWE) (Linux 6.3 and later)")
    code = ("import cffi; ffi = cffi.FFI(); "
            "print(ffi.callback('int(void)', lambda: 7)())")
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=30, check=False)
    assert plain.returncode == 0 and plain.stdout.strip() == "7", plain.stderr
    ruled = subprocess.run([sys.executable, "-c", LAUNCHER, sys.executable, "-c", code],
                           capture_output=True, text=True, timeout=30, check=False)
    assert ruled.returncode != 0 and "write+execute memory" in ruled.stderr, ruled


def test_the_daemon_runs_without_writable_executable_memory(tmp_path: Path) -> None:
    if not _mdwe_available():
        pytest.skip("this kernel has no prctl(PR_SET_MDWE) (Linux 6.3 and later)")
    webhook, api = free_port(), free_port()
    redis = PrivateRedis(tmp_path)
    redis.start()
    framework = QueueFramework()

    async def scenario(dsn: str) -> None:
        server = await framework_server(framework.handle)
        async with EmulatedPlatform() as platform, ClientSession() as session:
            config = write_config(tmp_path / "config.yml", daemon_config(
                tmp_path / "data", platform=platform, webhook=f"127.0.0.1:{webhook}",
                api=f"127.0.0.1:{api}", onebot={"reverse_ws": [ws_url(server)]},
                idmap={"backend": "postgres", "postgres_dsn": dsn,
                       "runtime_backend": "redis", "redis_url": redis.url,
                       "redis_prefix": "gsk-mdwe:"}))
            command = daemon_command(config)
            log = (tmp_path / "daemon.log").open("wb")
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", LAUNCHER, *command, stderr=log, stdout=log)

            def alive() -> None:
                if process.returncode is not None:
                    raise AssertionError(
                        f"the daemon exited with {process.returncode}:\n"
                        + (tmp_path / "daemon.log").read_text(errors="replace")[-3000:])

            try:
                await until_listening(api, 30, alive=alive)
                await until(lambda: framework.connections, 20, "the framework", alive=alive)
                for _ in range(400):  # token, gateway session, PostgreSQL and Redis: ready
                    async with session.get(f"http://127.0.0.1:{api}/readyz") as resp:
                        if resp.status == 200:
                            break
                    alive()
                    await asyncio.sleep(0.05)
                assert resp.status == 200, await resp.text()
                await platform.push("GROUP_AT_MESSAGE_CREATE", gateway_message(1))
                event = await asyncio.wait_for(framework.received.get(), 20)
                assert "m1" in str(event["message"])
                sender = WebhookSender(f"http://127.0.0.1:{webhook}/qqbot", APP, SECRET,
                                       session=session)
                body = group_message(5)  # its id is not the gateway event's
                assert (await sender.post_raw(body, sender.headers(body))).status == 200
                event = await asyncio.wait_for(framework.received.get(), 20)
                assert "hello 5" in str(event["message"])
                alive()
                process.terminate()  # SIGTERM, as systemd stops it
                assert await asyncio.wait_for(process.wait(), 30) == 0
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                log.close()
                await server.close()

    try:
        with fresh_schema(create=True) as schema:
            asyncio.run(asyncio.wait_for(scenario(schema_dsn(schema)), TEST_SECONDS))
    finally:
        redis.stop()
