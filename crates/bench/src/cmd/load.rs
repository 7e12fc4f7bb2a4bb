//! The options every end-to-end read measurement shares: the shape of the topic it
//! pre-fills and how many rounds it runs. The record count stays with each
//! subcommand, sized to what it measures.

/// The topic a measurement pre-fills on each of its clusters, and its rounds.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct Load {
    /// Value size in bytes (keys are 8 B).
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Partitions of each cluster's topic.
    #[arg(long, default_value_t = 8)]
    pub partitions: i32,
    /// Measured rounds; each runs every side once, the sides in turn.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}
