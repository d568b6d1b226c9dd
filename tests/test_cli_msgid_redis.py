"""`msgid lookup` and `msgid stats` on the Redis of --config (`idmap.runtime_backend: redis`):
they read the message ids the daemons stored under the configured prefix, and write nothing
(the server's own count of changes stays as it was)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import redis
from click.testing import CliRunner

from gensokyo_idmap.cli import main
from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds
from gensokyo_idmap.runtime.redis.connection import RedisRuntime

from .redis_server import PrivateRedis, private_redis  # noqa: F401 - the fixture

APP_ID = "102000001"
PREFIX = "gsk-cli:"


def write_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(f'bot:\n  app_id: "{APP_ID}"\nidmap:\n  data_dir: {tmp_path / "data"}\n'
                    f"  runtime_backend: redis\n  redis_url: {url}\n"
                    f"  redis_prefix: '{PREFIX}'\n", encoding="utf-8")
    return path


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None,
                            "GSK_IDMAP__REDIS_URL": None, "GSK_IDMAP__REDIS_PREFIX": None}
                       ).invoke(main, list(args))
    return result.exit_code, result.output


#: (last position, end of the block) of a store script: from the start, no high-water mark
#: (a daemon's come from its blocks, runtime.blocks)
ANY_POSITION = (0, 2**62)


def seed(url: str, prefix: str, *items: tuple[str, str], ttl_ms: int = 600_000) -> list[int]:
    """Store (real id, target) pairs as a daemon on ``prefix`` does; their virtual ids."""
    runtime = RedisRuntime(url, prefix)
    try:
        _, stored = RedisMsgIds(runtime).store_sync(
            # 0: no reply window (not a reply candidate); no author, no content, no msg_idx
            [(real, APP_ID, "group", target, "in", 0, 0, 0, "", "") for real, target in items],
            int(time.time() * 1000), ttl_ms, ANY_POSITION)
    finally:
        runtime.sync.close()
    return [outcome[0] for outcome in stored if outcome is not None]


def changes(url: str) -> tuple[int, dict[bytes, bytes | None]]:
    """The server's count of writes since its start, and every key with its dump."""
    client = redis.Redis.from_url(url)
    try:
        dirty = int(client.info("persistence")["rdb_changes_since_last_save"])
        return dirty, {key: client.dump(key) for key in client.keys("*")}
    finally:
        client.close()


def test_lookup_and_stats_read_the_prefix_on_redis_and_write_nothing(
        tmp_path: Path, private_redis: PrivateRedis) -> None:  # noqa: F811 - the fixture
    url = private_redis.url
    first, second = seed(url, PREFIX, ("ROBOT1.0_a", "G1"), ("ROBOT1.0_b", "G2"))
    [short] = seed(url, PREFIX, ("ROBOT1.0_short", "G1"), ttl_ms=60_000)
    seed(url, "gsk-other:", ("ROBOT1.0_elsewhere", "G9"))  # another daemon set: not ours
    config = ["--config", str(write_config(tmp_path, url))]
    before = changes(url)

    code, out = cli(*config, "msgid", "lookup", str(first))
    assert (code, out.strip()) == (0, "ROBOT1.0_a")
    code, out = cli(*config, "--json", "msgid", "lookup", str(second))
    assert code == 0, out
    record = json.loads(out)
    assert (record["virtual_id"], record["real_id"], record["target"], record["app_id"],
            record["chat_kind"], record["direction"]) == (
        second, "ROBOT1.0_b", "G2", APP_ID, "group", "in")
    code, out = cli(*config, "msgid", "lookup", "42")
    assert code == 1 and "42: unknown or expired" in out
    code, out = cli(*config, "--json", "msgid", "stats")
    assert code == 0, out
    assert json.loads(out) == {"entries": 3, "counter": short}
    code, out = cli(*config, "msgid", "stats")
    assert (code, out.split()) == (0, ["entries", "3", "counter", str(short)])

    assert changes(url) == before  # not one write, not one key touched
    assert not (tmp_path / "data" / "msgid-map.db").exists()


def test_an_expired_record_still_in_redis_is_unknown(
        tmp_path: Path, private_redis: PrivateRedis) -> None:  # noqa: F811 - the fixture
    """The record's own expiry decides, as for the daemons (Redis may keep it a moment)."""
    url = private_redis.url
    runtime = RedisRuntime(url, PREFIX)
    try:
        _, [stored] = RedisMsgIds(runtime).store_sync(
            [("ROBOT1.0_old", APP_ID, "group", "G1", "in", 0, 0, 0, "", "")],
            int(time.time() * 1000) - 600_000, 60_000, ANY_POSITION)  # gone 9 minutes ago
        assert stored is not None
        vid = stored[0]
    finally:
        runtime.sync.close()
    code, out = cli("--config", str(write_config(tmp_path, url)), "msgid", "lookup", str(vid))
    assert code == 1 and "unknown or expired" in out


def test_a_redis_that_does_not_answer_is_an_error_naming_it_without_its_password(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, "redis://:s3cret-pw@127.0.0.1:1/0")
    for command in (["msgid", "lookup", "1"], ["msgid", "stats"]):
        code, out = cli("--config", str(config), *command)
        assert code == 1, out
        assert "redis at redis://" in out and "127.0.0.1:1" in out
        assert "s3cret-pw" not in out
