//! Requests counted through the metrics facade, tallied by protocol as they are counted
//! (the metrics recorder feeds them; the status page's requests-per-second chart reads
//! them). Their own file so that the recorder and the sampler share them without
//! importing each other.

use std::sync::atomic::AtomicU64;

/// Requests counted through the facade, by protocol.
#[derive(Debug, Default)]
pub struct Tallies {
    pub http: AtomicU64,
    pub ws: AtomicU64,
}

impl Tallies {
    /// The tally a `protocol` label counts into.
    pub fn slot(&self, protocol: &str) -> Option<&AtomicU64> {
        match protocol {
            "http" | "https" => Some(&self.http),
            "ws" | "wss" => Some(&self.ws),
            _ => None,
        }
    }
}

/// The process-wide request tallies.
pub static TALLIES: Tallies = Tallies {
    http: AtomicU64::new(0),
    ws: AtomicU64::new(0),
};
