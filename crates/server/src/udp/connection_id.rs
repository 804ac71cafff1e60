//! BEP 15 connection ids: the core's ([`shoal_tracker::connection_id`]), under the key and
//! age the config names.

pub use shoal_tracker::connection_id::{ConnectionIds, IdCheck};

use crate::config::Config;

/// The ids `config` asks for, under the key from `udp.connection_id_key_file` if set, else
/// `snapshot_key`, else a new one.
pub fn from_config(
    config: &Config,
    snapshot_key: Option<[u8; 16]>,
) -> anyhow::Result<ConnectionIds> {
    let udp = &config.udp;
    ConnectionIds::with_key_from(
        config.connection_id_key_file(),
        snapshot_key,
        udp.connection_id_max_age + udp.connection_id_grace,
    )
}
