//! An `opentracker.conf`, read as opentracker reads it (`parse_configfile` in
//! `opentracker.c`): one `key value` a line, leading and trailing white space dropped,
//! `#` lines and blank lines skipped, the value being everything after the key and the
//! white space that follows it.
//!
//! Every key of opentracker's sample config is known here, including those only some
//! builds read (`access.fifo_*`, `access.stats`, `access.proxy`, `livesync.*`); a line
//! whose value does not parse, or whose key opentracker does not know, is kept with the
//! reason, so that [`crate::convert`] can name it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// opentracker's port when a listen line names none.
pub const DEFAULT_PORT: u16 = 6969;

/// A line that says something.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Directive {
    /// `listen.tcp_udp`: HTTP and UDP on one address.
    ListenTcpUdp(SocketAddr),
    /// `listen.tcp`.
    ListenTcp(SocketAddr),
    /// `listen.udp`.
    ListenUdp(SocketAddr),
    /// `listen.udp.workers`.
    UdpWorkers(u32),
    /// `access.whitelist`.
    Whitelist(String),
    /// `access.blacklist`.
    Blacklist(String),
    /// `access.fifo_add`.
    FifoAdd(String),
    /// `access.fifo_delete`.
    FifoDelete(String),
    /// `access.stats`: an address or network allowed to read `/stats`.
    Stats(ipnet::IpNet),
    /// `access.stats_path`: where `/stats` is (without the leading `/`).
    StatsPath(String),
    /// `access.proxy`: a proxy whose `X-Forwarded-For` is believed.
    Proxy(ipnet::IpNet),
    /// `tracker.rootdir`: the directory opentracker chroots (as root) or changes into.
    RootDir(String),
    /// `tracker.user`.
    User(String),
    /// `tracker.redirect_url`: where `GET /` is sent.
    RedirectUrl(String),
    /// `livesync.cluster.listen`.
    LivesyncListen(String),
    /// `livesync.cluster.node_ip`.
    LivesyncNode(String),
    /// `batchsync.cluster.admin_ip`.
    BatchsyncAdmin(String),
}

/// One line that is neither blank nor a comment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Line number, from 1.
    pub line: usize,
    /// The line as written, trimmed.
    pub text: String,
    /// What it says, or why it says nothing opentracker would act on.
    pub directive: Result<Directive, String>,
}

/// The keys, longest first where one is a prefix of another (`listen.udp.workers` before
/// `listen.udp`; opentracker tells them apart by the white space after the key).
const KEYS: [&str; 17] = [
    "listen.tcp_udp",
    "listen.tcp",
    "listen.udp.workers",
    "listen.udp",
    "access.whitelist",
    "access.blacklist",
    "access.fifo_add",
    "access.fifo_delete",
    "access.stats_path",
    "access.stats",
    "access.proxy",
    "tracker.rootdir",
    "tracker.user",
    "tracker.redirect_url",
    "livesync.cluster.listen",
    "livesync.cluster.node_ip",
    "batchsync.cluster.admin_ip",
];

/// Reads a config file's text.
pub fn parse(text: &str) -> Vec<Entry> {
    text.lines()
        .map(str::trim)
        .enumerate()
        .filter(|(_, line)| !crate::says_nothing(line.as_bytes()))
        .map(|(i, line)| Entry {
            line: i + 1,
            text: line.to_string(),
            directive: line_directive(line),
        })
        .collect()
}

/// What a trimmed `key value` line says.
fn line_directive(line: &str) -> Result<Directive, String> {
    let key_end = line.find(char::is_whitespace).unwrap_or(line.len());
    let (key, value) = (&line[..key_end], line[key_end..].trim());
    if !KEYS.contains(&key) {
        return Err(format!("opentracker knows no key {key:?}"));
    }
    if value.is_empty() {
        return Err(format!("{key} without a value"));
    }
    directive(key, value)
}

