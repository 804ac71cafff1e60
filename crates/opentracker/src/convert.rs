//! An `opentracker.conf` as shoal's TOML (`shoal convert-config --from opentracker FILE`).
//!
//! Each line that has a shoal equivalent becomes that key; each that has none is named in
//! a comment at the top with the reason, so nothing is dropped unseen. Where opentracker
//! acts without a line (its listen address, who may read `/stats`), the output says so in
//! a comment and writes the key, so that shoal behaves the same rather than by its own
//! defaults.
//!
//! Paths: opentracker, started as root, chroots to `tracker.rootdir` before it reads its
//! lists, and otherwise changes into it. shoal changes into `privileges.chroot` at start
//! and resolves relative paths there before and after the chroot, so a path under the
//! root directory is written relative to it, and an absolute path outside it (which
//! opentracker, as root, would have looked up inside the chroot) is written relative too,
//! with a comment.

use std::fmt::Write;
use std::net::SocketAddr;
use std::path::Path;

use crate::conf::{self, Directive, DEFAULT_PORT};

/// What a converted file holds, before it is written out.
#[derive(Default)]
struct Out {
    unmapped: Vec<String>,
    workers: Option<(u32, String)>,
    udp: Vec<SocketAddr>,
    http: Vec<SocketAddr>,
    redirect: Option<String>,
    proxies: Vec<String>,
    list: Option<(&'static str, String)>,
    fifo_add: Option<String>,
    fifo_delete: Option<String>,
    stats_allow: Vec<String>,
    stats_path: Option<String>,
    root: Option<String>,
    user: Option<String>,
    notes: Vec<String>,
}

/// Converts `text`, the contents of the file named `source` (named in the header).
pub fn to_toml(text: &str, source: &str) -> String {
    let mut o = Out::default();
    for e in conf::parse(text) {
        let d = match e.directive {
            Ok(d) => d,
            Err(why) => {
                o.unmapped
                    .push(format!("line {}: `{}`: {why}", e.line, e.text));
                continue;
            }
        };
        let mut unmapped = |why: &str| {
            o.unmapped
                .push(format!("line {}: `{}`: {why}", e.line, e.text))
        };
        match d {
            Directive::ListenTcpUdp(a) => {
                o.http.push(a);
                o.udp.push(a);
            }
            Directive::ListenTcp(a) => o.http.push(a),
            Directive::ListenUdp(a) => o.udp.push(a),
            Directive::UdpWorkers(n) => {
                o.workers = Some((n, e.text));
            }
            Directive::Whitelist(p) | Directive::Blacklist(p) if o.list.is_some() => {
                let _ = p;
                unmapped("a second access list: opentracker is built for one (white or black), and so is [access_list]");
            }
            Directive::Whitelist(p) => o.list = Some(("allow", p)),
            Directive::Blacklist(p) => o.list = Some(("deny", p)),
            Directive::FifoAdd(p) => o.fifo_add = Some(p),
            Directive::FifoDelete(p) => o.fifo_delete = Some(p),
            Directive::Stats(n) => o.stats_allow.push(n.to_string()),
            Directive::StatsPath(p) => o.stats_path = Some(format!("/{p}")),
            Directive::Proxy(n) => o.proxies.push(n.to_string()),
            Directive::RootDir(p) => o.root = Some(p),
            Directive::User(u) => o.user = Some(u),
            Directive::RedirectUrl(u) => o.redirect = Some(u),
            Directive::LivesyncListen(_) | Directive::LivesyncNode(_) => unmapped(
                "live sync (multicast between opentrackers) has no shoal equivalent; shoal nodes share swarms through Redis ([cluster])",
            ),
            Directive::BatchsyncAdmin(_) => {
                unmapped("batch sync has no shoal equivalent; see [cluster]")
            }
        }
    }
    o.write(source)
}

impl Out {
    fn write(mut self, source: &str) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "# shoal configuration converted from {source} by `shoal convert-config --from opentracker`.\n\
             # Check it with `shoal check-config FILE`; docs/opentracker.md explains each mapping."
        );
        // Paths first: their notes belong with the header.
        let list = self
            .list
            .take()
            .map(|(m, p)| (m, self.path(&p, "the access list")));
        let fifo_add = self
            .fifo_add
            .take()
            .map(|p| self.path(&p, "access.fifo_add"));
        let fifo_delete = self
            .fifo_delete
            .take()
            .map(|p| self.path(&p, "access.fifo_delete"));
        if self.unmapped.is_empty() {
            t.push_str("#\n# Every line was mapped.\n");
        } else {
            t.push_str("#\n# Lines not mapped:\n");
            for u in &self.unmapped {
                let _ = writeln!(t, "#   {u}");
            }
        }
        for n in &self.notes {
            let _ = writeln!(t, "# Note: {n}");
        }
        if let Some((n, line)) = &self.workers {
            let _ = writeln!(
                t,
                "\n# From `{line}`: opentracker's UDP threads; shoal's workers serve every protocol."
            );
            let _ = writeln!(t, "workers = {n}");
        }
        let default = [SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT))];
        let no_listen = self.udp.is_empty() && self.http.is_empty();
        t.push_str("\n[udp]\n");
        if no_listen {
            t.push_str(
                "# No listen line: opentracker's default, UDP and HTTP on 0.0.0.0:6969 (IPv4 only).\n",
            );
        }
        let (udp, http) = if no_listen {
            (&default[..], &default[..])
        } else {
            (&self.udp[..], &self.http[..])
        };
        let _ = writeln!(t, "listen = {}", addrs(udp));
        t.push_str("\n[http]\n");
        let _ = writeln!(t, "listen = {}", addrs(http));
        if let Some(u) = &self.redirect {
            let _ = writeln!(t, "redirect_url = {}", quote(u));
        }
        if !self.proxies.is_empty() {
            t.push_str("# access.proxy: the client's address is taken from X-Forwarded-For when the connection comes from these.\n");
            let _ = writeln!(t, "proxy_header = \"X-Forwarded-For\"");
            let _ = writeln!(t, "proxy_trusted = {}", strings(&self.proxies));
        }
        if list.is_some() || fifo_add.is_some() || fifo_delete.is_some() {
            t.push_str("\n[access_list]\n");
            match &list {
                Some((mode, path)) => {
                    let _ = writeln!(t, "mode = \"{mode}\"\npath = {}", quote(path));
                }
                None => t.push_str(
                    "# The pipes change an access list; opentracker.conf names none, so there is none to change.\n",
                ),
            }
            if let Some(p) = &fifo_add {
                let _ = writeln!(t, "fifo_add = {}", quote(p));
            }
            if let Some(p) = &fifo_delete {
                let _ = writeln!(t, "fifo_delete = {}", quote(p));
            }
        }
        t.push_str(
            "\n[store]\n\
             # opentracker keeps no peer id (it answers in compact form only, compact=0 with an\n\
             # error): keep none either, 20 bytes a peer less. shoal then answers compact=0 with\n\
             # addresses and ports alone; true lists peer ids too.\n\
             peer_ids = false\n",
        );
        t.push_str("\n[stats]\n");
        if let Some(p) = &self.stats_path {
            let _ = writeln!(t, "path = {}", quote(p));
        }
        if self.stats_allow.is_empty() {
            t.push_str(
                "# No access.stats line: opentracker (built without WANT_RESTRICT_STATS, the default)\n\
                 # answers /stats to anyone. Narrow this to the networks your graphs run on.\n",
            );
            self.stats_allow = vec!["0.0.0.0/0".into(), "::/0".into()];
        }
        let _ = writeln!(t, "allow = {}", strings(&self.stats_allow));
        self.write_privileges(&mut t);
        t
    }

    fn write_privileges(&self, t: &mut String) {
        if self.root.is_none() && self.user.is_none() {
            t.push_str(
                "\n# No tracker.user: opentracker started as root runs as \"nobody\"; set\n\
                 # [privileges] user to do the same.\n",
            );
            return;
        }
        t.push_str("\n[privileges]\n");
        match &self.user {
            Some(u) => {
                let _ = writeln!(t, "user = {}", quote(u));
            }
            None => {
                t.push_str("# No tracker.user: opentracker's default when started as root.\n");
                t.push_str("user = \"nobody\"\n");
            }
        }
        if let Some(r) = &self.root {
            let _ = writeln!(t, "chroot = {}", quote(r));
        }
    }

    /// A list path as shoal will resolve it (see the module's comment on paths).
    fn path(&mut self, p: &str, what: &str) -> String {
        let Some(root) = &self.root else {
            return p.to_string();
        };
        let path = Path::new(p);
        if !path.is_absolute() {
            return p.to_string();
        }
        if let Ok(rel) = path.strip_prefix(root) {
            return rel.display().to_string();
        }
        let rel = p.trim_start_matches('/').to_string();
        self.notes.push(format!(
            "{what} {p} is outside tracker.rootdir {root}: opentracker, started as root, reads it \
             inside the chroot, as {}; so does shoal, as the relative path {rel}.",
            Path::new(root).join(&rel).display()
        ));
        rel
    }
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(q, "\\u{:04X}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

fn strings(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", quoted.join(", "))
}

fn addrs(items: &[SocketAddr]) -> String {
    let v: Vec<String> = items.iter().map(ToString::to_string).collect();
    strings(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts that `toml` holds each of `parts`, showing the whole file where one is missing.
    fn assert_contains(toml: &str, parts: &[&str]) {
        for part in parts {
            assert!(toml.contains(part), "no {part:?} in:\n{toml}");
        }
    }

    #[test]
    fn an_empty_file_says_what_opentracker_does_without_lines() {
        let t = to_toml("# nothing\n", "x.conf");
        assert!(t.contains("Every line was mapped."));
        assert!(t.contains("[udp]\n# No listen line"));
        assert!(t.contains("listen = [\"0.0.0.0:6969\"]\n\n[http]\nlisten = [\"0.0.0.0:6969\"]\n"));
        assert!(t.contains("allow = [\"0.0.0.0/0\", \"::/0\"]"));
        assert!(t.contains("\n[store]\n"), "{t}");
        assert!(
            t.contains("\npeer_ids = false\n"),
            "opentracker keeps no peer id: {t}"
        );
        assert!(!t.contains("\n[privileges]\n"));
        assert!(!t.contains("[access_list]"));
    }

    #[test]
    fn lists_under_the_root_become_relative_and_others_get_a_note() {
        let t = to_toml(
            "tracker.rootdir /etc/ot\ntracker.user ot\naccess.whitelist /etc/ot/w.txt\n\
             access.fifo_add /run/add.fifo\n",
            "x.conf",
        );
        assert_contains(
            &t,
            &[
                "mode = \"allow\"\npath = \"w.txt\"\n",
                "fifo_add = \"run/add.fifo\"",
                "# Note: access.fifo_add /run/add.fifo is outside",
                "[privileges]\nuser = \"ot\"\nchroot = \"/etc/ot\"\n",
            ],
        );
    }

    #[test]
    fn unmappable_lines_are_named_with_their_numbers() {
        let t = to_toml(
            "access.whitelist a\naccess.blacklist b\nlivesync.cluster.listen 1.2.3.4\nwhat.ever 1\nlisten.tcp nope\n",
            "x.conf",
        );
        assert_contains(
            &t,
            &[
                "#   line 2: `access.blacklist b`: a second access list",
                "#   line 3: `livesync.cluster.listen 1.2.3.4`: live sync",
                "#   line 4: `what.ever 1`: opentracker knows no key",
                "#   line 5: `listen.tcp nope`:",
            ],
        );
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(quote("a\"b\\c\u{1}"), "\"a\\\"b\\\\c\\u0001\"");
    }
}
