//! The records NexusPHP's cleanup reads from the site's Redis: each (member, torrent) that
//! announced, at most once per `main.autoclean_interval_one` seconds, added to the three
//! hash "batches" from which the cleanup computes seeding bonus, the members'
//! `seedtime`/`leechtime` and the torrents' recounted `seeders`/`leechers`
//! (`public/announce.php:631-635`, `app/Repositories/CleanupRepository.php:42-54`,
//! `:163-193`; lines at NexusPHP 1.10.3, as `docs/nexusphp.md` cites them; 1.8.14's script
//! is the same).
//!
//! What NexusPHP's announce leaves in Redis, and so what [`Cleanup::write`] leaves:
//!
//! - the lock `record_batch_lock:<uid>:<tid>`, value the announce's Unix time, set only if
//!   absent, expiring `autoclean_interval_one` seconds after the announce; a (member,
//!   torrent) whose lock is held is not recorded (so a site whose announces go partly to
//!   PHP, while switching, records each pair once);
//! - for each of [`BATCH_KEYS`], in that order: the key names a hash (`<key>:<Ymd_His>`);
//!   when the key is absent it is created naming `<key>:<the announce's local time as
//!   Ymd_His>` (PHP's `date('Ymd_His')`, `CleanupRepository.php:196-199`, in the site's PHP
//!   time zone, `[nexusphp] time_zone`); the hash's field (the member's id for the first
//!   two, the torrent's for the third) is set to the announce's Unix time. The second and
//!   third keys, and the hashes they name, expire after `autoclean_interval_four + three +
//!   one` seconds (`CleanupRepository.php:233-239`) when this write created them; the first
//!   key and its hash never expire (the cleanup keeps that batch and prunes it).
//!
//! One script call per [`PER_CALL`] records does both, lock and batches, atomically: a call
//! that timed out either ran whole (its locks then stop a retry from recording twice) or
//! not at all. Every Redis operation is bounded by [`TIMEOUT`]; a failed call's records
//! and the rest of the batch go back to the site's pending writes, for the next batch
//! (one per (member, torrent), the newest). A record written after its window has passed
//! (Redis was away longer) takes no lock, as PHP's would have expired by then. Records
//! still waiting when shoal stops are not kept: the members' next announces record again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError, Script};

use crate::model::Settings;
use crate::site::Site;

/// The cleanup's batch keys, in the order NexusPHP's script visits them: seeding bonus
/// (field: member), seeding and leeching time (field: member), the torrents' figures
/// (field: torrent).
pub const BATCH_KEYS: [&str; 3] = [
    "batch_key:user_seed_bonus",
    "batch_key:user_seeding_leeching_time",
    "batch_key:torrent_seeders_etc",
];

/// Connecting, and each call, give up after this long.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// Records in one script call.
pub const PER_CALL: usize = 1000;

/// Per record, ARGV holds: member, torrent, announce time, the lock's seconds left (0: its
/// window has passed, no lock is taken), the batch name's suffix. ARGV[1] is the batches'
/// lifetime. KEYS: the three batch keys, then each record's lock key.
const SCRIPT: &str = r#"
local life = ARGV[1]
local added = 0
for r = 4, #KEYS do
    local a = 2 + (r - 4) * 5
    local member, torrent, at = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    local ttl, suffix = ARGV[a + 3], ARGV[a + 4]
    local free = true
    if tonumber(ttl) > 0 then
        free = redis.call("SET", KEYS[r], at, "NX", "EX", ttl)
    end
    if free then
        local fields = {member, member, torrent}
        for k = 1, 3 do
            local name = redis.call("GET", KEYS[k])
            local created = false
            if not name then
                name = KEYS[k] .. ":" .. suffix
                redis.call("SET", KEYS[k], name)
                created = true
                if k > 1 then
                    redis.call("EXPIRE", KEYS[k], life)
                end
            end
            redis.call("HSET", name, fields[k], at)
            if created and k > 1 then
                redis.call("EXPIRE", name, life)
            end
        end
        added = added + 1
    end
end
return added
"#;

/// How long the lock and the batches live (from the site's settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    /// `main.autoclean_interval_one`.
    pub lock: u32,
    /// `main.autoclean_interval_four + three + one`.
    pub batch: u64,
}

impl Lifetimes {
    pub fn of(s: &Settings) -> Lifetimes {
        Lifetimes {
            lock: s.autoclean_interval_one,
            batch: u64::from(s.autoclean_interval_four)
                + u64::from(s.autoclean_interval_three)
                + u64::from(s.autoclean_interval_one),
        }
    }
}

/// A write that stopped: why, and the records it did not write (the failed call's and
/// those after it).
#[derive(Debug)]
pub struct Unwritten {
    pub error: RedisError,
    pub records: Vec<(u32, u32, i64)>,
}

/// The site's Redis, where the cleanup's records go.
pub struct Cleanup {
    client: redis::Client,
    /// The URL, its password masked (for logs).
    shown: String,
    /// The site's PHP time zone, seconds east of UTC.
    offset: i64,
    script: Script,
    conn: Mutex<Option<MultiplexedConnection>>,
    failing: AtomicBool,
}

impl Cleanup {
    /// The site's Redis at `url` (not connected yet); `time_zone` an offset (`+08:00`).
    pub fn new(url: &str, time_zone: &str) -> Result<Cleanup, RedisError> {
        Ok(Cleanup {
            client: redis::Client::open(url)?,
            shown: shoal_accounts::masked_url(url),
            offset: offset_seconds(time_zone),
            script: Script::new(SCRIPT),
            conn: Mutex::new(None),
            failing: AtomicBool::new(false),
        })
    }

