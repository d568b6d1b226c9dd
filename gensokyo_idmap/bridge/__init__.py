"""The bridge: QQ platform events ↔ OneBot v11, through the identity graph and the msgid map.

``inbound`` translates platform events and runs the inbound pipeline; ``outbound`` picks the
OpenID a send goes to, what it replies to, and sends it; ``actions`` is the one action table
every OneBot transport serves; ``plan`` splits a OneBot message into platform messages;
``chat`` is one conversation (its scene, message context and reply window); ``dedup``
(what an event is known by, with the claims of ``runtime.claims``), ``chat_turns`` and
``outbox`` keep deliveries single, in chat order, and owed across restarts. Neither the
QQ side (``qq/``) nor the OneBot side (``onebot/``) imports this package.
"""
