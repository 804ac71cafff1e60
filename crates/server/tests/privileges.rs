//! Privilege drop: started as root, shoal binds, then runs as the configured user inside
//! its chroot and still writes its snapshot there. As another user, asking for a user it
//! cannot become fails the start with a clear error. Runs the real binary.

#![forbid(unsafe_code)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::{free_udp_port, refused_start, temp_dir, Client, Shoal};

fn status_field(pid: i32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn drops_to_the_configured_user_inside_the_chroot() {
    let dir = temp_dir("privileges");
    if !nix::unistd::Uid::effective().is_root() {
        // Not root: switching to root must be refused, loudly, before serving.
        let err = refused_start("privileges-root", "[udp]\nlisten = [\"127.0.0.1:0\"]\n[http]\nlisten = []\n[admin]\nlisten = []\n[state]\nfile = \"\"\n[privileges]\nuser = \"root\"\n");
        assert!(
            err.contains("setgid") || err.contains("setuid") || err.contains("setgroups"),
            "{err}"
        );
        return;
    }
    let jail = dir.join("jail");
    std::fs::create_dir(&jail).unwrap();
    // nobody owns nothing: let it write the jail.
    std::fs::set_permissions(&jail, std::fs::Permissions::from_mode(0o777)).unwrap();
    let port = free_udp_port();
    let config = format!(
        "workers = 1\n[udp]\nlisten = [\"127.0.0.1:{port}\"]\n[http]\nlisten = []\n[admin]\nlisten = []\n\
         [state]\nfile = \"shoal.state\"\n\
         [privileges]\nuser = \"nobody\"\nchroot = {:?}\n",
        jail.display().to_string()
    );
    let shoal = Shoal::start(&dir, "jailed", &config);
    shoal.wait_for("running as uid 65534", Duration::from_secs(5));
    let pid = shoal.pid();
    assert_eq!(status_field(pid, "Uid:"), "65534 65534 65534 65534");
    assert_eq!(status_field(pid, "Groups:"), "65534");
    let root = std::fs::read_link(format!("/proc/{pid}/root")).unwrap();
    assert_eq!(root, jail.canonicalize().unwrap());
    // Every thread, the UDP workers included, dropped root.
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let tid = task.unwrap().file_name().to_string_lossy().into_owned();
        let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap();
        assert!(
            s.contains("Uid:\t65534\t65534\t65534\t65534"),
            "thread {tid}"
        );
    }
    let mut c = Client::new(format!("127.0.0.1:{port}").parse().unwrap());
    c.connect();
    let out = shoal.stop();
    assert!(
        out.contains("final snapshot written to shoal.state"),
        "{out}"
    );
    let meta = std::fs::metadata(jail.join("shoal.state")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 65534);
    std::fs::remove_dir_all(dir).unwrap();
}
