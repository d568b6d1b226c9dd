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

Each server is given its own token (``onebot.forward_ws_access_token``,
``onebot.http_api_access_token``, default ``onebot.access_token``); none: anyone may connect.
"""

from __future__ import annotations

from typing import Final

import structlog
from aiohttp import web

from gensokyo_idmap.admission import Admission
from gensokyo_idmap.api.access import same_token
from gensokyo_idmap.onebot.actions import failed

__all__ = ["RETCODE_TOKEN_MISSING", "RETCODE_TOKEN_WRONG", "admission_refusal",
           "presented_token", "token_refusal"]

log = structlog.get_logger("gensokyo_idmap.onebot.http_auth")

RETCODE_TOKEN_MISSING: Final = 1401
RETCODE_TOKEN_WRONG: Final = 1403


def presented_token(request: web.Request) -> str | None:
    """The token a request carries (rule 1), or None."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in ("bearer", "token") and value.strip():
        return value.strip()
    return request.query.get("access_token")


def token_refusal(request: web.Request, expected: str | None) -> web.Response | None:
    """The 401/403 answer for a request without the ``expected`` token; None when it may
    pass (or no token is configured)."""
    if not expected:
        return None
    presented = presented_token(request)
    if not presented:
        return web.json_response(failed(RETCODE_TOKEN_MISSING, "access token required"),
                                 status=401)
    if not same_token(presented, expected):
        return web.json_response(failed(RETCODE_TOKEN_WRONG, "access token wrong"),
                                 status=403)
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
