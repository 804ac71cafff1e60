//! opentracker's operator surface on the real binary (issue 44): `/stats` answered only to
//! the networks `[stats] allow` lists, `GET /` redirected, the access-list pipes listing
//! and unlisting a torrent while announces run, admin API edits of the access list kept
//! across SIGHUP and a restart (the pipes' changes are not: they are the list in force
//! only), and `convert-config --from opentracker` on Debian's config and on one using every
//! key of opentracker's sample, its output accepted by `check-config`.

#![forbid(unsafe_code)]

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{free_udp_port, http, temp_dir, wait_until, Ann, Client, Shoal, SHOAL};
use shoal_proto::{AnnounceEvent, InfoHash, PeerId};

const TOKEN: &str = "opentracker-test";

fn hash(b: u8) -> InfoHash {
    InfoHash([b; 20])
}

/// The address in the line shoal prints for `what` (`HTTP listening on http://...`).
fn addr_of(shoal: &Shoal, what: &str) -> SocketAddr {
    let line = shoal.wait_for(what, Duration::from_secs(5));
    let url = line.split("http://").nth(1).unwrap();
    url.split('/').next().unwrap().parse().unwrap()
}

/// One GET with `headers` over a fresh connection: (status line, head, body).
fn get(addr: SocketAddr, target: &str, headers: &str) -> (String, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: t\r\n{headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.lines().next().unwrap().to_string();
    (status, head.to_string(), body.to_string())
}

fn from(ip: &str) -> String {
    format!("X-Forwarded-For: {ip}\r\n")
}

/// Whether an announce of `h` is served (`Err` carries the refusal's text).
fn announce(client: &mut Client, h: InfoHash, port: u16) -> Result<(), String> {
    let a = Ann {
        info_hash: h,
        peer_id: PeerId([port as u8; 20]),
        port,
        left: 0,
        event: AnnounceEvent::Started,
        numwant: 10,
    };
    client.announce_reporting(&a, 0, 0, None).map(|_| ())
}

/// The tracker's answer to an announce of `h`: `Some(served)`, or `None` when none came in
/// time (a busy machine: callers ask again rather than count it as a refusal).
fn answer(client: &mut Client, h: InfoHash, port: u16) -> Option<bool> {
    match announce(client, h, port) {
        Ok(()) => Some(true),
        Err(e) if e.contains("not allowed") => Some(false),
        Err(_) => None,
    }
}

fn wait_listed(client: &mut Client, h: InfoHash, listed: bool, what: &str) {
    wait_until(
        Duration::from_secs(10),
        Duration::from_millis(20),
        || (answer(client, h, 7000) == Some(listed)).then_some(()),
        || {
            format!(
                "{what}: {h} never became {}",
                if listed { "listed" } else { "unlisted" }
            )
        },
    );
}

fn write_line(pipe: &Path, line: &str) {
    // shoal holds the pipe open read-write: opening it to write never waits.
    let mut f = std::fs::OpenOptions::new().write(true).open(pipe).unwrap();
    f.write_all(format!("{line}\n").as_bytes()).unwrap();
}

fn start(dir: &Path, udp: u16) -> Shoal {
    let config = format!(
        "workers = 1\n\
         [udp]\nlisten = [\"127.0.0.1:{udp}\"]\n\
         [http]\nlisten = [\"127.0.0.1:0\"]\nredirect_url = \"https://tracker.example/\"\n\
         proxy_header = \"X-Forwarded-For\"\nproxy_trusted = [\"127.0.0.1\"]\n\
         [access_list]\nmode = \"allow\"\npath = {list:?}\nfifo_add = {add:?}\nfifo_delete = {del:?}\n\
         [stats]\nallow = [\"10.1.0.0/16\"]\n\
         [state]\nfile = \"\"\n\
         [admin]\nlisten = [\"127.0.0.1:0\"]\ntoken = \"{TOKEN}\"\n",
        list = dir.join("list").display().to_string(),
        add = dir.join("add.fifo").display().to_string(),
        del = dir.join("delete.fifo").display().to_string(),
    );
    Shoal::start(dir, "opentracker", &config)
}

#[test]
fn stats_pipes_and_kept_edits() {
    let dir = temp_dir("opentracker");
    let (a, b, c, d) = (hash(0xa1), hash(0xb2), hash(0xc3), hash(0xd4));
    std::fs::write(dir.join("list"), format!("# allowed\n{}\n", a.to_hex())).unwrap();
    let port = free_udp_port();
    let shoal = start(&dir, port);
    let web = addr_of(&shoal, "HTTP tracker listening on");
    let udp = SocketAddr::from(([127, 0, 0, 1], port));

    // /stats: the allowed network (as the trusted proxy says) gets it; others get 403.
    let (status, _, body) = get(web, "/stats?mode=peer", &from("10.1.2.3"));
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.ends_with("\nopentracker"), "{body:?}");
    for headers in [String::new(), from("192.0.2.1"), from("10.2.0.1")] {
        let (status, _, _) = get(web, "/stats?mode=everything", &headers);
        assert!(status.contains(" 403 "), "{headers:?}: {status}");
    }
    let (status, _, _) = get(web, "/stats?mode=nonsense", &from("10.1.2.3"));
    assert!(status.contains(" 400 "), "{status}");
    let (status, head, _) = get(web, "/", "");
    assert!(status.contains(" 302 "), "{status}");
    assert!(
        head.contains("\r\nLocation: https://tracker.example/\r\n"),
        "{head}"
    );
    let (_, _, xml) = get(web, "/stats?mode=everything", &from("10.1.2.3"));
    assert!(
        xml.contains("<count code=\"403 Access Denied\">3</count>"),
        "{xml}"
    );
    assert!(
        xml.contains("<count code=\"302 Redirect\">1</count>"),
        "{xml}"
    );

    // The pipes, while another client keeps announcing a and b. Its counts (a refused, b
    // served, b refused) are shared so that each step waits until it has seen the change.
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let runner = {
        let (stop, seen) = (stop.clone(), seen.clone());
        std::thread::spawn(move || {
            let mut client = Client::new(udp);
            client.connect();
            for _ in 0..20_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                if answer(&mut client, a, 7001) == Some(false) {
                    seen[0].fetch_add(1, Ordering::Relaxed);
                }
                match answer(&mut client, b, 7002) {
                    Some(true) => seen[1].fetch_add(1, Ordering::Relaxed),
                    Some(false) => seen[2].fetch_add(1, Ordering::Relaxed),
                    None => 0,
                };
            }
        })
    };
    let runner_sees = |i: usize, above: u64, what: &str| {
        wait_until(
            Duration::from_secs(10),
            Duration::from_millis(10),
            || (seen[i].load(Ordering::Relaxed) > above).then_some(()),
            || format!("the announcing client never saw {what}"),
        )
    };
    runner_sees(2, 0, "b refused before the pipes");
    write_line(&dir.join("add.fifo"), &b.to_hex());
    runner_sees(1, 0, "b served after fifo_add");
    let refused = seen[2].load(Ordering::Relaxed);
    write_line(
        &dir.join("delete.fifo"),
        &format!("{}  # a removal", b.to_hex().to_uppercase()),
    );
    runner_sees(2, refused, "b refused after fifo_delete");
    stop.store(true, Ordering::Relaxed);
    runner.join().unwrap();
    assert_eq!(
        seen[0].load(Ordering::Relaxed),
        0,
        "a stayed listed throughout"
    );
    let mut client = Client::new(udp);
    client.connect();
    wait_listed(&mut client, b, false, "fifo_delete");
    assert_eq!(
        std::fs::read_to_string(dir.join("list")).unwrap(),
        format!("# allowed\n{}\n", a.to_hex()),
        "the pipes leave the file alone"
    );

    // An admin edit is written to the file; a pipe's change is not.
    let admin = addr_of(&shoal, "admin (metrics");
    let (status, body) = http(
        admin,
        "PUT",
        &format!("/api/access-list/{}", d.to_hex()),
        Some(TOKEN),
    );
    assert_eq!(status, 200, "{body}");
    write_line(&dir.join("add.fifo"), &c.to_hex());
    wait_listed(&mut client, c, true, "fifo_add");
    wait_listed(&mut client, d, true, "admin PUT");

    // SIGHUP: the file again, with the admin's edit; the pipe's change is gone.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(shoal.pid()),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    wait_listed(&mut client, c, false, "SIGHUP");
    wait_listed(&mut client, d, true, "the edit after SIGHUP");
    wait_listed(&mut client, a, true, "the file's hash after SIGHUP");
    shoal.stop();

    // A restart: the edit is in the file it reads.
    let shoal = start(&dir, port);
    let mut client = Client::new(udp);
    client.connect();
    wait_listed(&mut client, d, true, "the edit after a restart");
    wait_listed(&mut client, a, true, "the file's hash after a restart");
    wait_listed(&mut client, c, false, "the pipe's hash after a restart");
    let web = addr_of(&shoal, "HTTP tracker listening on");
    let (_, _, xml) = get(web, "/stats?mode=everything", &from("10.1.0.9"));
    assert!(xml.contains("<count_mutex>2</count_mutex>"), "{xml}");
    shoal.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(SHOAL).args(args).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Converts the opentracker config `text` (written to `dir`), checks the result; returns
