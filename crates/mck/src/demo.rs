//! `mck demo`.

use std::process::ExitCode;

/// Arguments of `mck demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {}

pub fn run(_args: DemoArgs) -> Result<ExitCode, String> {
    Err("demo: not built yet".into())
}
