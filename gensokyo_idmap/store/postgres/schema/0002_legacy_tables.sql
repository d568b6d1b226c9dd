-- The old Go daemon's config and UserInfo buckets, carried byte for byte (docs/stores.md):
-- apart from the graph, so they can leave it without touching it.

CREATE TABLE config (
    key   bytea PRIMARY KEY,
    value bytea NOT NULL
);

CREATE TABLE user_info (
    key   bytea PRIMARY KEY,
    value bytea NOT NULL
);
