//! `mck`: the multicluster-kafka command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod validate;

/// Read one logical stream from many Kafka clusters, and follow it as it moves.
#[derive(Debug, Parser)]
#[command(name = "mck", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse and check a metadata file; print its streams or the located error.
    #[command(after_help = "Examples:\n  \
        mck validate streams.yaml\n  \
        mck validate --json streams.json\n\n\
        Exit status: 0 when the file is valid, 1 when it is not, 2 on bad arguments.")]
    Validate {
        /// The metadata file (YAML or JSON; Flink's layout or ours).
        file: PathBuf,
        /// Print the parsed streams as JSON (secrets redacted).
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate { file, json } => validate::run(&file, json),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mck: error: {e}");
            ExitCode::from(1)
        }
    }
}
