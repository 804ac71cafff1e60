-- shoal accounts schema, version 1 (SQLite). Same tables, columns and meaning as the
-- postgres/ and mysql/ versions; docs/private.md describes them and how a site maps onto them.
-- Byte counts are after the factors; seconds are whole seconds; times are Unix seconds.

CREATE TABLE users (
    id              INTEGER PRIMARY KEY,          -- the site's user id (64-bit)
    passkey         TEXT    NOT NULL UNIQUE,
    enabled         BOOLEAN NOT NULL DEFAULT 1,
    can_download    BOOLEAN NOT NULL DEFAULT 1,
    download_factor REAL    NOT NULL DEFAULT 1.0,
    upload_factor   REAL    NOT NULL DEFAULT 1.0,
    uploaded        INTEGER NOT NULL DEFAULT 0,
    downloaded      INTEGER NOT NULL DEFAULT 0,
    completed       INTEGER NOT NULL DEFAULT 0,
    seed_seconds    INTEGER NOT NULL DEFAULT 0,
    leech_seconds   INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE torrents (
    id              INTEGER PRIMARY KEY,          -- the site's torrent id
    info_hash       BLOB    NOT NULL UNIQUE CHECK (length(info_hash) = 20),
    info_hash_v2    BLOB    UNIQUE CHECK (info_hash_v2 IS NULL OR length(info_hash_v2) = 20),
    download_factor REAL    NOT NULL DEFAULT 1.0,
    upload_factor   REAL    NOT NULL DEFAULT 1.0
);

CREATE TABLE clients (
    prefix          TEXT    PRIMARY KEY           -- peer-id prefix, e.g. -qB
);

CREATE TABLE user_torrents (
    user_id         INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    torrent_id      INTEGER NOT NULL REFERENCES torrents (id) ON DELETE CASCADE,
    uploaded        INTEGER NOT NULL DEFAULT 0,
    downloaded      INTEGER NOT NULL DEFAULT 0,
    seed_seconds    INTEGER NOT NULL DEFAULT 0,
    leech_seconds   INTEGER NOT NULL DEFAULT 0,
    completed_at    INTEGER,                      -- NULL until the snatch; set once
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (user_id, torrent_id)
);

CREATE INDEX user_torrents_by_torrent ON user_torrents (torrent_id);
