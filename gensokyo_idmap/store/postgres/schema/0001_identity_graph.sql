-- The identity graph: the tables of openid-map.db, one to one (docs/stores.md).
--
-- Text columns compare as bytes (COLLATE "C"), the order LMDB keeps keys in, so listings
-- and prefix walks agree between the two backends.
--
-- identity_to_vuin and vuin_to_identity are exact inverses (idmap.py rule 2), and the
-- database holds them to it: each references the other on (key, vuin), checked at commit
-- (a transaction moves a key in several statements). With the primary key on
-- identity_to_vuin.key, a key is in exactly one vUIN's set.

CREATE TABLE meta (
    name  text COLLATE "C" PRIMARY KEY,
    value jsonb NOT NULL
);

-- rule 1: the counter only grows; every allocation updates this one row, so two daemons
-- allocating at once conflict here and one of them retries (the writer's SERIALIZABLE
-- transaction)
INSERT INTO meta (name, value) VALUES ('vuin_counter', '0');

CREATE TABLE identity_to_vuin (
    key  text COLLATE "C" PRIMARY KEY,
    vuin bigint NOT NULL CHECK (vuin > 0),
    UNIQUE (key, vuin)
);

CREATE TABLE vuin_to_identity (
    vuin bigint NOT NULL CHECK (vuin > 0),
    key  text COLLATE "C" NOT NULL,
    PRIMARY KEY (vuin, key)
);

ALTER TABLE identity_to_vuin
    ADD CONSTRAINT identity_to_vuin_in_its_set FOREIGN KEY (key, vuin)
        REFERENCES vuin_to_identity (key, vuin) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE vuin_to_identity
    ADD CONSTRAINT vuin_to_identity_points_back FOREIGN KEY (key, vuin)
        REFERENCES identity_to_vuin (key, vuin) DEFERRABLE INITIALLY DEFERRED;

-- per vUIN and scene: the identity used there and since when (idmap.py rule 7)
CREATE TABLE last_seen (
    vuin     bigint NOT NULL CHECK (vuin > 0),
    scene    text COLLATE "C" NOT NULL CHECK (octet_length(scene) BETWEEN 1 AND 400),
    identity text COLLATE "C" NOT NULL,
    since    double precision NOT NULL,
    PRIMARY KEY (vuin, scene)
);

-- old vUIN -> the vUIN it resolves to today (rule 5: one hop, never a loop)
CREATE TABLE vuin_alias (
    old bigint PRIMARY KEY CHECK (old > 0),
    new bigint NOT NULL CHECK (new > 0),
    CHECK (old <> new)
);
CREATE INDEX vuin_alias_by_new ON vuin_alias (new, old);
