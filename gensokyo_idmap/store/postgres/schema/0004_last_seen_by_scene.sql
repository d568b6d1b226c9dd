-- The scene index of last_seen: the chats seen (each scene once, in order) and the vUINs
-- last seen in one chat, read a page at a time without a walk of the table (the console's
-- lists, docs/stores.md "Browsing"). last_seen's primary key (vuin, scene) answers the
-- other direction.

CREATE INDEX last_seen_by_scene ON last_seen (scene, vuin);
