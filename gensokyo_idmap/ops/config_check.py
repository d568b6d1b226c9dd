"""What ``serve`` refuses or warns about in a config that validates (pure).

The one set of start-up rules: ``app.run_daemon`` refuses a config on the first error here
before it opens anything, and ``config check`` reports the same errors without starting
anything, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gensokyo_idmap.bots import BotSettings, resolve_bots
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
    bots = resolve_bots(config)
    for bot in bots:
        _check_bot(config, bot, errors, warnings)
    try:
        check_listen(config.api.listen, config.api.token.get_secret_value(),
                     config.api.getid_allow)
    except BadInputError as err:
        errors.append(err)
    if not config.webhook.listen and not any(bot.qq.gateway for bot in bots):
        warnings.append("no platform intake: set webhook.listen or qq.gateway: true")
    if not (config.onebot.forward_ws or any(bot.reverse_ws or bot.http_post for bot in bots)):
        warnings.append("no framework connection: set onebot.reverse_ws, onebot.forward_ws "
                        "or onebot.http_post")
    elif not config.onebot.forward_ws and len(bots) > 1:
        warnings += [f"{bot.key} (self_id {bot.self_id}) has no framework connection: set "
                     f"its onebot.reverse_ws or onebot.http_post, or onebot.forward_ws"
                     for bot in bots if not (bot.reverse_ws or bot.http_post)]
    return StartupCheck(tuple(errors), tuple(warnings))


def _check_bot(config: Config, bot: BotSettings, errors: list[BadInputError],
               warnings: list[str]) -> None:
    """What one bot needs: an AppID and a secret for the gateway, an AppID for the webhook
    (a missing secret there only warns: its callbacks are refused until it is set)."""
    if not bot.listed:  # bot: the messages every version gave
        if bot.qq.gateway and not bot.platform_ready:
            errors.append(BadInputError("qq.gateway", True,
                                        "the gateway needs bot.app_id and bot.secret"))
        if config.webhook.listen:
            if not bot.app_id:
                errors.append(BadInputError("webhook.listen", config.webhook.listen,
                                            "the webhook needs bot.app_id"))
            elif not bot.secret_value:
                warnings.append("webhook.listen: no bot.secret, so every callback is refused "
                                "until it is set")
        return
    # bots: each entry has its AppID (validated); the secret may be missing
    if bot.qq.gateway and not bot.secret_value:
        own = config.bots[int(bot.key.rpartition(".")[2])].qq
        where = (f"{bot.key}.qq.gateway" if own is not None and "gateway" in own.model_fields_set
                 else "qq.gateway")
        errors.append(BadInputError(where, True, f"the gateway of {bot.key} (app_id "
                                    f"{bot.app_id}) needs its secret ({bot.key}.secret or "
                                    f"{bot.key}.secret_file)"))
    if config.webhook.listen and not bot.secret_value:
        warnings.append(f"webhook.listen: {bot.key} (app_id {bot.app_id}) has no secret, so "
                        "each of its callbacks is refused until it is set")


def refuse_bad_startup(config: Config) -> StartupCheck:
    """:func:`check_startup`, raising its first error (what ``serve`` does)."""
    checked = check_startup(config)
    if checked.errors:
        raise checked.errors[0]
    return checked


def summary(config: Config) -> str:
    """One line: what the daemon would run with this config (no secret, only whether set)."""
    bots = resolve_bots(config)
    if config.bots:
        names = "; ".join(f"{bot.describe()}{'' if bot.secret_value else ' (no secret)'}"
                          f"{', gateway' if bot.qq.gateway else ''}" for bot in bots)
        parts = [f"bots {len(bots)} ({names})"]
    else:
        parts = [f"app_id {config.bot.app_id or '-'}",
                 "secret set" if config.bot.secret.get_secret_value() else "no secret"]
    parts += [f"data {config.idmap.data_dir}",
              f"webhook {config.webhook.listen or 'off'}",
              f"gateway {'on' if any(bot.qq.gateway for bot in bots) else 'off'}",
              f"reverse ws {sum(len(bot.reverse_ws) for bot in bots)}",
              f"forward ws {config.onebot.forward_ws or 'off'}",
              f"http post {sum(len(bot.http_post) for bot in bots)}",
              f"http api {config.onebot.http_api or 'off'}"]
    return ", ".join(parts)
