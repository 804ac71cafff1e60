//! The site registry: the one place in the server that names a site crate. A site is a
//! crate on the seam of `shoal-site` ([`Site`]) that exports its config section's type and
//! an `open`; adding one is its crate and one line in [`sites!`] below. Everything else in
//! the server reaches the site in force through [`Site`] alone.
//!
//! The line gives the site's `[private] schema` name, which is also the name of its config
//! section (`[unit3d]`, `[gazelle]`): [`SiteSections`] holds every section, each with its
//! defaults, so that a config file names them whatever schema is in force and
//! `--print-config` prints them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use shoal_site::{Keys, Opening, Site, SiteConfig, SiteSettings};

/// Declares the registered sites: `schema => (config type, open function)`.
macro_rules! sites {
    ($($name:ident => ($config:ty, $open:path)),+ $(,)?) => {
        /// Every site's config section, by schema name.
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct SiteSections {
            $(pub $name: $config,)+
        }

        /// The schema names of the registered sites.
        pub const SCHEMAS: &[&str] = &[$(stringify!($name)),+];

        impl SiteSections {
            /// The section of the site named `schema`, if one is registered.
            fn section(&self, schema: &str) -> Option<&dyn SiteConfig> {
                match schema {
                    $(stringify!($name) => Some(&self.$name),)+
                    _ => None,
                }
            }

            /// Why `value` is not a valid section of the site named `section`: the key path
            /// within the section and the problem (`bogus: unknown field ...`).
            pub fn check_section(section: &str, value: toml::Value) -> Result<(), String> {
                fn check<T: serde::de::DeserializeOwned>(value: toml::Value) -> Result<(), String> {
                    serde_path_to_error::deserialize::<_, T>(value)
                        .map(drop)
                        .map_err(|e| {
                            let path = e.path().to_string();
                            format!("{path}: {}", e.into_inner().message().trim_end())
                        })
                }
                match section {
                    $(stringify!($name) => check::<$config>(value),)+
                    _ => Ok(()),
                }
            }

            /// Opens the site named `schema` (`None`: none is registered by that name).
            pub fn open(&self, schema: &str, o: &Opening<'_>) -> Option<anyhow::Result<Arc<dyn Site>>> {
                match schema {
                    $(stringify!($name) => Some($open(&self.$name, o)),)+
                    _ => None,
                }
            }
        }
    };
}

sites! {
    unit3d => (shoal_unit3d::Unit3dConfig, shoal_unit3d::open),
    gazelle => (shoal_gazelle::GazelleConfig, shoal_gazelle::open),
    nexusphp => (shoal_nexusphp::NexusphpConfig, shoal_nexusphp::open),
}

impl SiteSections {
    /// Checks the section of the site named `schema` with the `[private]` keys.
    pub fn validate(&self, schema: &str, keys: &Keys) -> anyhow::Result<()> {
        match self.section(schema) {
            Some(section) => section.validate(keys),
            None => Ok(()),
        }
    }

    /// The announce settings the site named `schema` puts in force, if it is a site's.
    pub fn settings(&self, schema: &str) -> Option<SiteSettings> {
        self.section(schema).map(SiteConfig::settings)
    }
}

#[cfg(test)]
mod tests {
    use super::{SiteSections, SCHEMAS};

    #[test]
    fn every_registered_site_has_a_section_and_settings() {
        let sections = SiteSections::default();
        for schema in SCHEMAS {
            assert!(sections.settings(schema).is_some(), "{schema}");
        }
        assert!(sections.settings("shoal").is_none());
    }
}
