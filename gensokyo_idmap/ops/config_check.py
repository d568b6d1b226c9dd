"""What ``serve`` refuses or warns about in a config that validates (pure).

The one set of start-up rules: ``app.run_daemon`` refuses a config on the first error here
before it opens anything, and ``config check`` reports the same errors without starting
anything, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gensokyo_idmap.config import Config
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.hostport import is_loopback_host, parse_host_port

__all__ = ["StartupCheck", "check_listen", "check_startup", "refuse_bad_startup", "summary"]


@dataclass(frozen=True, slots=True)
class StartupCheck:
    errors: tuple[BadInputError, ...]
    warnings: tuple[str, ...]


def check_listen(listen: str, token: str, getid_allow: Sequence[str]) -> None:
    """Refuse a non-loopback listener that has neither a token nor allowed networks."""
    if not listen or token or getid_allow:
        return
    if not is_loopback_host(parse_host_port(listen, "api.listen").host):
        raise BadInputError("api.listen", listen, "a listener on a non-loopback address needs "
                            "api.token or api.getid_allow (or listen on 127.0.0.1)")


def check_startup(config: Config) -> StartupCheck:
    """Every error (serve refuses to start) and warning (it starts, but loudly) of ``config``
    beyond what validating the file already refused."""
    errors: list[BadInputError] = []
    warnings: list[str] = []
    secret = config.bot.secret.get_secret_value()
    if config.qq.gateway and not (config.bot.app_id and secret):
        errors.append(BadInputError("qq.gateway", True,
                                    "the gateway needs bot.app_id and bot.secret"))
    if config.webhook.listen:
        if not config.bot.app_id:
            errors.append(BadInputError("webhook.listen", config.webhook.listen,
                                        "the webhook needs bot.app_id"))
        elif not secret:
            warnings.append("webhook.listen: no bot.secret, so every callback is refused "
                            "until it is set")
    try:
        check_listen(config.api.listen, config.api.token.get_secret_value(),
                     config.api.getid_allow)
    except BadInputError as err:
        errors.append(err)
    if not config.webhook.listen and not config.qq.gateway:
        warnings.append("no platform intake: set webhook.listen or qq.gateway: true")
    if not (config.onebot.reverse_ws or config.onebot.forward_ws or config.onebot.http_post):
        warnings.append("no framework connection: set onebot.reverse_ws, onebot.forward_ws "
                        "or onebot.http_post")
    return StartupCheck(tuple(errors), tuple(warnings))


def refuse_bad_startup(config: Config) -> StartupCheck:
    """:func:`check_startup`, raising its first error (what ``serve`` does)."""
    checked = check_startup(config)
    if checked.errors:
        raise checked.errors[0]
    return checked


def summary(config: Config) -> str:
    """One line: what the daemon would run with this config (no secret, only whether set)."""
    parts = [f"app_id {config.bot.app_id or '-'}",
             "secret set" if config.bot.secret.get_secret_value() else "no secret",
             f"data {config.idmap.data_dir}",
             f"webhook {config.webhook.listen or 'off'}",
             f"gateway {'on' if config.qq.gateway else 'off'}",
             f"reverse ws {len(config.onebot.reverse_ws)}",
             f"forward ws {config.onebot.forward_ws or 'off'}",
             f"http post {len(config.onebot.http_post)}",
             f"http api {config.onebot.http_api or 'off'}"]
    return ", ".join(parts)
