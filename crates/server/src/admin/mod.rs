//! The admin listener: Prometheus metrics (`/metrics`), the status page (`/`), and the
//! token-protected JSON API (`/api/...`).
//!
//! The admin side reads the tracker through one narrow handle, [`TrackerView`], built by
//! `Tracker::start`, and owns what only it serves: the admin token ([`token`]) and the
//! status page's samples ([`samples`], taken by the [`sampler`] thread).
//!
//! - [`server`]: the listener, the router and the bearer-token check.
//! - [`reply`]: the call and the response shapes every handler shares.
//! - [`api`]: the JSON API; [`page`]: the status page; [`metrics`]: `/metrics`.
//! - [`tallies`]: requests counted through the metrics facade, by protocol.

pub mod api;
pub mod metrics;
pub mod page;
pub mod private_api;
pub mod reply;
pub mod sampler;
pub mod samples;
pub mod server;
pub mod tallies;
pub mod token;
pub mod view;

pub use reply::{Body, Call};
pub use sampler::Sampler;
pub use server::{route, AdminServer};
pub use token::AdminToken;
pub use view::TrackerView;
