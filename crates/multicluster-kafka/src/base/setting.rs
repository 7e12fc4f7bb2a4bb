//! An invalid setting of the builder: the error every check of the settings returns,
//! here at the bottom so that the plain types that check themselves can return it.

/// A setting of the builder that is invalid, alone or with others.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {message}")]
#[non_exhaustive]
pub struct ConfigError {
    /// The builder setting at fault (`stream_ids`, `parallelism`, `group_id`, …).
    pub setting: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(setting: &'static str, message: impl Into<String>) -> Self {
        ConfigError {
            setting,
            message: message.into(),
        }
    }
}
