-- shoal accounts schema, version 1 (PostgreSQL). Same tables, columns and meaning as the
-- sqlite/ and mysql/ versions; docs/private.md describes them and how a site maps onto them.
-- Byte counts are after the factors; seconds are whole seconds; times are Unix seconds.

CREATE TABLE users (
    id              BIGINT           PRIMARY KEY,  -- the site's user id
    passkey         VARCHAR(64)      NOT NULL UNIQUE,
    enabled         BOOLEAN          NOT NULL DEFAULT TRUE,
    can_download    BOOLEAN          NOT NULL DEFAULT TRUE,
    download_factor DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    upload_factor   DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    uploaded        BIGINT           NOT NULL DEFAULT 0,
    downloaded      BIGINT           NOT NULL DEFAULT 0,
    completed       BIGINT           NOT NULL DEFAULT 0,
    seed_seconds    BIGINT           NOT NULL DEFAULT 0,
    leech_seconds   BIGINT           NOT NULL DEFAULT 0
);

CREATE TABLE torrents (
    id              BIGINT           PRIMARY KEY,  -- the site's torrent id
    info_hash       BYTEA            NOT NULL UNIQUE CHECK (octet_length(info_hash) = 20),
    info_hash_v2    BYTEA            UNIQUE CHECK (octet_length(info_hash_v2) = 20),
    download_factor DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    upload_factor   DOUBLE PRECISION NOT NULL DEFAULT 1.0
);

CREATE TABLE clients (
    prefix          VARCHAR(20)      PRIMARY KEY   -- peer-id prefix, e.g. -qB
);

CREATE TABLE user_torrents (
    user_id         BIGINT           NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    torrent_id      BIGINT           NOT NULL REFERENCES torrents (id) ON DELETE CASCADE,
    uploaded        BIGINT           NOT NULL DEFAULT 0,
    downloaded      BIGINT           NOT NULL DEFAULT 0,
    seed_seconds    BIGINT           NOT NULL DEFAULT 0,
    leech_seconds   BIGINT           NOT NULL DEFAULT 0,
    completed_at    BIGINT,                        -- NULL until the snatch; set once
    updated_at      BIGINT           NOT NULL,
    PRIMARY KEY (user_id, torrent_id)
);

CREATE INDEX user_torrents_by_torrent ON user_torrents (torrent_id);
