//! Dropping root: after every socket is bound, switch to an unprivileged user and group,
//! optionally inside a chroot.
//!
//! Binding a port below 1024 needs root (or `CAP_NET_BIND_SERVICE`); answering requests
//! does not. `nix` wraps the calls safely, so this module needs no `unsafe`. glibc applies
//! `setuid`/`setgid` to every thread of the process, including the workers already
//! running.
//!
//! A chroot is entered with the working directory already inside it: [`enter_jail_dir`]
//! changes into the chroot directory at start, before any file is read, and
//! [`drop_privileges`] then makes that directory the root. Relative paths in the config
//! (state file, access list, token file) therefore name the same files before and after.

use std::path::Path;

use anyhow::{bail, Context};
use nix::unistd::{Gid, Group, Uid, User};

use crate::config::PrivilegesConfig;

/// Changes into the chroot directory, if one is configured (call first thing at start).
pub fn enter_jail_dir(p: &PrivilegesConfig) -> anyhow::Result<()> {
    if p.chroot.as_os_str().is_empty() {
        return Ok(());
    }
    std::env::set_current_dir(&p.chroot)
        .with_context(|| format!("changing into the chroot directory {}", p.chroot.display()))
}

/// The user `spec` names (a name or a numeric id); an error if there is none.
pub fn resolve_user(spec: &str) -> anyhow::Result<User> {
    let found = match spec.parse::<u32>() {
        Ok(uid) => User::from_uid(Uid::from_raw(uid)),
        Err(_) => User::from_name(spec),
    }
    .with_context(|| format!("looking up user {spec:?}"))?;
    found.with_context(|| format!("no user {spec:?}"))
}

/// The group `spec` names (a name or a numeric id); an error if there is none.
pub fn resolve_group(spec: &str) -> anyhow::Result<Gid> {
    if let Ok(gid) = spec.parse::<u32>() {
        return Ok(Gid::from_raw(gid));
    }
    let found = Group::from_name(spec).with_context(|| format!("looking up group {spec:?}"))?;
    Ok(found.with_context(|| format!("no group {spec:?}"))?.gid)
}

/// Switches user and group (and root directory) as configured. Returns a line for the
/// log, or `None` when nothing is configured.
pub fn drop_privileges(p: &PrivilegesConfig) -> anyhow::Result<Option<String>> {
    if p.user.is_empty() && p.group.is_empty() {
        return Ok(None);
    }
    let user = if p.user.is_empty() {
        None
    } else {
        Some(resolve_user(&p.user)?)
    };
    let gid = match (&p.group, &user) {
        (g, _) if !g.is_empty() => resolve_group(g)?,
        (_, Some(u)) => u.gid,
        (_, None) => unreachable!("user or group is set"),
    };
    if !p.chroot.as_os_str().is_empty() {
        // The working directory is the jail (see `enter_jail_dir`).
        nix::unistd::chroot(Path::new("."))
            .with_context(|| format!("chroot to {}", p.chroot.display()))?;
    }
    if Uid::effective().is_root() {
        nix::unistd::setgroups(&[gid]).context("setgroups")?;
    }
    nix::unistd::setgid(gid).with_context(|| format!("setgid({gid})"))?;
    if let Some(u) = &user {
        nix::unistd::setuid(u.uid).with_context(|| format!("setuid({})", u.uid))?;
        // Root must not be recoverable.
        if !u.uid.is_root() && nix::unistd::setuid(Uid::from_raw(0)).is_ok() {
            bail!("could still regain root after dropping privileges");
        }
    }
    Ok(Some(format!(
        "running as uid {} gid {}{}",
        Uid::effective(),
        Gid::effective(),
        if p.chroot.as_os_str().is_empty() {
            String::new()
        } else {
            format!(", chrooted to {}", p.chroot.display())
        }
    )))
}
