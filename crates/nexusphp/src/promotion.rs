//! Promotions: the state in force for a torrent (its own `sp_state` with its time limit,
//! or the site-wide one of `torrents_state`) and the factors credited
//! (`getDataTraffic`, `include/globalfunctions.php:1032-1139` at 1.10.3).

use crate::model::{GlobalPromotion, Settings, Torrent, CLASS_VIP};

/// `Torrent::PROMOTION_NORMAL` (`app/Models/Torrent.php:77`).
pub const NORMAL: u8 = 1;

/// The (upload, download) multipliers of a promotion state (`app/Models/Torrent.php:85-125`):
/// 1 normal, 2 free, 3 2x, 4 2x free, 5 50%, 6 2x 50%, 7 30%; `None` for a state NexusPHP
/// does not define.
pub fn multipliers(state: u8) -> Option<(f64, f64)> {
    Some(match state {
        1 => (1.0, 1.0),
        2 => (1.0, 0.0),
        3 => (2.0, 1.0),
        4 => (2.0, 0.0),
        5 => (1.0, 0.5),
        6 => (2.0, 0.5),
        7 => (1.0, 0.3),
        _ => return None,
    })
}

/// The site-wide promotion in force at `now` (`TorrentState::resolveTimeline`,
/// `app/Models/TorrentState.php:98-160`): among the rows whose state is not normal, taken
/// with a `begin` first (by `begin`) then without (each by id), the first that has begun
/// and has not ended; normal when none.
pub fn global_state(rows: &[GlobalPromotion], now: i64) -> u8 {
    let mut rows: Vec<&GlobalPromotion> = rows.iter().filter(|r| r.state != NORMAL).collect();
    rows.sort_by_key(|r| (r.begin.is_none(), r.begin, r.id));
    rows.iter()
        .find(|r| r.begin.is_none_or(|b| b <= now) && r.deadline.is_none_or(|d| d >= now))
        .map_or(NORMAL, |r| r.state)
}

/// The torrent's own state at `now`, its time limits applied at the moment they pass.
///
/// NexusPHP's cleanup applies them (`include/cleanup.php:14-65`, priority 3): a deadline
/// (`promotion_time_type = 2`) past sets normal; with type 0 a state older than its
/// `torrent.expire<x>` days becomes `torrent.<x>become` (1..=6, else normal), again and
/// again as the cleanup runs. shoal applies both at their time instead of at the next
/// cleanup (`docs/nexusphp.md`, where shoal differs).
pub fn torrent_state(t: &Torrent, s: &Settings, now: i64) -> u8 {
    match t.promotion_time_type {
        2 if t.promotion_until.is_some_and(|until| until < now) => NORMAL,
        0 => {
            let age = now.saturating_sub(t.added) as f64;
            let mut state = t.sp_state;
            // A chain of expiries, each applied when the one before has (cycles stop at
            // the bound: the cleanup would flip such a torrent on every run).
            for _ in 0..8 {
                let Some(e) = s.expiry.get(usize::from(state)) else {
                    break;
                };
                // `(int)($days * 86400)` seconds, and `added <` that long ago.
                let secs = (e.days * 86400.0).trunc();
                if secs <= 0.0 || age <= secs {
                    break;
                }
                let next = if (1..=6).contains(&e.becomes) {
                    e.becomes
                } else {
                    NORMAL
                };
                if next == state {
                    break;
                }
                state = next;
            }
            state
        }
        _ => t.sp_state,
    }
}

/// What one announce is credited: multipliers of its actual bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Factors {
    pub upload: f64,
    pub download: f64,
}

