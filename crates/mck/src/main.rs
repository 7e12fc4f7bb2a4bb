//! `mck`: the multicluster-kafka command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod consume;
mod demo;
mod describe;
mod output;
mod plan;
mod progress;
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
    /// Read streams and print their records, one per line; follows metadata edits.
    #[command(after_help = "Examples:\n  \
        mck consume --metadata streams.yaml --stream orders\n  \
        mck consume --metadata streams.yaml --stream orders --until latest --output out.jsonl \\\n      \
        --checkpoint-dir state/ --group my-group\n\n\
        Exit status: 0 when a bounded run completes or a run is stopped by SIGINT/SIGTERM,\n\
        1 on an error, 2 on bad arguments.")]
    Consume(Box<consume::ConsumeArgs>),
    /// Show streams, clusters, topics and partitions with their offsets (and a group's lag).
    #[command(after_help = "Examples:\n  \
        mck describe --metadata streams.yaml\n  \
        mck describe --metadata streams.yaml --stream orders --group my-group --json\n\n\
        An unreachable cluster is marked in the output; the exit status stays 0.")]
    Describe(describe::DescribeArgs),
    /// Parse and check a metadata file; print its streams or the located error.
    #[command(after_help = "Examples:\n  \
        mck validate streams.yaml\n  \
        mck validate --json streams.json\n\n\
        Exit status: 0 when the file is valid, 1 when it is not, 2 on bad arguments.")]
    Validate(ValidateArgs),
    /// Show what would change between two metadata files.
    #[command(after_help = "Examples:\n  \
        mck plan streams-old.yaml streams-new.yaml\n  \
        mck plan --json streams-old.yaml streams-new.yaml")]
    Plan(plan::PlanArgs),
    /// Watch a migration between two in-process clusters (no Kafka needed).
    Demo(demo::DemoArgs),
}

#[derive(Debug, Args)]
struct ValidateArgs {
    /// The metadata file (YAML or JSON; Flink's layout or ours).
    file: PathBuf,
    /// Print the parsed streams as JSON (secrets redacted).
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Diagnostics go to stderr; `MCK_LOG` sets the filter. By default: our warnings,
    // and none of librdkafka's own log lines (they repeat every connection failure;
    // the commands report cluster errors themselves). `MCK_LOG=warn` shows them too.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MCK_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,librdkafka=off,rdkafka=off")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Validate(a) => validate::run(&a.file, a.json),
        Command::Consume(a) => consume::run(*a),
        Command::Describe(a) => describe::run(a),
        Command::Plan(a) => plan::run(a),
        Command::Demo(a) => demo::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mck: error: {e}");
            ExitCode::from(1)
        }
    }
}
