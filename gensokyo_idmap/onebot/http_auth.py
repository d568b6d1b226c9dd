"""Who may call the OneBot servers (forward WS, HTTP API): one rule, one answer.

First, what :mod:`gensokyo_idmap.admission` takes from a browser's reach, whatever token a
request carries: a ``Host`` that is an IP address, ``localhost`` or in ``api.allowed_hosts``
(else 421, retcode 1421), and no foreign ``Origin`` or ``Sec-Fetch-Site: cross-site`` (403,
retcode 1403) on any request, as every action may write (OneBot's HTTP API takes actions
by GET, and a browser page may open a WebSocket to any address). Frameworks send no
``Origin``; browsers always do on a WebSocket handshake and a POST. Content types stay as
OneBot v11 has them (JSON, form, query string): the Origin check is what keeps a page's
form out (``docs/security.md``).

Then the token, as go-cqhttp checks it (``server/http.go`` ``checkAuth``), and so as
frameworks expect:

1. The token comes from ``Authorization: Bearer <t>`` or ``Token <t>`` (scheme in any case),
   else from ``?access_token=<t>``. A header with any other scheme presents no token.
2. No token presented: **401**, retcode 1401. A token that is not the configured one:
   **403**, retcode 1403. Compared in constant time; a token that is not valid UTF-8 is
   simply a wrong one (:func:`~gensokyo_idmap.api.access.same_token`).
3. The body is a failed OneBot response, so a client that reads it sees why; it never
   quotes either token.
4. A client (its address) that presented 10 wrong tokens in a minute is answered **429**,
   retcode 1429, with ``Retry-After``, until the oldest of them is a minute old; its token
   is not compared meanwhile, not even the right one, so it cannot tell a right guess from
   a wrong one (:mod:`gensokyo_idmap.api.failure_limit`: the same rule as ``api.token``'s,
   one count for the forward WebSocket and the HTTP API of every bot, apart from
   ``api.token``'s so that a framework left with a stale token does not lock its host out
   of the console). A missing token is no guess and is not counted. The lockout is logged
   once, never a token.

Each server is given its own token (``onebot.forward_ws_access_token``,
``onebot.http_api_access_token``, default ``onebot.access_token``); none: anyone may connect.
"""

from __future__ import annotations

from typing import Final

import structlog
from aiohttp import web

from gensokyo_idmap.admission import Admission
from gensokyo_idmap.api.access import same_token
from gensokyo_idmap.api.failure_limit import FailureLimit
from gensokyo_idmap.onebot.actions import failed

__all__ = ["RETCODE_TOKEN_MISSING", "RETCODE_TOKEN_WRONG", "RETCODE_TOO_MANY_WRONG",
           "admission_refusal", "presented_token", "token_refusal"]

log = structlog.get_logger("gensokyo_idmap.onebot.http_auth")

RETCODE_TOKEN_MISSING: Final = 1401
RETCODE_TOKEN_WRONG: Final = 1403
RETCODE_TOO_MANY_WRONG: Final = 1429


def presented_token(request: web.Request) -> str | None:
    """The token a request carries (rule 1), or None."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in ("bearer", "token") and value.strip():
        return value.strip()
    return request.query.get("access_token")


def token_refusal(request: web.Request, expected: str | None, failures: FailureLimit,
                  server: str) -> web.Response | None:
    """The 401/403/429 answer for a request without the ``expected`` token (rules 2 to 4:
    ``failures`` counts the wrong ones of ``server``'s clients); None when it may pass (or
    no token is configured)."""
    if not expected:
        return None
    peer = request.remote
    wait = failures.retry_after(peer)
    if wait:
        return web.json_response(
            failed(RETCODE_TOO_MANY_WRONG,
                   f"too many wrong access tokens from {peer}: try again in {wait} s"),
            status=429, headers={"Retry-After": str(wait)})
    presented = presented_token(request)
    if not presented:
        return web.json_response(failed(RETCODE_TOKEN_MISSING, "access token required"),
                                 status=401)
    if not same_token(presented, expected):
        if failures.failed(peer):
            log.warning("[onebot] access token refused for a while: too many wrong tokens",
                        server=server, peer=peer, failures=failures.failures,
                        window_seconds=failures.window,
                        retry_after_seconds=failures.retry_after(peer))
        return web.json_response(failed(RETCODE_TOKEN_WRONG, "access token wrong"),
                                 status=403)
    failures.succeeded(peer)
    return None


def admission_refusal(request: web.Request, admission: Admission,
                      server: str) -> web.Response | None:
    """The 421/403 answer for a request from a browser's reach (logged, naming ``server``
    and why); None when it may go on to :func:`token_refusal`."""
    refused = admission.refusal(request.headers, guarded=True)
    if refused is None:
        return None
    log.warning("[onebot] request refused", server=server, peer=request.remote,
                path=request.path, status=refused.status, reason=refused.message)
    return web.json_response(failed(1000 + refused.status, refused.message),
                             status=refused.status)
