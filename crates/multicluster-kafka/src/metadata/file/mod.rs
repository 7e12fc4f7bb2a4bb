//! The file-backed metadata service (YAML or JSON, hot reloaded).

/// Placeholder replaced by the file service implementation.
#[derive(Debug)]
pub struct FileMetadataService;