/// the TOML and what check-config said.
fn convert_and_check(dir: &Path, text: &str) -> (String, bool, String) {
    let conf = dir.join("opentracker.conf");
    std::fs::write(&conf, text).unwrap();
    let (ok, toml) = run(&[
        "convert-config",
        "--from",
        "opentracker",
        conf.to_str().unwrap(),
    ]);
    assert!(ok, "{toml}");
    shoal_server::Config::from_toml(&toml).unwrap_or_else(|e| panic!("{e:#}\n{toml}"));
    let out = dir.join("shoal.toml");
    std::fs::write(&out, &toml).unwrap();
    let (ok, said) = run(&["check-config", out.to_str().unwrap()]);
    (toml, ok, said)
}

fn me() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name
}

#[test]
fn converted_configs_pass_check_config() {
    let dir = temp_dir("opentracker-convert");

    // Debian's file as shipped: valid; what check-config finds missing is this machine's
    // (no /etc/opentracker, no _opentracker user), each named by its key.
    let debian = std::fs::read_to_string(fixture("opentracker-debian.conf")).unwrap();
    let (toml, _, said) = convert_and_check(&dir, &debian);
    assert!(
        toml.contains("mode = \"allow\"\npath = \"whitelist.txt\"\n"),
        "{toml}"
    );
    assert!(
        toml.contains("user = \"_opentracker\"\nchroot = \"/etc/opentracker\"\n"),
        "{toml}"
    );
    assert!(toml.contains("Every line was mapped."), "{toml}");
    for line in said
        .lines()
        .filter(|l| !l.ends_with("problems") && !l.ends_with(": ok"))
    {
        assert!(
            [
                "access_list.path:",
                "state.file:",
                "privileges.user:",
                "privileges.chroot:"
            ]
            .iter()
            .any(|k| line.starts_with(k))
                && (line.contains("/etc/opentracker") || line.contains("_opentracker")),
            "{line}"
        );
    }
    // The same file on a machine that has its directory and user: accepted.
    let root = dir.join("etc-opentracker");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("whitelist.txt"), "# none yet\n").unwrap();
    let moved = debian
        .replace("/etc/opentracker", root.to_str().unwrap())
        .replace("_opentracker", &me());
    let (_, ok, said) = convert_and_check(&dir, &moved);
    assert!(ok, "{said}");

    // Every key of opentracker's sample: accepted, the unmappable lines named.
    let all = std::fs::read_to_string(fixture("opentracker-all-keys.conf"))
        .unwrap()
        .replace("@DIR@", dir.to_str().unwrap())
        .replace("@USER@", &me());
    std::fs::write(dir.join("whitelist"), "").unwrap();
    let (toml, ok, said) = convert_and_check(&dir, &all);
    assert!(ok, "{said}\n{toml}");
    for unmapped in [
        "`access.blacklist ./blacklist`",
        "`livesync.cluster.listen 192.168.0.1:9696`",
        "`livesync.cluster.node_ip 192.168.0.4`",
        "`batchsync.cluster.admin_ip 10.1.1.1`",
    ] {
        assert!(
            toml.contains(&format!(": {unmapped}: ")),
            "{unmapped} not named:\n{toml}"
        );
    }
    let c = shoal_server::Config::from_toml(&toml).unwrap();
    assert_eq!(c.workers, 4);
    assert_eq!(c.http.listen.len(), 3);
    assert_eq!(c.udp.listen.len(), 4);
    assert_eq!(c.stats.allow, ["192.168.0.23/32", "10.1.1.0/24"]);
    assert_eq!(c.stats.path, "/stats2");
    assert_eq!(c.http.proxy_trusted, ["10.0.1.23/32", "192.0.0.0/8"]);
    assert_eq!(c.http.redirect_url, "https://your.tracker.local/");
    assert_eq!(c.access_list.fifo_add, Path::new("adder.fifo"));
    assert_eq!(c.privileges.chroot, dir);
    std::fs::remove_dir_all(&dir).unwrap();
}
