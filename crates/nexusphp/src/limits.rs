//! NexusPHP's numbers: the interval bands by torrent age, the wait and download-slot
//! rules by ratio, and the cheater checks by upload speed (`public/announce.php` and
//! `include/functions_announce.php` at 1.10.3). Pure functions, each tested against the
//! line it comes from.

use crate::model::{Settings, MIN_ANNOUNCE_WAIT};

/// The band `interval` is drawn from for a torrent `age` seconds old
/// (`public/announce.php:243-252`): with `i1, i2, i3` the three intervals, `[i1/2,
/// (i1+i2)/2]` when young, `[(i1+i2)/2, (i2+i3)/2]` from `annintertwoage` days and
/// `[(i2+i3)/2, i3]` from `anninterthreeage` days; an age or interval of 0, or an interval
/// not above 300, leaves its band out.
pub fn interval_band(s: &Settings, age: i64) -> (u32, u32) {
    let (i1, i2, i3) = (
        u64::from(s.announce_interval),
        u64::from(s.annintertwo),
        u64::from(s.anninterthree),
    );
    // PHP's `/` gives a float that `mt_rand` truncates.
    let one_begin = i1 / 2;
    let one_end = (i1 + i2) / 2;
    let two_end = (i2 + i3) / 2;
    let old = |days: u32, interval: u32| {
        days != 0 && interval > MIN_ANNOUNCE_WAIT && age >= i64::from(days) * 86_400
    };
    let band = if old(s.anninterthreeage, s.anninterthree) {
        (two_end, i3)
    } else if old(s.annintertwoage, s.annintertwo) {
        (one_end, two_end)
    } else {
        (one_begin, one_end)
    };
    let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    (clamp(band.0), clamp(band.1))
}

/// An interval drawn from the band (PHP's `mt_rand(min, max)`; a band given upside down by
/// odd settings is drawn from as `min..=max` of the two).
pub fn draw_interval(band: (u32, u32)) -> u32 {
    let (lo, hi) = (band.0.min(band.1), band.0.max(band.1));
    fastrand::u32(lo..=hi)
}

/// 10 GiB: below it the wait and slot rules leave a member alone (`public/announce.php:396`).
const TEN_GIB: f64 = 10.0 * 1024.0 * 1024.0 * 1024.0;

/// The wait rule (`public/announce.php:397-411`, `main.waitsystem`): the hours a member of
/// this ratio waits after a torrent is added, when they downloaded more than 10 GiB.
pub fn wait_hours(downloaded: u64, ratio: f64) -> u32 {
    if downloaded as f64 <= TEN_GIB {
        return 0;
    }
    match ratio {
        r if r < 0.4 => 24,
        r if r < 0.5 => 12,
        r if r < 0.6 => 6,
        r if r < 0.8 => 3,
        _ => 0,
    }
}

/// Whether the wait rule refuses a new client on a torrent `age` seconds old.
///
/// NexusPHP compares the age **in seconds** with the wait **in hours**
/// (`public/announce.php:401-408`), so a torrent is refused only while it is younger than
/// that many seconds; shoal keeps the comparison as it is.
pub fn wait_refuses(downloaded: u64, ratio: f64, age: i64) -> bool {
    age < i64::from(wait_hours(downloaded, ratio))
}

/// The download slots of a member (`public/announce.php:412-426`, `main.maxdlsystem`):
/// `None` for no limit (10 GiB downloaded or less, or a ratio of 0.95 or more).
pub fn download_slots(downloaded: u64, ratio: f64) -> Option<u32> {
    if downloaded as f64 <= TEN_GIB {
        return None;
    }
    match ratio {
        r if r < 0.5 => Some(1),
        r if r < 0.65 => Some(2),
        r if r < 0.8 => Some(3),
        r if r < 0.95 => Some(4),
        _ => None,
    }
}

/// `mkprettytime` (`include/functions.php:2208-2231`): the wait left as NexusPHP writes it,
/// `m:ss`, `h:mm:ss`, or `<d>day(s)hh:mm:ss` (the announce loads no language file, so the
/// English fallback).
pub fn pretty_time(secs: i64) -> String {
    let s = secs.max(0);
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}day(s){h:02}:{m:02}:{sec:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{sec:02}")
    } else {
        format!("{m}:{sec:02}")
    }
}

/// What the cheater checks find (`check_cheater`, `include/functions_announce.php:112-190`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cheat {
    /// Nothing.
    None,
    /// A `cheaters` row (or a hit on this member's row of the last 24 h); still served and
    /// credited.
    Suspect(&'static str),
    /// The account is disabled (`users.enabled = 'no'`), a `cheaters` row, the announce
    /// refused.
    Disable,
}

/// The comment of the disabling `cheaters` row.
pub const DISABLED_COMMENT: &str = "User account was automatically disabled by system";

