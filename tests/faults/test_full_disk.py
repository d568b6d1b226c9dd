"""The daemon with its data dir on a small file system that fills up.

A tmpfs of its own is mounted for the test and unmounted after it (skipped, with the reason,
where this process may not mount). The daemon (a real ``gensokyo-idmap serve``) takes events
by webhook and by the emulated platform's gateway; the disk is then filled by a ballast file
and events keep coming. While it is full: no death by a signal, a webhook event that cannot
be stored is answered 503 (not ACKed), the gateway's ACK (the seq its heartbeats report) does
not pass what it could not store, ``/healthz`` is 503 and says why, and OneBot's
``get_status`` says the bot is not good. Once the ballast is gone, without a restart: the
platform's retries are stored and ACKed, the gateway catches up, ``/healthz`` is 204, the bot
good again. Every event that was ACKed at any time is in openid-map.db afterwards.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest

from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

from gensokyo_idmap.testing import (
    APP,
    SECRET,
    DaemonProcess,
    EmulatedPlatform,
    Prepared,
    WebhookSender,
    daemon_config,
    free_port,
    group_message,
    until,
    write_config,
)

SCRIPT = Path(sys.executable).parent / "gensokyo-idmap"
DISK_MB = 24
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
TIMEOUT = 60.0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_MB MiB at tmp_path/disk, unmounted afterwards."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0755",
                               "tmpfs", str(mount_point)],
                              capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError:
        pytest.skip("no mount command: the full-disk test needs a small file system of its own")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): the full-disk test "
                    "needs a small file system of its own")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True,
                          timeout=30, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True,
                           timeout=30, check=False)


def fill(ballast: Path) -> None:
    """Write ``ballast`` until the file system has no block left."""
    with open(ballast, "wb", buffering=0) as handle:
        for chunk in (1 << 20, 1 << 16, 1 << 12):
            while True:
                try:
                    handle.write(b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    stats = os.statvfs(ballast.parent)
    assert stats.f_bavail * stats.f_frsize < 1 << 12


def user_of(n: int) -> str:
    return f"{n:032X}"


def acked_seq(platform: EmulatedPlatform) -> int:
    """The seq the daemon's gateway reports as processed (its heartbeats carry it)."""
    return max((beat for beat in platform.heartbeats if isinstance(beat, int)), default=0)


