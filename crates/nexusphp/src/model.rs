//! The site's rows as shoal holds them: the settings the announce reads, members,
//! torrents, the site-wide promotions, and the clients of each swarm, as loaded from
//! NexusPHP's tables (1.10.3, see `docs/nexusphp.md`) and as the polls replace them.
//!
//! Ids are the site's own. Byte counts are `u64` as clients report them (the tables keep
//! `bigint unsigned`). Times are Unix seconds; the loader converts the tables' `datetime`
//! columns in the site's time zone.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A v1 info hash (`torrents.info_hash`, `varbinary(20)`).
pub type InfoHash = [u8; 20];

/// The class of a VIP (`UC_VIP`, `include/core.php:47`): no download is charged, and the
/// slot and wait rules stop below it.
pub const CLASS_VIP: u8 = 10;

/// `TrackerRepository::MIN_ANNOUNCE_WAIT_SECOND` (`app/Repositories/TrackerRepository.php:31`):
/// the `min interval` sent, and the least time between a client's announces.
pub const MIN_ANNOUNCE_WAIT: u32 = 300;

/// The hit-and-run mode (`hr.mode`, `app/Models/HitAndRun.php:35-37`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HrMode {
    #[default]
    Disabled,
    /// Every torrent.
    Global,
    /// Torrents with `torrents.hr = 1`.
    Manual,
}

/// A promotion's end by the torrent's age (`torrent.expire<x>` days, `torrent.<x>become`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AgeExpiry {
    /// Days after `torrents.added`; 0: never.
    pub days: f64,
    /// The state it becomes (1..=6; anything else is normal, `include/cleanup.php:14-57`).
    pub becomes: u8,
}

/// The settings the announce reads (`settings` rows with `autoload = 'yes'`), with the
/// defaults a new site is installed with (`nexus/Install/settings.default.php`).
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// `basic.BASEURL` (may be empty: the request's host stands in).
    pub base_url: String,
    pub announce_interval: u32,
    pub annintertwoage: u32,
    pub annintertwo: u32,
    pub anninterthreeage: u32,
    pub anninterthree: u32,
    pub waitsystem: bool,
    pub maxdlsystem: bool,
    pub autoclean_interval_one: u32,
    /// `main.autoclean_interval_three` and `_four`: with `_one`, the lifetime of the
    /// cleanup's Redis batches (`app/Repositories/CleanupRepository.php:233-239`).
    pub autoclean_interval_three: u32,
    pub autoclean_interval_four: u32,
    /// `torrent.uploaderdouble`.
    pub uploader_double: f64,
    /// Indexed by promotion state 1..=7 (index 0 unused).
    pub expiry: [AgeExpiry; 8],
    pub approval_status_none_visible: bool,
    pub paid_torrent_enabled: bool,
    /// `authority.seebanned`.
    pub seebanned_class: u8,
    /// `security.cheaterdet` (0: off).
    pub cheaterdet: u32,
    /// `security.nodetect`.
    pub nodetect_class: u8,
    /// `system.maximum_upload_speed`, Mbit/s.
    pub maximum_upload_speed: f64,
    pub seed_box_enabled: bool,
    pub hr_mode: HrMode,
    pub hr_include_rate: f64,
}

impl Default for Settings {
    fn default() -> Self {
        let never = AgeExpiry {
            days: 0.0,
            becomes: 1,
        };
        let mut expiry = [never; 8];
        for (state, days) in [(5, 150.0), (2, 60.0), (3, 60.0), (4, 30.0), (6, 30.0)] {
            expiry[state] = AgeExpiry { days, becomes: 1 };
        }
        Settings {
            base_url: String::new(),
            announce_interval: 1800,
            annintertwoage: 7,
            annintertwo: 2700,
            anninterthreeage: 30,
            anninterthree: 3600,
            waitsystem: false,
            maxdlsystem: false,
            autoclean_interval_one: 3600,
            autoclean_interval_three: 7200,
            autoclean_interval_four: 86400,
            uploader_double: 1.0,
            expiry,
            approval_status_none_visible: true,
            paid_torrent_enabled: true,
            seebanned_class: 12,
            cheaterdet: 1,
            nodetect_class: 11,
            maximum_upload_speed: 8000.0,
            seed_box_enabled: false,
            hr_mode: HrMode::Disabled,
            hr_include_rate: 1.0,
        }
    }
}