/// `check_cheater`: `uploaded` bytes in `secs` seconds since the client's last announce,
/// `leechers` on the torrent, `level` = `security.cheaterdet` (not 0), `max_mbps` =
/// `system.maximum_upload_speed`.
pub fn cheater(uploaded: u64, secs: u64, leechers: u32, level: u32, max_mbps: f64) -> Cheat {
    const GIB: u64 = 1 << 30;
    if secs == 0 || level == 0 {
        return Cheat::None;
    }
    let speed = uploaded as f64 / secs as f64;
    let level_f = f64::from(level);
    let must = max_mbps * 1024.0 * 1024.0 / 8.0;
    if uploaded > GIB && speed > must / level_f {
        return Cheat::Disable;
    }
    if uploaded > GIB && speed > must / 2.0 / level_f {
        return Cheat::Suspect("Abnormally high uploading rate");
    }
    if level > 1 {
        if uploaded > GIB && speed > 1_048_576.0 && f64::from(leechers) < 2.0 * level_f {
            return Cheat::Suspect("User is uploading fast when there is few leechers");
        }
        if uploaded > 10_485_760 && speed > 102_400.0 && leechers == 0 {
            return Cheat::Suspect("User is uploading when there is no leecher");
        }
    }
    Cheat::None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `public/announce.php:243-252` with `settings.default.php:18-22`.
    #[test]
    fn the_bands_by_age() {
        let s = Settings::default();
        let day = 86_400;
        assert_eq!(interval_band(&s, 0), (900, 2250));
        assert_eq!(interval_band(&s, 7 * day - 1), (900, 2250));
        assert_eq!(interval_band(&s, 7 * day), (2250, 3150));
        assert_eq!(interval_band(&s, 30 * day), (3150, 3600));
        let mut off = s.clone();
        off.anninterthreeage = 0;
        assert_eq!(
            interval_band(&off, 90 * day),
            (2250, 3150),
            "age 0: band left out"
        );
        off.annintertwo = 300;
        assert_eq!(
            interval_band(&off, 90 * day),
            (900, 1050),
            "not above 300: left out"
        );
        for _ in 0..100 {
            let i = draw_interval((900, 2250));
            assert!((900..=2250).contains(&i));
        }
    }

    /// `public/announce.php:396-411`.
    #[test]
    fn the_wait_by_ratio_compares_seconds_with_hours() {
        let gib = 1u64 << 30;
        assert_eq!(wait_hours(10 * gib, 0.1), 0, "10 GiB exactly: no wait");
        assert_eq!(wait_hours(11 * gib, 0.39), 24);
        assert_eq!(wait_hours(11 * gib, 0.4), 12);
        assert_eq!(wait_hours(11 * gib, 0.59), 6);
        assert_eq!(wait_hours(11 * gib, 0.79), 3);
        assert_eq!(wait_hours(11 * gib, 0.8), 0);
        assert!(wait_refuses(11 * gib, 0.1, 23), "23 seconds old < 24");
        assert!(
            !wait_refuses(11 * gib, 0.1, 3600),
            "an hour old: NexusPHP lets it through"
        );
    }

    /// `public/announce.php:412-426`.
    #[test]
    fn the_slots_by_ratio() {
        let gib = 1u64 << 30;
        assert_eq!(download_slots(10 * gib, 0.1), None);
        assert_eq!(download_slots(11 * gib, 0.49), Some(1));
        assert_eq!(download_slots(11 * gib, 0.5), Some(2));
        assert_eq!(download_slots(11 * gib, 0.79), Some(3));
        assert_eq!(download_slots(11 * gib, 0.94), Some(4));
        assert_eq!(download_slots(11 * gib, 0.95), None);
    }

    /// `include/functions_announce.php:112-190` with `security.cheaterdet` 1 and 3 and
    /// `system.maximum_upload_speed` 8000 (1000 MiB/s).
    #[test]
    fn the_cheater_checks() {
        let gib = 1u64 << 30;
        let mib = 1u64 << 20;
        // 1000 MiB/s is the line at level 1.
        assert_eq!(cheater(2 * gib, 1, 50, 1, 8000.0), Cheat::Disable);
        assert_eq!(
            cheater(600 * mib * 10, 10, 50, 1, 8000.0),
            Cheat::Suspect("Abnormally high uploading rate")
        );
        assert_eq!(cheater(400 * mib * 10, 10, 50, 1, 8000.0), Cheat::None);
        assert_eq!(
            cheater(gib, 1, 50, 1, 8000.0),
            Cheat::None,
            "1 GiB exactly: not more"
        );
        // Level 3: a third of the line, and the leecher rules.
        assert_eq!(cheater(400 * mib * 10, 10, 50, 3, 8000.0), Cheat::Disable);
        assert_eq!(
            cheater(2 * gib, 1000, 5, 3, 8000.0),
            Cheat::Suspect("User is uploading fast when there is few leechers")
        );
        assert_eq!(
            cheater(20 * mib, 100, 0, 3, 8000.0),
            Cheat::Suspect("User is uploading when there is no leecher")
        );
        assert_eq!(
            cheater(20 * mib, 100, 0, 1, 8000.0),
            Cheat::None,
            "level 1 skips those"
        );
    }

    #[test]
    fn pretty_times() {
        assert_eq!(pretty_time(59), "0:59");
        assert_eq!(pretty_time(3600 + 61), "1:01:01");
        assert_eq!(pretty_time(86_400 + 1), "1day(s)00:00:01");
    }
}
