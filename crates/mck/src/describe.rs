//! `mck describe`.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `mck describe`.
#[derive(Debug, clap::Args)]
pub struct DescribeArgs {
    /// The metadata file.
    #[arg(long)]
    pub metadata: PathBuf,
    /// Streams to show (all when none is given).
    #[arg(long = "stream", value_name = "ID")]
    pub streams: Vec<String>,
    /// Consumer group whose committed offsets and lag to show.
    #[arg(long = "group", value_name = "ID")]
    pub group: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_args: DescribeArgs) -> Result<ExitCode, String> {
    Err("describe: not built yet".into())
}
