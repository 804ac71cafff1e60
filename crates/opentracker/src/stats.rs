//! The `/stats` bodies made from counts alone: the XML of `mode=everything` and the MRTG
//! blocks (two numbers, the uptime and a title line) of `peer`, `conn`, `scrp`, `udp4`,
//! `tcp4`, `torr`, `fscr`, `completed` and `syncs`, and the plain lists of `herr`, `renew`
//! and `version`.
//!
//! Each layout, field name and rate is opentracker's (`ot_stats.c`), so that its MRTG
//! configs and exporters read shoal unchanged: rates are integer divisions by the uptime
//! in seconds (by 1 in the first second), `completed/h` by the uptime in whole hours.

use std::fmt::Write;

/// Entries of opentracker's `renew` histogram (`OT_PEER_TIMEOUT`, in minutes).
pub const RENEW_BUCKETS: usize = 45;

/// opentracker's HTTP error classes, in the order of its counters and with the names
/// `mode=everything` gives them.
pub const HTTP_ERRORS: [&str; 9] = [
    "302 Redirect",
    "400 Parse Error",
    "400 Invalid Parameter",
    "400 Invalid Parameter (compact=0)",
    "400 Not Modest",
    "402 Payment Required",
    "403 Access Denied",
    "404 Not found",
    "500 Internal Server Error",
];

/// Indexes into [`Stats::http_errors`], each found by its name in [`HTTP_ERRORS`].
pub mod http_error {
    use super::HTTP_ERRORS;

    pub const REDIRECT: usize = index("302 Redirect");
    pub const PARSE: usize = index("400 Parse Error");
    pub const PARAM: usize = index("400 Invalid Parameter");
    pub const ACCESS_DENIED: usize = index("403 Access Denied");
    pub const NOT_FOUND: usize = index("404 Not found");
    pub const INTERNAL: usize = index("500 Internal Server Error");

    /// Where `name` stands in [`HTTP_ERRORS`] (a name that is not there fails the build).
    const fn index(name: &str) -> usize {
        let mut i = 0;
        while i < HTTP_ERRORS.len() {
            if eq(HTTP_ERRORS[i].as_bytes(), name.as_bytes()) {
                return i;
            }
            i += 1;
        }
        panic!("not one of HTTP_ERRORS")
    }

    const fn eq(a: &[u8], b: &[u8]) -> bool {
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }
}

/// HTTP (opentracker's `tcp`) counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tcp {
    /// Connections accepted.
    pub accept: u64,
    /// Announces answered.
    pub announce: u64,
    /// Scrapes answered (full scrapes not included).
    pub scrape: u64,
}

/// UDP counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Udp {
    /// Datagrams received.
    pub overall: u64,
    pub connect: u64,
    pub announce: u64,
    pub scrape: u64,
    /// Requests with a connection id that is not ours.
    pub missmatch: u64,
}

/// Everything the count-only modes show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    pub tracker_id: u32,
    /// Seconds since start.
    pub uptime: u64,
    pub torrents: u64,
    /// Peers, seeders included.
    pub peers: u64,
    pub seeds: u64,
    /// Completed downloads.
    pub completed: u64,
    pub tcp: Tcp,
    pub udp: Udp,
    pub livesync: u64,
    /// Re-announces by minutes since the peer's last one ([`RENEW_BUCKETS`] entries; missing
    /// ones are zero).
    pub renew: Vec<u64>,
    /// By [`HTTP_ERRORS`] class.
    pub http_errors: [u64; 9],
    pub mutex_stall: u64,
    /// Full scrapes served and their bytes.
    pub full_scrapes: u64,
    pub full_scrape_bytes: u64,
    /// What `mode=version` prints (and `<version>` holds): lines ending in `\n`.
    pub version: String,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            tracker_id: 0,
            uptime: 0,
            torrents: 0,
            peers: 0,
            seeds: 0,
            completed: 0,
            tcp: Tcp::default(),
            udp: Udp::default(),
            livesync: 0,
            renew: vec![0; RENEW_BUCKETS],
            http_errors: [0; 9],
            mutex_stall: 0,
            full_scrapes: 0,
            full_scrape_bytes: 0,
            version: String::new(),
        }
    }
}

