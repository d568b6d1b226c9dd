"""When an identity last spoke in a chat, read from the message-id map (idmap rule 7).

The msgid map records every inbound message and reply-able event with its chat and time
(bridge rules 3 and 5), in the one write each inbound batch makes anyway. This turns that
into the :data:`~gensokyo_idmap.idmap.Recency` by which the reverse path orders the
identities of one vUIN, so the inbound path pays nothing for it.

Only a scene whose identity *is* its chat gets an answer: a C2C user in its own chat, a
group in its own chat. A member shares a group chat with everyone in it, so the chat's
newest message says nothing about when that member spoke; which identity a member used in
a group is the exact ``last_seen`` of that scene anyway.
"""

from __future__ import annotations

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import OpenId, parse_key, parse_scene
from gensokyo_idmap.idmap import Recency
from gensokyo_idmap.runtime.msgid import EVENT_KINDS, MessageIds

__all__ = ["chat_recency"]


def chat_recency(msgids: MessageIds) -> Recency:
    """The recency of scenes ``<platform>:<app>:group|c2c:<openid>`` whose identity is that
    OpenID: the newest live message or reply-able event of that chat in ``msgids``."""

    def recency(scene: str, identity: str) -> tuple[int, int] | None:
        try:
            platform, app_id, kind, target = parse_scene(scene)
            if kind not in EVENT_KINDS:
                return None
            key = parse_key(identity)
        except BadInputError:
            return None
        if not isinstance(key, OpenId) or (key.platform, key.app_id, key.openid) != (
                platform, app_id, target):
            return None
        return msgids.newest_inbound(app_id, (kind, EVENT_KINDS[kind]), target)

    return recency
