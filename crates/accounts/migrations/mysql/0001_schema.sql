-- shoal accounts schema, version 1 (MariaDB / MySQL, InnoDB). Same tables, columns and meaning
-- as the sqlite/ and postgres/ versions; docs/private.md describes them and how a site maps
-- onto them. Byte counts are after the factors; seconds are whole seconds; times are Unix
-- seconds. Passkeys and prefixes are ASCII.

CREATE TABLE users (
    id              BIGINT       NOT NULL PRIMARY KEY,  -- the site's user id
    passkey         VARCHAR(64)  CHARACTER SET ascii NOT NULL UNIQUE,
    enabled         BOOLEAN      NOT NULL DEFAULT TRUE,
    can_download    BOOLEAN      NOT NULL DEFAULT TRUE,
    download_factor DOUBLE       NOT NULL DEFAULT 1.0,
    upload_factor   DOUBLE       NOT NULL DEFAULT 1.0,
    uploaded        BIGINT       NOT NULL DEFAULT 0,
    downloaded      BIGINT       NOT NULL DEFAULT 0,
    completed       BIGINT       NOT NULL DEFAULT 0,
    seed_seconds    BIGINT       NOT NULL DEFAULT 0,
    leech_seconds   BIGINT       NOT NULL DEFAULT 0
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE torrents (
    id              BIGINT       NOT NULL PRIMARY KEY,  -- the site's torrent id
    info_hash       BINARY(20)   NOT NULL UNIQUE,
    info_hash_v2    BINARY(20)   NULL UNIQUE,
    download_factor DOUBLE       NOT NULL DEFAULT 1.0,
    upload_factor   DOUBLE       NOT NULL DEFAULT 1.0
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE clients (
    prefix          VARCHAR(20)  CHARACTER SET ascii NOT NULL PRIMARY KEY  -- peer-id prefix
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE user_torrents (
    user_id         BIGINT       NOT NULL,
    torrent_id      BIGINT       NOT NULL,
    uploaded        BIGINT       NOT NULL DEFAULT 0,
    downloaded      BIGINT       NOT NULL DEFAULT 0,
    seed_seconds    BIGINT       NOT NULL DEFAULT 0,
    leech_seconds   BIGINT       NOT NULL DEFAULT 0,
    completed_at    BIGINT       NULL,                  -- NULL until the snatch; set once
    updated_at      BIGINT       NOT NULL,
    PRIMARY KEY (user_id, torrent_id),
    KEY user_torrents_by_torrent (torrent_id),
    CONSTRAINT user_torrents_user FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT user_torrents_torrent FOREIGN KEY (torrent_id) REFERENCES torrents (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
