-- The gateway session of each bot and shard (qq/gateway.py): the session id and the seq of
-- the last dispatch processed, for a Resume after a restart. Kept with the graph, not in
-- Redis: losing it would lose the events the platform sent while the daemon restarted.
-- One row per AppID and shard ([index, count]); the daemon serving that shard writes it.

CREATE TABLE gateway_session (
    app_id      text COLLATE "C" NOT NULL,
    shard_index integer NOT NULL,
    shard_count integer NOT NULL,
    session_id  text,
    seq         bigint,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, shard_index, shard_count),
    CHECK (0 <= shard_index AND shard_index < shard_count)
);
