//! The crate's one error type.

/// What can go wrong reading a NexusPHP site's rows.
#[derive(Debug, thiserror::Error)]
pub enum NexusError {
    /// A PHP pattern of the allow list that shoal cannot compile.
    #[error("pattern {pattern:?}: {why}")]
    Pattern { pattern: String, why: String },
    /// A setting whose value is not what NexusPHP stores there.
    #[error("setting {name} = {value:?}: {why}")]
    Setting {
        name: String,
        value: String,
        why: &'static str,
    },
}
