/// Placeholder replaced by the single-cluster service implementation.
#[derive(Debug)]
pub struct SingleClusterMetadataService;