/// The factors of `user_id` (of `class`) on torrent `t` (`getDataTraffic`):
///
/// - the state is the site-wide one when it is not normal, else the torrent's; a state
///   NexusPHP does not define counts as normal (`GF:1045-1060`);
/// - the uploader, with `torrent.uploaderdouble` other than 1, gets at least that upload
///   factor (`GF:1061-1070`);
/// - a VIP (class 10 exactly) is charged no download (`GF:1075-1081`).
pub fn factors(global: u8, own: u8, t: &Torrent, user_id: u32, class: u8, s: &Settings) -> Factors {
    let state = if global != NORMAL { global } else { own };
    let (mut upload, mut download) = multipliers(state).unwrap_or((1.0, 1.0));
    if t.owner == user_id && s.uploader_double != 1.0 {
        upload = upload.max(s.uploader_double);
    }
    if class == CLASS_VIP {
        download = 0.0;
    }
    Factors { upload, download }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AgeExpiry;

    fn torrent(sp_state: u8, time_type: u8, until: Option<i64>, added: i64) -> Torrent {
        Torrent {
            id: 1,
            owner: 7,
            sp_state,
            promotion_time_type: time_type,
            promotion_until: until,
            added,
            ..Torrent::default()
        }
    }

    /// `app/Models/Torrent.php:85-125`: the seven states.
    #[test]
    fn each_state_has_nexusphps_multipliers() {
        let s = Settings::default();
        let expect = [
            (1, 1.0, 1.0),
            (2, 1.0, 0.0),
            (3, 2.0, 1.0),
            (4, 2.0, 0.0),
            (5, 1.0, 0.5),
            (6, 2.0, 0.5),
            (7, 1.0, 0.3),
            // `include/globalfunctions.php:1057-1060`: an unknown state is normal.
            (9, 1.0, 1.0),
        ];
        for (state, up, down) in expect {
            let f = factors(NORMAL, state, &torrent(state, 1, None, 0), 1, 1, &s);
            assert_eq!((f.upload, f.download), (up, down), "state {state}");
        }
    }

    /// `include/globalfunctions.php:1050-1056`: the site-wide state, when not normal,
    /// replaces the torrent's.
    #[test]
    fn the_site_wide_promotion_replaces_the_torrents() {
        let s = Settings::default();
        let t = torrent(3, 1, None, 0);
        let f = factors(2, 3, &t, 1, 1, &s);
        assert_eq!((f.upload, f.download), (1.0, 0.0), "free, not 2x");
    }

    /// `include/globalfunctions.php:1061-1070` and `:1075-1081`.
    #[test]
    fn the_uploader_and_vips() {
        let mut s = Settings::default();
        let t = torrent(3, 1, None, 0);
        assert_eq!(
            factors(NORMAL, 1, &t, 7, 1, &s).upload,
            1.0,
            "uploaderdouble 1"
        );
        s.uploader_double = 1.5;
        assert_eq!(factors(NORMAL, 1, &t, 7, 1, &s).upload, 1.5);
        assert_eq!(factors(NORMAL, 3, &t, 7, 1, &s).upload, 2.0, "the larger");
        assert_eq!(
            factors(NORMAL, 1, &t, 8, 1, &s).upload,
            1.0,
            "not the owner"
        );
        assert_eq!(factors(NORMAL, 1, &t, 8, CLASS_VIP, &s).download, 0.0);
        assert_eq!(
            factors(NORMAL, 1, &t, 8, CLASS_VIP + 1, &s).download,
            1.0,
            "VIP exactly"
        );
    }

    /// `app/Models/TorrentState.php:98-160`.
    #[test]
    fn the_global_promotion_in_force() {
        let rows = [
            GlobalPromotion {
                id: 1,
                state: 2,
                begin: None,
                deadline: None,
            },
            GlobalPromotion {
                id: 2,
                state: 3,
                begin: Some(100),
                deadline: Some(200),
            },
            GlobalPromotion {
                id: 3,
                state: 1,
                begin: Some(0),
                deadline: None,
            },
        ];
        // Rows with a begin come first: 2x while it runs, then the open-ended free.
        assert_eq!(global_state(&rows, 150), 3);
        assert_eq!(global_state(&rows, 50), 2);
        assert_eq!(global_state(&rows, 250), 2);
        assert_eq!(
            global_state(&rows[1..], 250),
            NORMAL,
            "ended; a normal row counts for nothing"
        );
        assert_eq!(
            global_state(&rows[1..], 200),
            3,
            "the deadline itself still counts"
        );
    }

    /// `include/cleanup.php:59-65`: a deadline past is normal.
    #[test]
    fn a_deadline_ends_the_promotion() {
        let s = Settings::default();
        let t = torrent(2, 2, Some(1_000), 0);
        assert_eq!(torrent_state(&t, &s, 999), 2);
        assert_eq!(torrent_state(&t, &s, 1_001), NORMAL);
        assert_eq!(
            torrent_state(&torrent(2, 1, None, 0), &s, i64::MAX / 2),
            2,
            "permanent"
        );
    }

    /// `include/cleanup.php:14-57` with the defaults of `settings.default.php:327-345`.
    #[test]
    fn age_expiries_chain() {
        let mut s = Settings::default();
        let day = 86_400;
        // Free for 60 days, then normal.
        assert_eq!(
            torrent_state(&torrent(2, 0, None, 0), &s, 60 * day),
            2,
            "not yet: strictly older"
        );
        assert_eq!(
            torrent_state(&torrent(2, 0, None, 0), &s, 60 * day + 1),
            NORMAL
        );
        // Free becomes 50% after 10 days, 50% becomes 2x after 20: both passed at 31 days.
        s.expiry[2] = AgeExpiry {
            days: 10.0,
            becomes: 5,
        };
        s.expiry[5] = AgeExpiry {
            days: 20.0,
            becomes: 3,
        };
        assert_eq!(torrent_state(&torrent(2, 0, None, 0), &s, 15 * day), 5);
        assert_eq!(torrent_state(&torrent(2, 0, None, 0), &s, 31 * day), 3);
        // A `become` of 7 (30%) is not one the cleanup sets: normal.
        s.expiry[3] = AgeExpiry {
            days: 1.0,
            becomes: 7,
        };
        assert_eq!(torrent_state(&torrent(3, 0, None, 0), &s, 2 * day), NORMAL);
    }
}
