//! The admin API's bearer token: from `admin.token`, or the first line of
//! `admin.token_file` (re-read on reload, so it can be rotated without a restart).
//!
//! Compared in constant time. No token configured: the API refuses every call.

use std::path::PathBuf;

use anyhow::{bail, Context};
use parking_lot::RwLock;
use subtle::ConstantTimeEq;

use crate::config::Config;

/// The token in force.
pub struct AdminToken {
    token: RwLock<Option<String>>,
    /// The inline token (`admin.token`), which wins over the file.
    inline: String,
    file: Option<PathBuf>,
}

impl AdminToken {
    /// The token `config` names (reads the token file, if one is set).
    pub fn from_config(config: &Config) -> anyhow::Result<Self> {
        let t = Self {
            token: RwLock::new(None),
            inline: config.admin.token.clone(),
            file: config.admin_token_file().map(PathBuf::from),
        };
        *t.token.write() = t.load()?;
        Ok(t)
    }

    fn load(&self) -> anyhow::Result<Option<String>> {
        if !self.inline.is_empty() {
            return Ok(Some(self.inline.clone()));
        }
        let Some(file) = &self.file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("reading the admin token file {}", file.display()))?;
        let token = text.lines().next().unwrap_or("").trim().to_string();
        if token.is_empty() {
            bail!("admin token file {} is empty", file.display());
        }
        Ok(Some(token))
    }

    /// Whether reloading re-reads anything (a token file is set).
    pub fn has_file(&self) -> bool {
        self.file.is_some()
    }

    /// Re-reads the token; on error the old one stays.
    pub fn reload(&self) -> anyhow::Result<String> {
        *self.token.write() = self.load()?;
        Ok("admin token reloaded".to_string())
    }

    /// Whether `presented` is the token (constant time). No token configured: never.
    pub fn matches(&self, presented: &str) -> bool {
        match &*self.token.read() {
            Some(t) => {
                t.len() == presented.len() && bool::from(t.as_bytes().ct_eq(presented.as_bytes()))
            }
            None => false,
        }
    }

    pub fn is_set(&self) -> bool {
        self.token.read().is_some()
    }
}
