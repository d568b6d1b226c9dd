"""``config check --connect``: reach the servers a config names, as the daemon would.

PostgreSQL (``idmap.backend: postgres``): a connection, then the schema's migrations read
(a database this gensokyo-idmap would refuse is an error here too; one needing an upgrade
is fine, the daemon applies it). Redis (``idmap.runtime_backend: redis``): ``PING``. Each
finding names the server, where it is (no password: :func:`describe_dsn`,
:func:`redact_url`) and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from gensokyo_idmap.config import Config
from gensokyo_idmap.errors import IdmapError
from gensokyo_idmap.redaction import describe_dsn, redact_text, redact_url

__all__ = ["Reached", "reach_servers"]


@dataclass(frozen=True, slots=True)
class Reached:
    """One server the config names, and whether it answered."""

    server: str  # "postgresql" | "redis"
    where: str  # its URL, password hidden
    ok: bool
    detail: str

    def to_json(self) -> dict[str, object]:
        return {"server": self.server, "where": self.where, "ok": self.ok,
                "detail": self.detail}

    def line(self) -> str:
        name = "PostgreSQL" if self.server == "postgresql" else "Redis"
        return f"{name} at {self.where}: " + (self.detail if self.ok else
                                                f"cannot be used: {self.detail}")


def _postgres(dsn: str) -> Reached:
    where = describe_dsn(dsn)  # as every PostgreSQL message names it, a key/value DSN too
    try:
        from gensokyo_idmap.store.postgres.connect import connect
        from gensokyo_idmap.store.postgres.migrate import migration_status
    except ImportError:
        return Reached("postgresql", where, False, "psycopg is not installed: pip "
                       "install 'gensokyo-idmap[postgres]'")
    try:
        with connect(dsn) as conn:
            status = migration_status(conn)
    except IdmapError as err:
        reason = err.message.removeprefix(f"PostgreSQL at {where} ")  # said once, by line()
        return Reached("postgresql", where, False, redact_text(reason))
    except Exception as exc:  # noqa: BLE001 - the driver's errors: reported, not raised
        return Reached("postgresql", where, False, redact_text(" ".join(str(exc).split())))
    pending = f", {len(status.pending)} migration(s) pending (the daemon applies them)" \
        if status.pending else ""
    return Reached("postgresql", where, True,
                   f"answers; identity graph at schema version {status.current:04d}{pending}")


def _redis(url: str, prefix: str) -> Reached:
    """``PING`` through the daemon's own client (:class:`RedisRuntime`: its URL checks,
    its timeouts), so a Redis that passes here answers the daemon too."""
    where = redact_url(url)
    try:
        import redis

        from gensokyo_idmap.runtime.redis.connection import RedisRuntime
    except ImportError:
        return Reached("redis", where, False, "redis-py is not installed: pip install "
                       "'gensokyo-idmap[redis]'")
    try:
        runtime = RedisRuntime(url, prefix)
        try:
            with runtime.read():
                pass
        finally:
            runtime.sync.close()
    except IdmapError as err:
        return Reached("redis", where, False, redact_text(err.message))
    except (redis.RedisError, OSError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return Reached("redis", where, False, redact_text(reason))
    return Reached("redis", where, True, "answers PING")


def reach_servers(config: Config) -> list[Reached]:
    """Each server ``config`` uses (none for an LMDB-only config), reached now."""
    found: list[Reached] = []
    if config.idmap.backend == "postgres":
        found.append(_postgres(config.idmap.postgres_dsn))
    if config.idmap.runtime_backend == "redis":
        found.append(_redis(config.idmap.redis_url, config.idmap.redis_prefix))
    return found
