//! The status page's samples of the store: the core's ([`shoal_tracker::samples`]), taken
//! by the sampler thread and read by the status page, `/metrics` and the API.

pub use shoal_tracker::samples::*;