impl Stats {
    /// `count` per second of uptime, as opentracker rounds it.
    fn per_second(&self, count: u64) -> u64 {
        count / self.uptime_u32().max(1)
    }

    /// opentracker keeps the divisor in an `unsigned int`.
    fn uptime_u32(&self) -> u64 {
        self.uptime & u64::from(u32::MAX)
    }

    /// The uptime line of the MRTG blocks (`%i seconds (%i hours)`, `int`s as there).
    fn uptime_line(&self) -> String {
        let t = self.uptime as i32;
        format!("{t} seconds ({} hours)", t / 3600)
    }

    fn mrtg(&self, a: u64, b: u64, title: &str) -> String {
        format!("{a}\n{b}\n{}\n{title}", self.uptime_line())
    }

    /// Every request and every answered one, UDP and HTTP, and the title of `conn` and
    /// `syncs` with their rates.
    fn connections(&self) -> (u64, u64, String) {
        let all = self.tcp.accept + self.udp.overall;
        let ok = self.tcp.announce + self.udp.announce + self.udp.connect;
        let title = format!(
            "opentracker connections, {} conns/s :: {} success/s.",
            self.per_second(all),
            self.per_second(ok)
        );
        (all, ok, title)
    }

    /// `mode=conn`: every request and every answered one, UDP and HTTP.
    pub fn conn(&self) -> String {
        let (all, ok, title) = self.connections();
        self.mrtg(all, ok, &title)
    }

    /// `mode=udp4`.
    pub fn udp4(&self) -> String {
        let ok = self.udp.announce + self.udp.connect;
        let title = format!(
            "opentracker udp4 stats, {} conns/s :: {} success/s.",
            self.per_second(self.udp.overall),
            self.per_second(ok)
        );
        self.mrtg(self.udp.overall, ok, &title)
    }

    /// `mode=tcp4`.
    pub fn tcp4(&self) -> String {
        let title = format!(
            "opentracker tcp4 stats, {} conns/s :: {} success/s.",
            self.per_second(self.tcp.accept),
            self.per_second(self.tcp.announce)
        );
        self.mrtg(self.tcp.accept, self.tcp.announce, &title)
    }

    /// `mode=scrp`: HTTP scrapes, then UDP scrapes.
    pub fn scrp(&self) -> String {
        let title = format!(
            "opentracker scrape stats, {} scrape/s (tcp and udp)",
            self.per_second(self.tcp.scrape + self.udp.scrape)
        );
        self.mrtg(self.tcp.scrape, self.udp.scrape, &title)
    }

    /// `mode=fscr`: full scrapes (times 1000, as opentracker scales them) and their bytes.
    pub fn fscr(&self) -> String {
        let title = format!(
            "opentracker full scrape stats, {} conns/s :: {} bytes/s.",
            self.per_second(self.full_scrapes),
            self.per_second(self.full_scrape_bytes)
        );
        self.mrtg(self.full_scrapes * 1000, self.full_scrape_bytes, &title)
    }

    /// `mode=peer`: peers, seeders, and the torrents in the title (no uptime line).
    pub fn peer(&self) -> String {
        format!(
            "{}\n{}\nopentracker serving {} torrents\nopentracker",
            self.peers, self.seeds, self.torrents
        )
    }

    /// `mode=torr`: the torrents, and a zero.
    pub fn torr(&self) -> String {
        format!(
            "{}\n0\nopentracker serving {} torrents\nopentracker",
            self.torrents, self.torrents
        )
    }

    /// `mode=completed`: completed downloads, a zero, and completions per hour.
    pub fn completed(&self) -> String {
        let hours = (self.uptime_u32() / 3600).max(1);
        let title = format!("opentracker, {} completed/h.", self.completed / hours);
        self.mrtg(self.completed, 0, &title)
    }

    /// `mode=syncs`: live-sync packets (none in shoal) with the rates of `conn`.
    pub fn syncs(&self) -> String {
        let (_, _, title) = self.connections();
        self.mrtg(self.livesync, 0, &title)
    }

