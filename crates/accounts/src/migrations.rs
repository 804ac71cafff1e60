//! The versioned schema migrations, compiled into the binary, one directory per dialect
//! (`crates/accounts/migrations/{sqlite,postgres,mysql}/NNNN_name.sql`).
//!
//! sqlx's `Migrator` applies them and records each in `_sqlx_migrations` with its checksum, as
//! `sqlx::migrate!` would; the list is spelled out here instead of using that macro so the crate
//! builds without sqlx's proc-macro (a second build of sqlx and all three drivers). A test keeps
//! this list and the directories equal, so a new migration file cannot be forgotten.

use std::borrow::Cow;

use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

use crate::dialect::Dialect;

/// One version of the schema: its number, its name, and its SQL in each dialect.
struct Version {
    number: i64,
    name: &'static str,
    sqlite: &'static str,
    postgres: &'static str,
    mysql: &'static str,
}

/// A [`Version`] from its number, written as in its file names (`0001`), and its name: its
/// SQL is `migrations/{sqlite,postgres,mysql}/NNNN_name.sql`.
macro_rules! version {
    ($number:literal, $name:literal) => {
        Version {
            number: $number,
            name: $name,
            sqlite: version!(@sql "sqlite", $number, $name),
            postgres: version!(@sql "postgres", $number, $name),
            mysql: version!(@sql "mysql", $number, $name),
        }
    };
    (@sql $dialect:literal, $number:literal, $name:literal) => {
        include_str!(concat!(
            "../migrations/",
            $dialect,
            "/",
            stringify!($number),
            "_",
            $name,
            ".sql"
        ))
    };
}

/// Every version, oldest first. Add a line (and three files) per new version; never edit a
/// version that has shipped (its checksum is recorded in every database that ran it).
// The numbers are written as in the file names, which the macro builds from them.
#[allow(clippy::zero_prefixed_literal)]
const VERSIONS: &[Version] = &[
    version!(0001, "schema"),
    version!(0002, "written_batches"),
    version!(0003, "written_batches_by_time"),
];

/// The embedded migrations of one dialect, as a source for sqlx's `Migrator`.
#[derive(Debug, Clone, Copy)]
struct Embedded(Dialect);

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> futures_core_box::BoxFuture<'static, Result<Vec<Migration>, BoxDynError>> {
        let migrations = VERSIONS
            .iter()
            .map(|version| {
                let sql = match self.0 {
                    Dialect::Sqlite => version.sqlite,
                    Dialect::Postgres => version.postgres,
                    Dialect::MySql => version.mysql,
                };
                Migration::new(
                    version.number,
                    Cow::Borrowed(version.name),
                    MigrationType::Simple,
                    Cow::Borrowed(sql),
                    false,
                )
            })
            .collect();
        Box::pin(async move { Ok(migrations) })
    }
}

/// sqlx's `BoxFuture`, named without a dependency on `futures-core`.
mod futures_core_box {
    pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
}

/// The migrator for `dialect`, ready to `run` against a pool.
pub async fn migrator(dialect: Dialect) -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(Embedded(dialect)).await
}

#[cfg(test)]
mod tests {
    use super::VERSIONS;
    use std::path::Path;

    #[test]
    fn every_migration_file_is_embedded_and_every_version_has_its_files() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        for dialect in ["sqlite", "postgres", "mysql"] {
            let mut files: Vec<String> = std::fs::read_dir(root.join(dialect))
                .unwrap()
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .collect();
            files.sort();
            let expected: Vec<String> = VERSIONS
                .iter()
                .map(|v| format!("{:04}_{}.sql", v.number, v.name))
                .collect();
            assert_eq!(files, expected, "migrations/{dialect}");
        }
        for pair in VERSIONS.windows(2) {
            assert!(pair[0].number < pair[1].number, "versions ascend");
        }
    }
}