fn directive(key: &str, v: &str) -> Result<Directive, String> {
    let s = || v.to_string();
    Ok(match key {
        "listen.tcp_udp" => Directive::ListenTcpUdp(listen(v)?),
        "listen.tcp" => Directive::ListenTcp(listen(v)?),
        "listen.udp" => Directive::ListenUdp(listen(v)?),
        "listen.udp.workers" => Directive::UdpWorkers(
            v.parse()
                .map_err(|_| format!("{v:?} is not a number of workers"))?,
        ),
        "access.whitelist" => Directive::Whitelist(s()),
        "access.blacklist" => Directive::Blacklist(s()),
        "access.fifo_add" => Directive::FifoAdd(s()),
        "access.fifo_delete" => Directive::FifoDelete(s()),
        "access.stats" => Directive::Stats(net(v)?),
        "access.stats_path" => Directive::StatsPath(v.trim_start_matches('/').to_string()),
        "access.proxy" => Directive::Proxy(net(v)?),
        "tracker.rootdir" => Directive::RootDir(s()),
        "tracker.user" => Directive::User(s()),
        "tracker.redirect_url" => Directive::RedirectUrl(s()),
        "livesync.cluster.listen" => Directive::LivesyncListen(s()),
        "livesync.cluster.node_ip" => Directive::LivesyncNode(s()),
        _ => Directive::BatchsyncAdmin(s()),
    })
}

/// A listen address as opentracker writes them: `IP`, `IPv4:PORT`, `[IPv6]:PORT` (or
/// `[IPv6].PORT`); the port is 6969 when none is given.
pub fn listen(v: &str) -> Result<SocketAddr, String> {
    let bad = || format!("{v:?} is not an address (IP, IP:PORT or [IPv6]:PORT)");
    if let Some(rest) = v.strip_prefix('[') {
        let (ip, after) = rest.split_once(']').ok_or_else(bad)?;
        let ip: IpAddr = ip.parse().map_err(|_| bad())?;
        let port = match after {
            "" => DEFAULT_PORT,
            p => p
                .strip_prefix(':')
                .or_else(|| p.strip_prefix('.'))
                .and_then(|p| p.parse().ok())
                .ok_or_else(bad)?,
        };
        return Ok(SocketAddr::new(ip, port));
    }
    if let Ok(ip) = v.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    let (ip, port) = v.rsplit_once(':').ok_or_else(bad)?;
    let ip: Ipv4Addr = ip.parse().map_err(|_| bad())?;
    Ok(SocketAddr::new(ip.into(), port.parse().map_err(|_| bad())?))
}

/// An address (a host network) or a network in CIDR form.
pub(crate) fn net(v: &str) -> Result<ipnet::IpNet, String> {
    v.parse::<ipnet::IpNet>()
        .or_else(|_| v.parse::<IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{v:?} is not an address or network"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_values_comments_and_unknown_lines() {
        let e = parse(
            "# c\n\n  listen.udp.workers 4\nlisten.udp 10.0.0.5\ntracker.user    nobody  \n\
             access.stats_path /stats2\nfoo.bar 1\naccess.stats\naccess.proxy 192.0.0.0/8\n",
        );
        assert_eq!(e.len(), 7);
        assert_eq!(e[0].line, 3);
        assert_eq!(e[0].directive, Ok(Directive::UdpWorkers(4)));
        assert_eq!(
            e[1].directive,
            Ok(Directive::ListenUdp("10.0.0.5:6969".parse().unwrap()))
        );
        assert_eq!(e[2].directive, Ok(Directive::User("nobody".into())));
        assert_eq!(e[2].text, "tracker.user    nobody");
        assert_eq!(e[3].directive, Ok(Directive::StatsPath("stats2".into())));
        assert!(e[4].directive.as_ref().unwrap_err().contains("foo.bar"));
        assert!(e[5].directive.is_err());
        assert_eq!(
            e[6].directive,
            Ok(Directive::Proxy("192.0.0.0/8".parse().unwrap()))
        );
    }

    #[test]
    fn listen_addresses_in_opentrackers_forms() {
        let a = |s: &str| listen(s).map(|a| a.to_string());
        assert_eq!(a("0.0.0.0"), Ok("0.0.0.0:6969".into()));
        assert_eq!(a("192.168.0.1:80"), Ok("192.168.0.1:80".into()));
        assert_eq!(a("::1"), Ok("[::1]:6969".into()));
        assert_eq!(a("[::1]:81"), Ok("[::1]:81".into()));
        assert_eq!(a("[::1].82"), Ok("[::1]:82".into()));
        assert_eq!(a("[::1]"), Ok("[::1]:6969".into()));
        assert!(a("host:80").is_err());
        assert!(a("1.2.3.4:99999").is_err());
        assert!(a("[::1]x").is_err());
    }
}
