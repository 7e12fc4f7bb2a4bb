//! `mck`: the multicluster-kafka command line.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

use logging::LogFormat;

mod allocator;
mod args;
mod clusters;
mod consume;
#[cfg(feature = "demo")]
mod demo;
mod describe;
mod endpoint;
mod logging;
mod output;
mod plan;
mod progress;
mod stdio;
mod validate;

/// Read one logical stream from many Kafka clusters, and follow it as it moves.
#[derive(Debug, Parser)]
#[command(name = "mck", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How diagnostics on stderr look: plain `mck: …` lines, or one JSON object per
    /// line. `MCK_LOG` (e.g. `MCK_LOG=debug`) shows full tracing instead of plain lines.
    #[arg(long, value_enum, global = true, default_value_t = LogFormat::Text, env = "MCK_LOG_FORMAT")]
    log_format: LogFormat,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read streams and print their records, one per line; follows metadata edits.
    #[command(after_help = "Examples:\n  \
        mck consume streams.yaml --stream orders\n  \
        mck consume -b localhost:9092 -t orders -o -10 -e          # the last 10 of each partition\n  \
        mck consume -b localhost:9092 -t orders -o @-1h -f '%t [%p] @%o: %k %s\\n'\n  \
        mck consume streams.yaml -s orders -o 2026-11-30T10:00:00Z -c 100 --format kv\n  \
        mck consume streams.yaml -s orders --until latest --output out.jsonl \\\n      \
        --checkpoint-dir state/ -g my-group\n\n\
        Three regions in time order (regions.yaml: stream `orders` on clusters\n\
        eu, us and ap; a quiet region holds the others back at most --idle-timeout,\n\
        a region with a backlog is paced by --align):\n  \
        mck consume regions.yaml -s orders --order time --max-out-of-orderness 2s \\\n      \
        --idle-timeout 10s --align 1m\n\n\
        Records appear as they arrive (flushed when the stream goes idle, and at least\n\
        every 100 ms). Every option can also come from an MCK_* environment variable\n\
        (MCK_BROKERS, MCK_FROM, ...), named in each option's help.\n\n\
        Exit status: 0 when a bounded run completes, --count is reached, stdout's reader\n\
        goes away (| head) or a run is stopped by SIGINT/SIGTERM; 1 on an error, 2 on\n\
        bad arguments.")]
    Consume(Box<consume::ConsumeArgs>),
    /// Show streams, clusters, topics and partitions with their offsets (and a group's lag).
    #[command(after_help = "Examples:\n  \
        mck describe streams.yaml\n  \
        mck describe --metadata streams.yaml --stream orders --group my-group --json\n\n\
        Each cluster is shown with its bootstrap list and state: connected, unreachable,\n\
        rejected (credentials or TLS refused) or refused (a property librdkafka refuses,\n\
        by key).\n\n\
        Exit status: 0, also when clusters are unreachable or reject the client; 1 for a\n\
        bad file, an unknown stream id or a refused property (named on stderr).")]
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
        mck plan --json --metadata streams-old.yaml --metadata streams-new.yaml")]
    Plan(plan::PlanArgs),
    /// Watch a migration between two in-process clusters (no Kafka needed).
    #[cfg(feature = "demo")]
    Demo(demo::DemoArgs),
    /// Print a shell completion script (e.g. `mck completions bash > /etc/bash_completion.d/mck`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page, in roff (e.g. `mck man | man -l -`).
    Man,
}

#[derive(Debug, Args)]
struct ValidateArgs {
    #[command(flatten)]
    file: args::MetadataFile,
    /// Print the parsed streams as JSON (secrets redacted).
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    allocator::tune();
    args::set_command(Cli::command);
    let cli = Cli::parse();
    let log_format = cli.log_format;
    logging::init(log_format, std::io::stderr().is_terminal());
    let result = match cli.command {
        Command::Validate(a) => validate::run(a.file.required(), a.json),
        Command::Consume(a) => consume::run(*a),
        Command::Describe(a) => describe::run(a),
        Command::Plan(a) => plan::run(a),
        #[cfg(feature = "demo")]
        Command::Demo(a) => demo::run(a),
        Command::Completions { shell } => {
            let mut out = stdio::Stdout::new();
            clap_complete::generate(shell, &mut Cli::command(), "mck", &mut out);
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => clap_mangen::Man::new(Cli::command())
            .render(&mut stdio::Stdout::new())
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| format!("stdout: {e}")),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            match log_format {
                LogFormat::Json => tracing::error!("{e}"),
                LogFormat::Text => stdio::say!("mck: error: {e}"),
            }
            ExitCode::from(1)
        }
    }
}