/// The promotion states' setting names (`torrent.expire<name>`, `torrent.<name>become`).
const EXPIRY_NAMES: [(usize, &str); 7] = [
    (5, "halfleech"),
    (2, "free"),
    (3, "twoup"),
    (4, "twoupfree"),
    (6, "twouphalfleech"),
    (7, "thirtypercentleech"),
    (1, "normal"),
];

/// The settings rows shoal reads (the rest of the table is the site's).
pub fn setting_names() -> Vec<String> {
    let mut names: Vec<String> = [
        "basic.BASEURL",
        "main.announce_interval",
        "main.annintertwoage",
        "main.annintertwo",
        "main.anninterthreeage",
        "main.anninterthree",
        "main.waitsystem",
        "main.maxdlsystem",
        "main.autoclean_interval_one",
        "main.autoclean_interval_three",
        "main.autoclean_interval_four",
        "torrent.uploaderdouble",
        "torrent.approval_status_none_visible",
        "torrent.paid_torrent_enabled",
        "authority.seebanned",
        "security.cheaterdet",
        "security.nodetect",
        "system.maximum_upload_speed",
        "seed_box.enabled",
        "hr.mode",
        "hr.include_rate",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for (_, name) in EXPIRY_NAMES {
        names.push(format!("torrent.expire{name}"));
        names.push(format!("torrent.{name}become"));
    }
    names
}

/// PHP's reading of a number in a setting: leading blanks, then the longest number; an
/// empty or non-numeric value is 0 (as `(int)` and `intval` read it).
fn php_number(value: &str) -> f64 {
    let v = value.trim_start();
    let end = v
        .char_indices()
        .take_while(|(i, c)| {
            c.is_ascii_digit() || *c == '.' || (*i == 0 && (*c == '-' || *c == '+'))
        })
        .map(|(i, c)| i + c.len_utf8())
        .last()
        .unwrap_or(0);
    v[..end].parse().unwrap_or(0.0)
}

fn php_u32(value: &str) -> u32 {
    php_number(value).max(0.0).min(f64::from(u32::MAX)) as u32
}

impl Settings {
    /// The settings from `settings` rows (`name`, `value`); a row missing keeps its
    /// default, as NexusPHP's installer would have written it.
    pub fn from_rows<'a>(rows: impl IntoIterator<Item = (&'a str, &'a str)>) -> Settings {
        let rows: HashMap<&str, &str> = rows.into_iter().collect();
        let mut s = Settings::default();
        let get = |name: &str| rows.get(name).copied();
        let yes = |name: &str, default: bool| get(name).map_or(default, |v| v == "yes");
        let num = |name: &str, default: u32| get(name).map_or(default, php_u32);
        if let Some(v) = get("basic.BASEURL") {
            s.base_url = v.to_owned();
        }
        s.announce_interval = num("main.announce_interval", s.announce_interval);
        s.annintertwoage = num("main.annintertwoage", s.annintertwoage);
        s.annintertwo = num("main.annintertwo", s.annintertwo);
        s.anninterthreeage = num("main.anninterthreeage", s.anninterthreeage);
        s.anninterthree = num("main.anninterthree", s.anninterthree);
        s.waitsystem = yes("main.waitsystem", s.waitsystem);
        s.maxdlsystem = yes("main.maxdlsystem", s.maxdlsystem);
        s.autoclean_interval_one = num("main.autoclean_interval_one", s.autoclean_interval_one);
        s.autoclean_interval_three =
            num("main.autoclean_interval_three", s.autoclean_interval_three);
        s.autoclean_interval_four = num("main.autoclean_interval_four", s.autoclean_interval_four);
        if let Some(v) = get("torrent.uploaderdouble") {
            s.uploader_double = php_number(v);
        }
        s.approval_status_none_visible = yes(
            "torrent.approval_status_none_visible",
            s.approval_status_none_visible,
        );
        s.paid_torrent_enabled = yes("torrent.paid_torrent_enabled", s.paid_torrent_enabled);
        s.seebanned_class = num("authority.seebanned", u32::from(s.seebanned_class)).min(255) as u8;
        s.cheaterdet = num("security.cheaterdet", s.cheaterdet);
        s.nodetect_class = num("security.nodetect", u32::from(s.nodetect_class)).min(255) as u8;
        if let Some(v) = get("system.maximum_upload_speed") {
            s.maximum_upload_speed = php_number(v);
        }
        s.seed_box_enabled = yes("seed_box.enabled", s.seed_box_enabled);
        s.hr_mode = match get("hr.mode") {
            Some("global") => HrMode::Global,
            Some("manual") => HrMode::Manual,
            Some(_) => HrMode::Disabled,
            None => s.hr_mode,
        };
        if let Some(v) = get("hr.include_rate") {
            s.hr_include_rate = php_number(v);
        }
        for (state, name) in EXPIRY_NAMES {
            if let Some(v) = get(&format!("torrent.expire{name}")) {
                s.expiry[state].days = php_number(v);
            }
            if let Some(v) = get(&format!("torrent.{name}become")) {
                s.expiry[state].becomes = php_u32(v).min(255) as u8;
            }
        }
        s
    }
}

