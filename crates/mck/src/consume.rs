//! `mck consume`.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `mck consume`.
#[derive(Debug, clap::Args)]
pub struct ConsumeArgs {
    /// The metadata file (followed while the command runs).
    #[arg(long)]
    pub metadata: PathBuf,
}

pub fn run(_args: ConsumeArgs) -> Result<ExitCode, String> {
    Err("consume: not built yet".into())
}