@pytest.mark.slow
def test_a_full_disk_is_an_error_and_passes(small_disk: Path) -> None:
    data_dir = small_disk / "data"
    webhook_port, api_port, onebot_port = free_port(), free_port(), free_port()
    acked: list[str] = []  # users of events the platform was told were stored
    sender_daemon: list[DaemonProcess] = []

    async def scenario() -> None:
        platform = EmulatedPlatform(heartbeat_ms=100)
        await platform.start()
        # the config and the log beside the small disk: a log must not fail to be written
        daemon = DaemonProcess(write_config(small_disk.parent / "config.yml", daemon_config(
            data_dir, platform=platform, webhook=f"127.0.0.1:{webhook_port}",
            api=f"127.0.0.1:{api_port}", idmap={"map_size_mb": 1},
            onebot={"http_api": f"127.0.0.1:{onebot_port}"})), small_disk.parent)
        sender_daemon[:] = [daemon]
        await daemon.start()
        try:
            async with aiohttp.ClientSession() as session, \
                    WebhookSender(f"http://127.0.0.1:{webhook_port}/qqbot", APP, SECRET,
                                  session=session) as sender:
                await run(daemon, platform, sender, session)
        finally:
            code = await daemon.close(TIMEOUT)
            await platform.close()
        assert code == 0, daemon.tail()

    async def healthz(session: aiohttp.ClientSession) -> tuple[int, str]:
        async with session.get(f"http://127.0.0.1:{api_port}/healthz") as resp:
            return resp.status, await resp.text()

    async def get_status(session: aiohttp.ClientSession) -> object:
        """What the bot tells a framework of itself (OneBot ``get_status``)."""
        async with session.post(f"http://127.0.0.1:{onebot_port}/get_status") as resp:
            return (await resp.json())["data"]

    async def post(sender: WebhookSender, n: int, user: int | None = None
                   ) -> tuple[Prepared, int]:
        """Event ``n`` (a new message id) from user ``user`` (default: a new user ``n``)."""
        who = user_of(n if user is None else user)
        prepared = sender.build("GROUP_AT_MESSAGE_CREATE", group_message(n, GROUP, who))
        try:
            delivery = await sender.post(prepared)
        except aiohttp.ClientError as exc:
            for _ in range(100):  # a daemon that died: its return code (a signal?) is told
                if sender_daemon[0].returncode is not None:
                    break
                await asyncio.sleep(0.05)
            sender_daemon[0].alive()
            raise AssertionError(f"the webhook did not answer: {exc!r}") from exc
        if delivery.status == 200:
            acked.append(who)
        return prepared, delivery.status

    def log_text(daemon: DaemonProcess) -> str:
        return daemon.log.read_text(errors="replace")

    async def until_seen(daemon: DaemonProcess, check: Callable[[], object], what: str) -> None:
        await until(check, TIMEOUT, lambda: f"never: {what}\n{daemon.tail(60)}",
                    alive=daemon.alive, interval=0.05)

    async def run(daemon: DaemonProcess, platform: EmulatedPlatform, sender: WebhookSender,
                  session: aiohttp.ClientSession) -> None:
        await until_seen(daemon, lambda: "[app] ready" in log_text(daemon), "[app] ready")
        await until_seen(daemon, lambda: platform.identifies, "the gateway identified")
        for n in range(10):
            assert (await post(sender, n))[1] == 200
        pushed = [await platform.push("GROUP_AT_MESSAGE_CREATE",
                                      group_message(100_000 + n, GROUP, user_of(100_000 + n)))
                  for n in range(3)]
        await until_seen(daemon, lambda: acked_seq(platform) >= pushed[-1]["s"],
                         "gateway events ACKed")
        assert (await healthz(session))[0] == 204
        assert await get_status(session) == {"online": True, "good": True}

        fill(small_disk / "ballast")
        refused: list[Prepared] = []
        n = 10
        # known people with new messages first (only msgid-map.db is written: through a map
        # of a sparse file, this was the SIGBUS), then new people too, until some events
        # cannot be stored
        while len(refused) < 3:
            assert n < 5000, "no event was refused on a full disk"
            prepared, status = await post(sender, n, user=n % 10 if n < 400 else None)
            assert status in (200, 503), status
            if status == 503:
                refused.append(prepared)
            n += 1
        daemon.alive()
        status, text = await healthz(session)
        assert status == 503, text
        assert "disk full" in text and "its last write failed" in text, text
        assert (await get_status(session))["good"] is False  # a store's write failed
        seq_before = acked_seq(platform)
        late = [await platform.push("GROUP_AT_MESSAGE_CREATE",
                                    group_message(200_000 + k, GROUP, user_of(200_000 + k)))
                for k in range(3)]
        await until_seen(daemon, lambda: "[qq] gateway events not processed" in log_text(daemon),
                         "a gateway batch failing on the full disk")
        assert acked_seq(platform) < late[0]["s"]  # the gateway did not ACK past them
        assert acked_seq(platform) >= seq_before

        (small_disk / "ballast").unlink()  # space returns; no restart
        for prepared in refused:  # the platform sends again what was not ACKed
            delivery = await sender.post(prepared)
            assert delivery.status == 200, delivery
            acked.append(json_user(prepared))
        await until_seen(daemon, lambda: acked_seq(platform) >= late[-1]["s"],
                         "the gateway caught up")
        acked.extend(user_of(200_000 + k) for k in range(3))
        acked.extend(user_of(100_000 + k) for k in range(3))
        assert await healthz(session) == (204, "")
        assert await get_status(session) == {"online": True, "good": True}

    asyncio.run(asyncio.wait_for(scenario(), 4 * TIMEOUT))
    with LmdbIdentityStore(data_dir / "openid-map.db") as store, store.read() as view:
        lost = [user for user in acked if view.vuin_of(f"openid:QQ:{APP}:{user}") is None]
    assert lost == []


def json_user(prepared: Prepared) -> str:
    import json

    return str(json.loads(prepared.body)["d"]["author"]["member_openid"])


@pytest.mark.slow
def test_a_lock_file_that_cannot_get_blocks_is_an_error(small_disk: Path) -> None:
    """LMDB sizes a new lock file with ftruncate (a hole) and writes its header through a
    shared map: on a full disk that write was a SIGBUS. Now the file gets its blocks first,
    and when it cannot, the command says so, leaves no lock file behind, and works once
    there is space again."""
    data_dir = small_disk / "data"
    command = [str(SCRIPT), "--data-dir", str(data_dir), "--app-id", APP, "identity",
               "resolve", f"openid:QQ:{APP}:{user_of(1)}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSK_")}
    assert subprocess.run(command, capture_output=True, timeout=TIMEOUT, env=env,
                          check=False).returncode == 0
    (data_dir / "openid-map.db-lock").unlink()  # as after a reboot that cleared it
    fill(small_disk / "ballast")
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, env=env,
                          check=False)
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert f"cannot allocate {data_dir / 'openid-map.db-lock'}" in done.stderr, done.stderr
    assert not (data_dir / "openid-map.db-lock").exists()
    (small_disk / "ballast").unlink()
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
