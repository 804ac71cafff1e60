//! One load, whatever its protocol: the piece `sweep` and `compare` share.
//!
//! Sweeps and comparisons run the same load many times with one knob turned (clients,
//! workers, target address). [`Load`] wraps the three protocols' flags so that those
//! commands turn the knob without knowing which protocol they drive.

use anyhow::Result;
use clap::Subcommand;

use crate::run::{RunArgs, RunResult};

/// The load to run, as on the `udp`/`http`/`ws` command lines.
#[derive(Subcommand, Clone, Debug)]
pub enum Load {
    /// UDP (BEP 15).
    Udp(crate::udp::UdpArgs),
    /// HTTP or HTTPS.
    Http(crate::http::HttpArgs),
    /// WebTorrent over ws:// or wss://.
    Ws(crate::ws::WsArgs),
}

impl Load {
    pub fn protocol(&self) -> &'static str {
        match self {
            Load::Udp(_) => "udp",
            Load::Http(_) => "http",
            Load::Ws(_) => "ws",
        }
    }

    pub fn run_args(&self) -> &RunArgs {
        match self {
            Load::Udp(a) => &a.run,
            Load::Http(a) => &a.run,
            Load::Ws(a) => &a.run,
        }
    }

    pub fn run_args_mut(&mut self) -> &mut RunArgs {
        match self {
            Load::Udp(a) => &mut a.run,
            Load::Http(a) => &mut a.run,
            Load::Ws(a) => &mut a.run,
        }
    }

    /// Sets the number of concurrent clients: requests in flight for UDP, connections for
    /// HTTP and WebTorrent.
    pub fn set_clients(&mut self, n: usize) {
        match self {
            Load::Udp(a) => a.concurrency = Some(n),
            Load::Http(a) => a.tcp.connections = n,
            Load::Ws(a) => a.tcp.connections = n,
        }
    }

    /// Points the load at another port of the same host (for `compare`).
    pub fn set_port(&mut self, port: u16) {
        fn with_port(url: &str, port: u16) -> String {
            match crate::net::Endpoint::parse(url) {
                Ok(ep) => {
                    let scheme = url.split("://").next().unwrap_or("http");
                    let host = if ep.addr.is_ipv6() {
                        format!("[{}]", ep.addr.ip())
                    } else {
                        ep.host.clone()
                    };
                    format!("{scheme}://{host}:{port}{}", ep.path)
                }
                Err(_) => url.to_string(),
            }
        }
        match self {
            Load::Udp(a) => a.target.set_port(port),
            Load::Http(a) => a.tcp.target = with_port(&a.tcp.target, port),
            Load::Ws(a) => a.tcp.target = with_port(&a.tcp.target, port),
        }
    }

    /// What the simulated swarm asks for.
    pub fn workload(&self) -> &crate::workload::WorkloadArgs {
        match self {
            Load::Udp(a) => &a.workload,
            Load::Http(a) => &a.workload,
            Load::Ws(a) => &a.workload,
        }
    }

    pub fn target(&self) -> String {
        match self {
            Load::Udp(a) => a.target.to_string(),
            Load::Http(a) => a.tcp.target.clone(),
            Load::Ws(a) => a.tcp.target.clone(),
        }
    }

    pub fn run(&self) -> Result<RunResult> {
        match self {
            Load::Udp(a) => crate::udp::run(a),
            Load::Http(a) => crate::http::run(a),
            Load::Ws(a) => crate::ws::run(a),
        }
    }
}
