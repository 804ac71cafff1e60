//! One test's database of a site's schema (UNIT3D's, Gazelle's) on the shared MariaDB of
//! the test binary: its URL, the test's own connections, and the few queries a test runs
//! to set rows up and read them back. Included by each site's test support beside
//! `servers`.

use sqlx::mysql::{MySqlPool, MySqlRow};
use sqlx::Row;

use super::servers::{self, Server};

/// One test's database.
pub struct SiteDb {
    pub server: &'static Server,
    /// `mysql://shoal:pw@127.0.0.1:PORT/NAME`.
    pub url: String,
    /// The test's own connections.
    pub pool: MySqlPool,
}

impl SiteDb {
    /// A new, empty database `name` (unique per test binary) on the MariaDB of this test
    /// binary, whose `sql_mode` is strict (MariaDB's default, as the sites' own setups
    /// have it); `None` when the real-server tests are skipped on this machine.
    pub async fn create(name: &str) -> Option<SiteDb> {
        let server = servers::mariadb()?;
        let url = server.create_database(name);
        let pool = MySqlPool::connect(&url)
            .await
            .expect("connect to the test database");
        let mode: String = sqlx::query_scalar("SELECT CAST(@@SESSION.sql_mode AS CHAR)")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert!(mode.contains("STRICT_TRANS_TABLES"), "not strict: {mode}");
        Some(SiteDb { server, url, pool })
    }

    /// This database once `sql` has run on it.
    pub async fn with(self, sql: &str) -> SiteDb {
        self.run(sql).await;
        self
    }

    /// Runs `sql` (several statements allowed).
    pub async fn run(&self, sql: &str) {
        sqlx::raw_sql(sql)
            .execute(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("{e}\nin: {sql}"));
    }

    /// The rows a query answers.
    pub async fn rows(&self, sql: &str) -> Vec<MySqlRow> {
        sqlx::query(sql)
            .fetch_all(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("{e}\nin: {sql}"))
    }

    /// One number a query answers.
    pub async fn number(&self, sql: &str) -> i64 {
        let row = sqlx::query(sql).fetch_one(&self.pool).await.unwrap();
        row.try_get::<i64, _>(0).unwrap()
    }

    /// Asserts that a query answers the number `expected` (the query named if not).
    pub async fn expect(&self, sql: &str, expected: i64) {
        assert_eq!(self.number(sql).await, expected, "{sql}");
    }
}
