"""A moment on a console page, in one format everywhere (pure: no I/O).

The server does not know the viewer's time zone, so it writes every moment in UTC, with the
zone named (``2024-05-01 03:04:05 UTC``), inside ``<time datetime="2024-05-01T03:04:05Z">``;
the console's own script (``static/console.js``, ``localTimes``) rewrites each such element
into the viewer's local time in the same shape, with the offset named
(``2024-05-01 11:04:05 UTC+08:00``). Without the script a page still says exactly when.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from markupsafe import Markup

__all__ = ["NONE", "time_tag"]

#: What a page shows for a moment that is not there.
NONE = "—"


def time_tag(seconds: float | int | None) -> Markup:
    """``<time datetime=ISO>UTC text</time>`` for a Unix time in seconds; :data:`NONE`
    for None or a value that is no moment."""
    if seconds is None or isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return Markup(NONE)
    if not math.isfinite(seconds):
        return Markup(NONE)
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return Markup(NONE)
    moment = moment.replace(microsecond=0)
    return Markup('<time datetime="{}">{} UTC</time>').format(
        moment.strftime("%Y-%m-%dT%H:%M:%SZ"), moment.strftime("%Y-%m-%d %H:%M:%S"))
