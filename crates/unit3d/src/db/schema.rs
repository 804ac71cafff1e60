//! What shoal needs of the site's database, and the check that it is there.
//!
//! The site owns its schema (Laravel's migrations create it); shoal only reads and writes.
//! A database that is not UNIT3D's, or an older UNIT3D without a column shoal writes, must
//! stop the start with the list of what is missing, not fail one batch at a time later. The
//! unique keys are checked too: the upserts rely on them, and without one an upsert would
//! quietly add a second row where the site expects one.

use shoal_site::mysql::catalog::Catalog;

use super::{Error, Unit3dDb, Widths};

/// Every table shoal reads or writes, with every column it names.
const TABLES: &[(&str, &str)] = &[
    (
        "groups",
        "id slug download_slots is_immune is_freeleech is_double_upload",
    ),
    (
        "users",
        "id group_id passkey can_download is_donor is_lifetime uploaded downloaded deleted_at",
    ),
    (
        "torrents",
        "id info_hash status free doubleup seeders leechers times_completed balance deleted_at",
    ),
    (
        "peers",
        "peer_id ip port agent uploaded downloaded left seeder active visible connectable \
        created_at updated_at torrent_id user_id",
    ),
    (
        "history",
        "user_id torrent_id agent uploaded actual_uploaded client_uploaded downloaded \
        actual_downloaded client_downloaded seeder active seedtime immune created_at updated_at \
        completed_at",
    ),
    ("blacklist_clients", "peer_id_prefix"),
    ("freeleech_tokens", "user_id torrent_id"),
    ("personal_freeleeches", "user_id"),
    ("featured_torrents", "torrent_id"),
    (
        "unregistered_info_hashes",
        "user_id info_hash created_at updated_at",
    ),
];

/// The unique keys the upserts rely on (`ON DUPLICATE KEY UPDATE`), by their columns.
const UNIQUE_KEYS: &[(&str, &str)] = &[
    ("peers", "user_id torrent_id peer_id"),
    ("history", "user_id torrent_id"),
    ("unregistered_info_hashes", "info_hash user_id"),
];

impl Unit3dDb {
    /// Checks that every table, column and unique key shoal reads or writes is in the
    /// site's database, and notes the lengths of the text columns it writes (a longer
    /// value is cut to fit). [`Error::Missing`] names each one that is not, e.g.
    /// `missing in the site's database: table peers, column history.seedtime`.
    pub async fn check(&mut self) -> Result<(), Error> {
        let catalog = self.db.check_tables(TABLES, UNIQUE_KEYS).await?;
        self.widths = widths(&catalog);
        Ok(())
    }
}

/// The agent columns' lengths as found; UNIT3D's where a column is not text.
fn widths(catalog: &Catalog) -> Widths {
    let default = Widths::default();
    Widths {
        peers_agent: catalog.width("peers", "agent", default.peers_agent),
        history_agent: catalog.width("history", "agent", default.history_agent),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use shoal_site::mysql::catalog::Needs;

    use super::*;

    const NEEDS: Needs = Needs {
        tables: TABLES,
        unique_keys: UNIQUE_KEYS,
    };

    fn everything() -> Catalog {
        let mut catalog = Catalog::default();
        for (table, columns) in TABLES {
            for column in columns.split_whitespace() {
                catalog
                    .columns
                    .insert((table.to_string(), column.to_string()), 0);
            }
        }
        for (table, columns) in UNIQUE_KEYS {
            let key: BTreeSet<String> = columns.split_whitespace().map(String::from).collect();
            catalog.unique_keys.insert(table.to_string(), vec![key]);
        }
        catalog
    }

    #[test]
    fn a_complete_schema_lacks_nothing() {
        assert!(everything().lacking(&NEEDS).is_empty());
    }

    #[test]
    fn a_key_over_other_columns_is_not_the_key() {
        let mut catalog = everything();
        catalog
            .unique_keys
            .insert("history".into(), vec![["user_id".to_string()].into()]);
        assert_eq!(
            catalog.lacking(&NEEDS),
            ["unique key history (user_id, torrent_id)"]
        );
    }

    #[test]
    fn widths_follow_the_agent_columns() {
        let mut catalog = everything();
        catalog
            .columns
            .insert(("peers".into(), "agent".into()), 255);
        assert_eq!(
            widths(&catalog),
            Widths {
                peers_agent: 255,
                history_agent: 64
            }
        );
    }
}