    /// `mode=herr`: seven of the HTTP error counters, under opentracker's short labels
    /// (its own table: the fifth label says `403 IP` of the fifth counter, as there).
    pub fn herr(&self) -> String {
        let e = &self.http_errors;
        format!(
            "302 RED {}\n400 ... {}\n400 PAR {}\n400 COM {}\n403 IP  {}\n404 INV {}\n500 SRV {}\n",
            e[0], e[1], e[2], e[3], e[4], e[5], e[6]
        )
    }

    /// `mode=renew`: one `MM count` line a minute.
    pub fn renew(&self) -> String {
        let mut out = String::new();
        for i in 0..RENEW_BUCKETS {
            let n = self.renew.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{i:02} {n}");
        }
        out
    }

    /// `mode=version`.
    pub fn version(&self) -> String {
        self.version.clone()
    }

    /// `mode=everything`: the XML document.
    pub fn everything(&self) -> String {
        let mut r = String::with_capacity(4096);
        r.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<stats>\n");
        let _ = writeln!(r, "  <tracker_id>{}</tracker_id>", self.tracker_id);
        let _ = write!(r, "  <version>\n{}  </version>\n", self.version);
        let _ = writeln!(r, "  <uptime>{}</uptime>", self.uptime);
        let _ = write!(
            r,
            "  <torrents>\n    <count_mutex>{0}</count_mutex>\n    <count_iterator>{0}</count_iterator>\n  </torrents>\n",
            self.torrents
        );
        for (tag, n) in [
            ("peers", self.peers),
            ("seeds", self.seeds),
            ("completed", self.completed),
        ] {
            let _ = write!(r, "  <{tag}>\n    <count>{n}</count>\n  </{tag}>\n");
        }
        let (t, u) = (&self.tcp, &self.udp);
        r.push_str("  <connections>\n");
        let _ = write!(
            r,
            "    <tcp>\n      <accept>{}</accept>\n      <announce>{}</announce>\n      <scrape>{}</scrape>\n    </tcp>\n",
            t.accept, t.announce, t.scrape
        );
        let _ = write!(
            r,
            "    <udp>\n      <overall>{}</overall>\n      <connect>{}</connect>\n      <announce>{}</announce>\n      <scrape>{}</scrape>\n      <missmatch>{}</missmatch>\n    </udp>\n",
            u.overall, u.connect, u.announce, u.scrape, u.missmatch
        );
        let _ = write!(
            r,
            "    <livesync>\n      <count>{}</count>\n    </livesync>\n",
            self.livesync
        );
        r.push_str("  </connections>\n  <debug>\n    <renew>\n");
        for i in 0..RENEW_BUCKETS {
            let n = self.renew.get(i).copied().unwrap_or(0);
            let _ = writeln!(r, "      <count interval=\"{i:02}\">{n}</count>");
        }
        r.push_str("    </renew>\n    <http_error>\n");
        for (name, n) in HTTP_ERRORS.iter().zip(self.http_errors) {
            let _ = writeln!(r, "      <count code=\"{name}\">{n}</count>");
        }
        r.push_str("    </http_error>\n");
        let _ = write!(
            r,
            "    <mutex_stall>\n      <count>{}</count>\n    </mutex_stall>\n",
            self.mutex_stall
        );
        r.push_str("  </debug>\n</stats>");
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Stats {
        Stats {
            tracker_id: 7,
            uptime: 7300,
            torrents: 3,
            peers: 10,
            seeds: 4,
            completed: 5,
            tcp: Tcp {
                accept: 7300,
                announce: 730,
                scrape: 73,
            },
            udp: Udp {
                overall: 14600,
                connect: 100,
                announce: 630,
                scrape: 7,
                missmatch: 2,
            },
            version: "$Source: shoal $: $Revision: 1 $\n".into(),
            ..Stats::default()
        }
    }

    /// The MRTG blocks: two numbers, the uptime line, the title with its integer rates.
    #[test]
    fn mrtg_blocks_follow_opentrackers_lines() {
        let s = sample();
        assert_eq!(
            s.conn(),
            "21900\n1460\n7300 seconds (2 hours)\nopentracker connections, 3 conns/s :: 0 success/s."
        );
        assert_eq!(
            s.udp4(),
            "14600\n730\n7300 seconds (2 hours)\nopentracker udp4 stats, 2 conns/s :: 0 success/s."
        );
        assert_eq!(
            s.tcp4(),
            "7300\n730\n7300 seconds (2 hours)\nopentracker tcp4 stats, 1 conns/s :: 0 success/s."
        );
        assert_eq!(
            s.scrp(),
            "73\n7\n7300 seconds (2 hours)\nopentracker scrape stats, 0 scrape/s (tcp and udp)"
        );
        assert_eq!(
            s.peer(),
            "10\n4\nopentracker serving 3 torrents\nopentracker"
        );
        assert_eq!(
            s.torr(),
            "3\n0\nopentracker serving 3 torrents\nopentracker"
        );
        assert_eq!(
            s.completed(),
            "5\n0\n7300 seconds (2 hours)\nopentracker, 2 completed/h."
        );
        let f = Stats {
            full_scrapes: 2,
            full_scrape_bytes: 14600,
            ..sample()
        };
        assert_eq!(
            f.fscr(),
            "2000\n14600\n7300 seconds (2 hours)\nopentracker full scrape stats, 0 conns/s :: 2 bytes/s."
        );
    }

    /// In the first second the rates divide by one, and `completed/h` by one hour.
    #[test]
    fn rates_never_divide_by_zero() {
        let s = Stats {
            uptime: 0,
            ..sample()
        };
        assert!(s.conn().ends_with("21900 conns/s :: 1460 success/s."));
        assert!(s.completed().ends_with("5 completed/h."));
    }

    #[test]
    fn renew_and_herr_list_every_entry() {
        let mut s = sample();
        s.renew[3] = 9;
        s.http_errors[0] = 4;
        s.http_errors[6] = 8;
        let renew = s.renew();
        assert_eq!(renew.lines().count(), RENEW_BUCKETS);
        assert!(renew.starts_with("00 0\n01 0\n02 0\n03 9\n"));
        assert!(renew.ends_with("44 0\n"));
        assert_eq!(
            s.herr(),
            "302 RED 4\n400 ... 0\n400 PAR 0\n400 COM 0\n403 IP  0\n404 INV 0\n500 SRV 8\n"
        );
    }

    /// The XML, line by line as `stats_return_everything` writes it.
    #[test]
    fn everything_is_opentrackers_document() {
        let x = sample().everything();
        let lines: Vec<&str> = x.lines().collect();
        assert_eq!(lines[0], "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
        assert_eq!(lines[1], "<stats>");
        assert_eq!(lines[2], "  <tracker_id>7</tracker_id>");
        assert_eq!(
            lines[3..6],
            [
                "  <version>",
                "$Source: shoal $: $Revision: 1 $",
                "  </version>"
            ]
        );
        assert_eq!(lines[6], "  <uptime>7300</uptime>");
        assert_eq!(
            lines[7..11],
            [
                "  <torrents>",
                "    <count_mutex>3</count_mutex>",
                "    <count_iterator>3</count_iterator>",
                "  </torrents>"
            ]
        );
        assert!(x.contains("  <peers>\n    <count>10</count>\n  </peers>\n"));
        assert!(x.contains("  <seeds>\n    <count>4</count>\n  </seeds>\n"));
        assert!(x.contains("  <completed>\n    <count>5</count>\n  </completed>\n"));
        assert!(x.contains("    <tcp>\n      <accept>7300</accept>\n      <announce>730</announce>\n      <scrape>73</scrape>\n    </tcp>\n"));
        assert!(x.contains("      <missmatch>2</missmatch>\n    </udp>\n    <livesync>\n      <count>0</count>\n    </livesync>\n  </connections>\n"));
        assert!(x.contains("      <count interval=\"00\">0</count>\n"));
        assert!(x.contains("      <count interval=\"44\">0</count>\n    </renew>\n"));
        assert!(x.contains("      <count code=\"302 Redirect\">0</count>\n"));
        assert!(x.contains(
            "      <count code=\"500 Internal Server Error\">0</count>\n    </http_error>\n"
        ));
        assert!(x.ends_with(
            "    <mutex_stall>\n      <count>0</count>\n    </mutex_stall>\n  </debug>\n</stats>"
        ));
        assert!(
            !x.ends_with('\n'),
            "opentracker ends the document without a newline"
        );
    }
}
