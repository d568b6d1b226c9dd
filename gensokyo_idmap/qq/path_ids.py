"""Ids that become a segment of a platform URL, checked against their documented form.

Pure: text in, a quoted path segment or :class:`BadInputError` out.

Why: a framework names chats and messages, and those names go into the platform's paths
(``/channels/{channel_id}/messages``, ``/v2/groups/{group_openid}/files``,
``…/messages/{message_id}``) sent with the bot's token. Quoting alone is not enough: ``..``
survives percent-quoting (dots are unreserved) and the URL library resolves it, so
``../../v2/users/<openid>`` would post to the C2C endpoint, and ``8000001?x=1#`` would add
a query. So each id must first have its platform's form, and is quoted as well (a second
fence, should a form ever admit a reserved character):

* guild-side ids (guilds, channels, guild users, DM guilds) are decimal numbers
  (snowflakes of at most 20 digits, ASCII only);
* OpenIDs (users, groups, members) are tokens of ``A-Z a-z 0-9 _ -``, as
  :mod:`gensokyo_idmap.identity` accepts them, at most 128 characters;
* message and interaction ids are opaque tokens (``ROBOT1.0_…``, hex of guild messages) that
  start with a letter or digit, then letters, digits and ``. _ - ~ ! = +``, at most 256
  characters: never ``.`` or ``..``, never ``/ ? # %`` or a space.
"""

from __future__ import annotations

import enum
import re
from urllib.parse import quote

from gensokyo_idmap.errors import BadInputError

__all__ = ["IdForm", "path_segment"]


class IdForm(enum.Enum):
    """The documented form of one kind of platform id: its pattern and how to say it."""

    GUILD_SIDE = (re.compile(r"[0-9]{1,20}", re.ASCII),
                  "must be the platform's id: 1 to 20 digits")
    OPENID = (re.compile(r"[A-Za-z0-9_\-]{1,128}", re.ASCII),
              "must be an OpenID: 1 to 128 of A-Z a-z 0-9 _ -")
    MESSAGE_ID = (re.compile(r"[A-Za-z0-9][A-Za-z0-9._~!=+\-]{0,255}", re.ASCII),
                  "must be the platform's message id: a letter or digit, then letters, "
                  "digits and . _ - ~ ! = + (at most 256)")

    def __init__(self, pattern: re.Pattern[str], reason: str) -> None:
        self.pattern = pattern
        self.reason = reason


def path_segment(form: IdForm, field: str, value: object) -> str:
    """``value`` as one path segment of a platform URL, if it has ``form``'s shape.

    Raises :class:`BadInputError` naming ``field`` (the OneBot parameter or the id's name)
    otherwise: the caller sends nothing then.
    """
    if not isinstance(value, str) or not form.pattern.fullmatch(value):
        raise BadInputError(field, value, form.reason)
    return quote(value, safe="")
