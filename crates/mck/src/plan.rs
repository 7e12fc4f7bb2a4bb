//! `mck plan OLD NEW`.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `mck plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The metadata file in force now.
    pub old: PathBuf,
    /// The metadata file about to replace it.
    pub new: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_args: PlanArgs) -> Result<ExitCode, String> {
    Err("plan: not built yet".into())
}