/// A member (`users`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct User {
    pub id: u32,
    pub passkey: String,
    pub class: u8,
    /// `enabled = 'yes'`.
    pub enabled: bool,
    /// `parked = 'yes'`.
    pub parked: bool,
    /// `downloadpos = 'yes'`.
    pub can_download: bool,
    /// The member's totals as last loaded (the wait and slot rules read the ratio).
    pub uploaded: u64,
    pub downloaded: u64,
    /// `donor = 'yes'`.
    pub donor: bool,
    /// `donoruntil`; `None` for null or the zero date (donor for ever).
    pub donor_until: Option<i64>,
    /// The family id last written (`clientselect`).
    pub client_select: u32,
    /// `showclienterror = 'yes'`.
    pub show_client_error: bool,
    pub tracker_url_id: u32,
}

impl User {
    /// `is_donor` (`include/globalfunctions.php:1317-1320`).
    pub fn is_donor(&self, now: i64) -> bool {
        self.donor && self.donor_until.is_none_or(|until| until >= now)
    }

    /// `uploaded / downloaded`, 1 with nothing downloaded (`public/announce.php:395`).
    pub fn ratio(&self) -> f64 {
        if self.downloaded > 0 {
            self.uploaded as f64 / self.downloaded as f64
        } else {
            1.0
        }
    }
}

/// A torrent (`torrents` joined with its category's `mode`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Torrent {
    pub id: u32,
    pub info_hash: InfoHash,
    pub size: u64,
    pub owner: u32,
    pub sp_state: u8,
    /// 0: the site-wide expiry by age, 1: permanent, 2: until `promotion_until`.
    pub promotion_time_type: u8,
    pub promotion_until: Option<i64>,
    pub added: i64,
    pub seeders: u32,
    pub leechers: u32,
    pub times_completed: u32,
    /// `banned = 'yes'`.
    pub banned: bool,
    /// `hr = 1`.
    pub hr: bool,
    /// 1: approved.
    pub approval_status: i32,
    pub price: i64,
    /// `categories.mode` (the section), `None` without a category.
    pub mode: Option<u32>,
}

/// A row of `torrents_state`: a site-wide promotion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalPromotion {
    pub id: u64,
    pub state: u8,
    pub begin: Option<i64>,
    pub deadline: Option<i64>,
}

/// A client on a torrent (`peers`), as shoal keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub user_id: u32,
    pub peer_id: [u8; 20],
    /// `peers.ip`: the address the announce came from.
    pub ip: IpAddr,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    pub port: u16,
    pub uploaded: u64,
    pub downloaded: u64,
    /// `to_go`.
    pub left: u64,
    pub seeder: bool,
    pub started: i64,
    pub last_action: i64,
    /// The announce before the last (`prev_action`), `None` after the first.
    pub prev_action: Option<i64>,
    pub agent: String,
    /// `finishedat` (Unix time of its `completed`, 0 before).
    pub finished_at: i64,
}

/// What a member has on a torrent that the announce reads (`snatched`, `hit_and_runs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnatchState {
    /// The member has a `snatched` row for the torrent.
    pub exists: bool,
    /// `snatched.downloaded` (actual bytes), as loaded plus what shoal added.
    pub downloaded: u64,
    /// `snatched.uploaded`.
    pub uploaded: u64,
    /// A `hit_and_runs` row exists.
    pub hit_and_run: bool,
}

/// Everything read from the site's database at start.
#[derive(Clone, Debug, Default)]
pub struct SiteData {
    pub settings: Settings,
    pub users: Vec<User>,
    pub torrents: Vec<Torrent>,
    /// (torrent id, client).
    pub peers: Vec<(u32, Peer)>,
    pub promotions: Vec<GlobalPromotion>,
    pub families: Vec<crate::agent::FamilyRow>,
    pub exceptions: Vec<crate::agent::ExceptionRow>,
    /// ((member, torrent), its snatch).
    pub snatches: Vec<((u32, u32), SnatchState)>,
    /// (member, torrent) pairs with a `torrent_buy_logs` row.
    pub bought: Vec<(u32, u32)>,
}
