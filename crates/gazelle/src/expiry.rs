//! The call back to the site when freeleech tokens are used up: Ocelot's
//! `GET <site path>/tools.php?key=<site password>&type=expiretoken&action=ocelot&tokens=<user>:<torrent>,...`,
//! on which the site marks the tokens expired. Sent every `schedule_interval` with what
//! the announces used up since, tokens joined up to [`MAX_LIST`] characters a call, each
//! call retried every [`RETRY`] until the site answers 200 (as Ocelot's, so a site that
//! is down for a while still hears of every token).
//!
//! A thread of its own ("token-expiry"): the call never waits on an announce or a write.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::site::Site;

/// How long a refused or failed call waits before it is tried again.
pub const RETRY: Duration = Duration::from_secs(5);
/// The longest token list in one call (Ocelot's).
pub const MAX_LIST: usize = 350;
/// The bound on connecting to the site and on its answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the site answers: `http://host[:port][/path]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteUrl {
    pub host: String,
    pub port: u16,
    /// The path before `/tools.php`, without a trailing `/` (empty for the root).
    pub path: String,
}

impl SiteUrl {
    /// Reads `http://host[:port][/path]` (`https` is not taken: Ocelot's call is plain
    /// HTTP too, to a site on the same network).
    pub fn parse(url: &str) -> Result<SiteUrl, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("the site URL {url:?} must start with http://"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
                let port = p
                    .parse()
                    .map_err(|_| format!("the site URL {url:?} has a bad port"))?;
                (h, port)
            }
            _ => (authority, 80),
        };
        if host.is_empty() {
            return Err(format!("the site URL {url:?} names no host"));
        }
        Ok(SiteUrl {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        })
    }
}

/// One call: the site's HTTP status.
pub fn call(url: &SiteUrl, password: &str, tokens: &str) -> std::io::Result<u16> {
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    let addr = (host, url.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("the site's host has no address"))?;
    let mut stream = TcpStream::connect_timeout(&addr, CALL_TIMEOUT)?;
    stream.set_read_timeout(Some(CALL_TIMEOUT))?;
    stream.set_write_timeout(Some(CALL_TIMEOUT))?;
    write!(
        stream,
        "GET {}/tools.php?key={password}&type=expiretoken&action=ocelot&tokens={tokens} HTTP/1.0\r\n\
         Host: {}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        url.path, url.host
    )?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    let mut words = line.split_whitespace();
    match (words.next(), words.next().and_then(|s| s.parse().ok())) {
        (Some(v), Some(status)) if v.starts_with("HTTP/") => Ok(status),
        _ => Err(std::io::Error::other("the site's answer is not HTTP")),
    }
}

/// `user:torrent` pairs joined by commas, in lists of at most [`MAX_LIST`] characters.
pub fn lists(tokens: &[(u32, u32)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (user, torrent) in tokens {
        let item = format!("{user}:{torrent}");
        match out.last_mut() {
            Some(list) if list.len() + 1 + item.len() <= MAX_LIST => {
                list.push(',');
                list.push_str(&item);
            }
            _ => out.push(item),
        }
    }
    out
}

/// The running caller.
pub struct TokenExpiry {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TokenExpiry {
    /// Starts calling `url` every `every` with the tokens `site` used up.
    pub fn start(
        site: Arc<Site>,
        url: SiteUrl,
        password: String,
        every: Duration,
    ) -> std::io::Result<TokenExpiry> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("token-expiry".into())
            .spawn(move || run(&site, &url, &password, every, &flag))?;
        Ok(TokenExpiry {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops after one last try of what is queued.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for TokenExpiry {
    fn drop(&mut self) {
        self.halt();
    }
}

fn run(site: &Site, url: &SiteUrl, password: &str, every: Duration, stop: &AtomicBool) {
    let mut queue: std::collections::VecDeque<String> = Default::default();
    let mut next = Instant::now() + every;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping || Instant::now() >= next {
            queue.extend(lists(&site.take_expired_tokens()));
            while let Some(list) = queue.front() {
                match call(url, password, list) {
                    Ok(200) => {
                        queue.pop_front();
                    }
                    result => {
                        tracing::warn!(
                            "the site did not take the expired tokens ({result:?}); \
                             trying again in {RETRY:?}"
                        );
                        next = Instant::now() + RETRY;
                        break;
                    }
                }
            }
            if queue.is_empty() {
                next = Instant::now() + every;
            }
            if stopping {
                if !queue.is_empty() {
                    tracing::error!(
                        lists = queue.len(),
                        "stopping with expired tokens the site did not take"
                    );
                }
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_urls_name_host_port_and_path() {
        let u = SiteUrl::parse("http://gazelle.lan:8080/site/").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("gazelle.lan", 8080, "/site")
        );
        let u = SiteUrl::parse("http://127.0.0.1").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 80, "")
        );
        assert!(SiteUrl::parse("https://x").is_err());
        assert!(SiteUrl::parse("http://:80").is_err());
        assert!(SiteUrl::parse("http://h:port").is_err());
    }

    #[test]
    fn token_lists_stay_within_ocelots_length() {
        let tokens: Vec<(u32, u32)> = (0..100).map(|i| (1000 + i, 50_000 + i)).collect();
        let lists = lists(&tokens);
        assert!(lists.len() > 1);
        assert!(lists.iter().all(|l| l.len() <= MAX_LIST));
        let all: Vec<&str> = lists.iter().flat_map(|l| l.split(',')).collect();
        assert_eq!(all.len(), 100);
        assert_eq!(all[0], "1000:50000");
    }
}
