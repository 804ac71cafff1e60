//! How a batch of deltas becomes few statements: the deltas are summed per user (rows of
//! multi-row `UPDATE users` joined to a list of values) and per (user, torrent) (rows of
//! multi-row upserts into `user_torrents`), [`ROWS_PER_STATEMENT`] at a time, after one
//! look-up of the batch's users and torrents (`IN` lists of [`KEYS_PER_LOOKUP`]) says which
//! still exist. Written per delta, a batch of 50,000 cost 150,000 statements; this way it
//! costs a few hundred, which is what lets the writer keep up with a busy tracker on the
//! same core.
//!
//! Pure: the statements are run by `database.rs`; this file only plans them.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::column::stored;
use crate::model::{Delta, InfoHashBytes, Written};

/// Rows in one multi-row statement (7 binds each: 7,000 per statement, well inside every
/// driver's limit of 32,766 or 65,535).
pub const ROWS_PER_STATEMENT: usize = 1000;
/// Keys in one `IN (...)` look-up.
pub const KEYS_PER_LOOKUP: usize = 5000;

/// The distinct torrents and users a batch names, for the look-ups.
pub fn keys(batch: &[Delta]) -> (Vec<InfoHashBytes>, Vec<i64>) {
    let torrents: HashSet<InfoHashBytes> = batch.iter().map(|d| d.torrent).collect();
    let users: HashSet<i64> = batch.iter().map(|d| d.user_id).collect();
    (torrents.into_iter().collect(), users.into_iter().collect())
}

/// The four counters a write adds, as stored.
pub type Counters = [i64; 4];

fn add(into: &mut Counters, d: &Delta) {
    for (sum, v) in into
        .iter_mut()
        .zip([d.uploaded, d.downloaded, d.seed_seconds, d.leech_seconds])
    {
        *sum = sum.saturating_add(stored(v));
    }
}

/// What to write, once the look-ups said which users and torrents exist.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Per user: what to add to their totals (ordered, so that concurrent writers lock
    /// rows in the same order).
    pub totals: BTreeMap<i64, Counters>,
    /// Per (user, torrent id): what to add to their row.
    pub rows: BTreeMap<(i64, i64), Counters>,
    /// (user, torrent id) completed by this batch.
    pub snatches: Vec<(i64, i64)>,
    /// The counts of the answer, but `new_snatches` (known only once marked).
    pub written: Written,
}

/// Sums `batch` per user and per (user, torrent), leaving out deltas of users that no
/// longer exist, and keeping only the totals of those whose torrent no longer exists.
pub fn plan(batch: &[Delta], users: &HashSet<i64>, torrents: &HashMap<InfoHashBytes, i64>) -> Plan {
    let mut p = Plan::default();
    let mut snatched = HashSet::new();
    for d in batch {
        if !users.contains(&d.user_id) {
            p.written.without_user += 1;
            continue;
        }
        p.written.applied += 1;
        add(p.totals.entry(d.user_id).or_default(), d);
        let Some(&torrent_id) = torrents.get(&d.torrent) else {
            p.written.without_torrent += 1;
            continue;
        };
        add(p.rows.entry((d.user_id, torrent_id)).or_default(), d);
        if d.completed && snatched.insert((d.user_id, torrent_id)) {
            p.snatches.push((d.user_id, torrent_id));
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_are_summed_per_user_and_row_and_missing_keys_counted() {
        let d = |user_id, t: u8, up, completed| Delta {
            user_id,
            torrent: [t; 20],
            uploaded: up,
            downloaded: 1,
            seed_seconds: 2,
            leech_seconds: 3,
            completed,
        };
        let batch = [
            d(1, 1, 10, false),
            d(1, 1, 5, true),
            d(1, 1, 1, true),
            d(1, 2, 7, false),
            d(1, 9, 100, false),
            d(2, 1, 50, false),
        ];
        let users = HashSet::from([1]);
        let torrents = HashMap::from([([1; 20], 11), ([2; 20], 12)]);
        let p = plan(&batch, &users, &torrents);
        assert_eq!(p.totals, BTreeMap::from([(1, [123, 5, 10, 15])]));
        assert_eq!(
            p.rows,
            BTreeMap::from([((1, 11), [16, 3, 6, 9]), ((1, 12), [7, 1, 2, 3])])
        );
        assert_eq!(p.snatches, vec![(1, 11)], "one snatch per row");
        assert_eq!(
            (
                p.written.applied,
                p.written.without_user,
                p.written.without_torrent
            ),
            (5, 1, 1)
        );
        let (hashes, ids) = keys(&batch);
        assert_eq!((hashes.len(), ids.len()), (3, 2));
    }
}