    /// The URL, its password masked.
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// `PING`, within [`TIMEOUT`] (the start says whether Redis answers).
    pub async fn ping(&self) -> Result<(), RedisError> {
        let mut conn = self.connection().await?;
        let pong = bounded(redis::cmd("PING").query_async::<String>(&mut conn)).await;
        if pong.is_err() {
            *self.conn.lock() = None;
        }
        pong.map(drop)
    }

    /// Writes `records` ((member, torrent, announce time), oldest first) as NexusPHP's
    /// announce would have at their times, `now` being the time of this write: the number
    /// recorded (those whose lock was free), or what is left when a call failed.
    pub async fn write(
        &self,
        records: &[(u32, u32, i64)],
        life: Lifetimes,
        now: i64,
    ) -> Result<usize, Unwritten> {
        let mut added = 0;
        for (i, chunk) in records.chunks(PER_CALL).enumerate() {
            match self.call(chunk, life, now).await {
                Ok(n) => added += n,
                Err(error) => {
                    *self.conn.lock() = None;
                    return Err(Unwritten {
                        error,
                        records: records[i * PER_CALL..].to_vec(),
                    });
                }
            }
        }
        Ok(added)
    }

    /// Writes a batch's records after its rows were written; what is not written goes
    /// back to the site's pending writes. Logged once per outage.
    pub async fn flush(&self, site: &Site, records: Vec<(u32, u32, i64)>) {
        if records.is_empty() {
            return;
        }
        let life = Lifetimes::of(&site.settings());
        match self.write(&records, life, (site.clock)()).await {
            Ok(added) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::warn!(
                        "the NexusPHP site's Redis ({}) is back: the cleanup's records written",
                        self.shown
                    );
                }
                tracing::debug!(added, of = records.len(), "NexusPHP cleanup records");
            }
            Err(u) => {
                let kept = u.records.len();
                site.put_back_records(u.records);
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        "writing the NexusPHP cleanup's records to Redis ({}) failed: {}; \
                         {kept} kept and tried again with each batch (lost if shoal stops \
                         first)",
                        self.shown,
                        u.error
                    );
                } else {
                    tracing::debug!(kept, "NexusPHP cleanup records still not written");
                }
            }
        }
    }

    async fn call(
        &self,
        chunk: &[(u32, u32, i64)],
        life: Lifetimes,
        now: i64,
    ) -> Result<usize, RedisError> {
        let mut inv = self.script.prepare_invoke();
        for key in BATCH_KEYS {
            inv.key(key);
        }
        inv.arg(life.batch);
        for &(uid, tid, at) in chunk {
            inv.key(format!("record_batch_lock:{uid}:{tid}"));
            let left = i64::from(life.lock) - (now - at);
            inv.arg(uid)
                .arg(tid)
                .arg(at)
                .arg(left.clamp(0, i64::from(life.lock)))
                .arg(ymd_his(at + self.offset));
        }
        let mut conn = self.connection().await?;
        bounded(inv.invoke_async::<usize>(&mut conn)).await
    }

    /// The connection, opened (within [`TIMEOUT`]) if there is none.
    async fn connection(&self) -> Result<MultiplexedConnection, RedisError> {
        if let Some(c) = self.conn.lock().clone() {
            return Ok(c);
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT));
        let opening = self
            .client
            .get_multiplexed_async_connection_with_config(&config);
        let c = bounded(opening).await?;
        *self.conn.lock() = Some(c.clone());
        Ok(c)
    }
}

/// `call` within [`TIMEOUT`].
async fn bounded<T>(
    call: impl std::future::Future<Output = Result<T, RedisError>>,
) -> Result<T, RedisError> {
    match tokio::time::timeout(TIMEOUT, call).await {
        Ok(r) => r,
        Err(_) => Err(RedisError::from((
            redis::ErrorKind::Io,
            "no answer from Redis",
            format!("within {TIMEOUT:?}"),
        ))),
    }
}

/// Seconds east of UTC of an offset `+hh:mm` / `-hh:mm` (0 for anything else; the
/// config's check refuses it).
fn offset_seconds(tz: &str) -> i64 {
    if !crate::config::is_offset(tz) {
        return 0;
    }
    let (h, m): (i64, i64) = (tz[1..3].parse().unwrap_or(0), tz[4..6].parse().unwrap_or(0));
    let s = h * 3600 + m * 60;
    if tz.starts_with('-') {
        -s
    } else {
        s
    }
}

/// PHP's `date('Ymd_His')` of local seconds since the epoch: `20241020_234740`.
pub fn ymd_his(local: i64) -> String {
    let (days, secs) = (local.div_euclid(86_400), local.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (the proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}_{:02}{:02}{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::{offset_seconds, ymd_his, Lifetimes};
    use crate::model::Settings;

    #[test]
    fn the_batch_suffix_is_the_local_time_as_php_writes_it() {
        // 2024-10-20 15:47:40 UTC, 23:47:40 in Shanghai.
        let t = 1_729_439_260;
        assert_eq!(ymd_his(t), "20241020_154740");
        assert_eq!(ymd_his(t + offset_seconds("+08:00")), "20241020_234740");
        assert_eq!(ymd_his(t + offset_seconds("-03:30")), "20241020_121740");
        assert_eq!(ymd_his(0), "19700101_000000");
        assert_eq!(ymd_his(951_782_400), "20000229_000000", "a leap day");
        assert_eq!(ymd_his(-1), "19691231_235959");
    }

    #[test]
    fn the_batches_live_four_plus_three_plus_one() {
        // The installer's 3600, 7200 and 86400.
        let life = Lifetimes::of(&Settings::default());
        assert_eq!((life.lock, life.batch), (3600, 97_200));
    }
}
